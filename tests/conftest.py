"""Shared fixtures: one embedded ClickHouse store per test process, a fresh database per test.

chdb opens one store per process at a time, so every in-process test uses the same store
(``store_dsn``) and isolates itself with its own database (``database``). Tests that need a
store of their own run the CLI in a subprocess.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import settings

os.environ["DPCH_ALLOW_FIXED_SEED"] = "1"  # tests use fixed noise seeds; production refuses them

import dpch  # noqa: E402
from dpch.fixtures import tables  # noqa: E402
from dpch.store.engine import Engine  # noqa: E402

_counter = itertools.count()

if os.environ.get("DPCH_NO_ENGINE"):
    # the fast tier's check (issue 25): with DPCH_NO_ENGINE=1 a test that opens embedded ClickHouse in this
    # process fails, so one missing its ``engine`` mark shows up in ``DPCH_NO_ENGINE=1 pytest -m "not
    # engine"`` (tests that run ClickHouse in a subprocess are marked by module: ENGINE_MODULES below)
    def _no_engine(self: Engine, *args: object, **kwargs: object) -> None:
        raise RuntimeError("the fast tier opened embedded ClickHouse: mark this test `engine`")

    Engine.__init__ = _no_engine  # type: ignore[method-assign]


# Hypothesis runs derandomized (a fixed seed per test), so no verdict depends on the run — in
# particular whether a mutant is caught (docs/development.md). HYPOTHESIS_PROFILE=dev explores randomly.
# No deadline in any profile: hypothesis's default 200 ms per example failed a run on a loaded machine
# (issue 25, "A flake"); a verdict must not depend on the machine's speed.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.register_profile("dev", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def store_dsn(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"chdb://{tmp_path_factory.mktemp('store')}"


@pytest.fixture(scope="session")
def keeper(store_dsn: str):
    """Holds the store open for the whole session, so tests do not pay 0.3 s per reopen."""
    engine = Engine(store_dsn)
    yield engine
    engine.close()


@pytest.fixture
def database(keeper: Engine, request: pytest.FixtureRequest) -> str:
    name = f"t{next(_counter)}_{request.node.name[:40]}"
    name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    yield name
    keeper.command(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def connect(store_dsn: str, database: str, keeper: Engine):
    """Opens sessions on this test's database; closes them at teardown."""
    sessions: list[dpch.Session] = []

    def _connect(**kwargs) -> dpch.Session:
        kwargs.setdefault("seed", 12345)
        # tests opt in to a default budget (ε 3, δ 1e-6) for analysts they give none; without it an
        # analyst the data owner set no budget for is refused (NoBudgetSet), as in production
        kwargs.setdefault("default_budget", dpch.Budget())
        session = dpch.connect(store_dsn, database=database, **kwargs)
        sessions.append(session)
        return session

    yield _connect
    for s in sessions:
        s.close()


@pytest.fixture(scope="session")
def visits_db(keeper: Engine, store_dsn: str) -> str:
    """A database holding the fixture tables visits, people and regions (read-only; loaded once)."""
    engine = Engine(store_dsn, database="visits_fixture")
    tables.load_all(engine)
    engine.close()
    return "visits_fixture"


@pytest.fixture(scope="session")
def ch_server(tmp_path_factory: pytest.TempPathFactory):
    """A test-only ClickHouse HTTP endpoint over its own chdb store, with ClickHouse's in-process test
    Keeper (tests/chendpoint.py): dpch processes connect to it with http:// DSNs, as to a server."""
    from tests.chendpoint import start

    with start(tmp_path_factory.mktemp("chserver") / "store", keeper=True) as endpoint:
        yield endpoint


@pytest.fixture
def server_db(ch_server, request: pytest.FixtureRequest) -> str:
    """A fresh database on :func:`ch_server` for this test (dropped afterwards)."""
    name = f"s{next(_counter)}_{request.node.name[:40]}"
    name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    yield name
    engine = Engine(ch_server.dsn())
    try:
        engine.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")
    finally:
        engine.close()


#: fixtures that start embedded ClickHouse (directly or through the store they share), and test folders
#: whose tests all do (CLI and server processes, clusters, end-to-end runs)
ENGINE_FIXTURES = frozenset({"store_dsn", "keeper", "connect", "database", "visits_db", "cluster_server"})
ENGINE_FOLDERS = frozenset({"cli", "server", "e2e", "store", "dbapi", "audit", "soundness"})
#: modules some of whose tests start ClickHouse another way (a subprocess, a test endpoint, an engine of
#: their own): all their tests are marked, so the fast tier never starts one
ENGINE_MODULES = frozenset({
    "test_crash.py", "test_crash_group_commit.py", "test_filter_kinds.py", "test_group_admission.py",
    "test_owner_filter_options.py", "test_renewal.py", "test_running_totals.py", "test_shared_budget.py",
    "test_shared_failures.py", "test_shared_load.py", "test_watches.py", "test_watches_mutants.py",
    "test_check.py", "test_plan_cache.py", "test_top_k.py", "test_watch.py", "test_watch_mutants.py",
    "test_suggest.py", "test_verified_rows.py", "test_corpus.py", "test_emit_trees.py", "test_guard_values.py",
    "test_pinned_settings.py", "test_docker_files.py"})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m "not engine"`` (the fast tier) the folders and modules whose every test is marked ``engine``
    are not even imported: they would be deselected anyway, and importing them (and rewriting their
    asserts) was a third of the fast tier's time. Any other selection collects everything."""
    if config.getoption("markexpr", "") != "not engine":
        return None
    # the same rule as the marking below: a module by its name or by its own folder's (a subfolder such as
    # server/console is not an engine folder)
    if collection_path.suffix == ".py" and (collection_path.name in ENGINE_MODULES
                                             or collection_path.parent.name in ENGINE_FOLDERS):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks ``engine`` every test that needs embedded ClickHouse (issue 25, "a fast tier"): ``pytest -m
    "not engine"`` runs the rest — plan-free arithmetic, mechanisms, filters, costs, formats — without
    starting one. A test that starts ClickHouse without these fixtures and outside these folders is marked
    by its module's name (:data:`ENGINE_MODULES`); ``DPCH_NO_ENGINE=1`` makes an in-process engine fail,
    so a forgotten mark shows."""
    for item in items:
        folder = item.path.parent.name
        if ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())) or folder in ENGINE_FOLDERS \
                or item.path.name in ENGINE_MODULES:
            item.add_marker(pytest.mark.engine)

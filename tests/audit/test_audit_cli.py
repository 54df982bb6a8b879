"""``dpch audit`` through the CLI for every kind of release, asserting on the printed summary (issue 24
item 6): Laplace and Gaussian measures, a quantile, partition selection with values and keys alone,
top-k with and without values, an accuracy-first release and a watch; and the examples of
docs/audit.md, run as written.

Before issue 24 every top-k audit crashed in the printed summary (``KeyError 'm0'``: the summary looked
up a sensitivity the top-k path never stated), including the docs' own example; the other tests call
``summary()`` only inside assert messages, so none reached it. These tests read what a data owner
reads: the CLI's output. Small trial counts (2 000 per side): they check the path end to end, not the
estimators' power (tests/audit/test_audit.py and its neighbours do that at full size).
"""

from __future__ import annotations

import re
import shlex
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpch.cli.main import cli
from dpch.store.engine import Engine
from dpch.store.quoting import quote_identifier
from tests.helpers import ROOT

TRIALS = "2000"

#: (kind, query, extra CLI options, lines the summary must print)
KINDS = [
    ("laplace count", "SELECT count(*) FROM visits", ["--epsilon", "1"],
     ["mechanism laplace", "claimed:    ε 1\n", "exact shift D→D′: m0 10 (sensitivity 10)"]),
    ("gaussian count", "SELECT count(*) FROM visits", ["--epsilon", "1", "--delta", "1e-6"],
     ["mechanism gaussian", "claimed:    ε 1, δ 1e-06", "profile:    δ(ε) lower bound", "at ε 0:    δ_lb"]),
    ("quantile", "SELECT quantile(0.9)(duration_min) FROM visits WHERE age >= 80", ["--epsilon", "1"],
     ["quantile(0.9)(duration_min) index", "profile:    not estimated (the release includes quantiles"]),
    ("partition selection", "SELECT occupation, count(*) FROM people GROUP BY occupation",
     ["--epsilon", "1", "--delta", "1e-5"], ["claimed:    ε 1, δ 1e-05", "exact shift D→D′: m0 1 (sensitivity 1)"]),
    ("key release", "SELECT occupation FROM people GROUP BY occupation", ["--epsilon", "1", "--delta", "1e-5"],
     ["claimed:    ε 1, δ 1e-05", "released ["]),
    ("top-k", "SELECT region FROM visits GROUP BY region ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top'",
     ["--epsilon", "1"], ["mechanism top-k (exponential (gumbel))", "pick 1",
                          "exact shift D→D′: m0 10 (sensitivity 10)", "profile:    not estimated (top-k selection"]),
    ("top-k with values",
     "SELECT region, count() AS n FROM visits GROUP BY region ORDER BY n DESC LIMIT 2 SETTINGS dp_select = 'top'",
     ["--epsilon", "1"], ["mechanism top-k (exponential (gumbel))", "exact shift D→D′: m0 10 (sensitivity 10)"]),
    ("gaussian top-k", "SELECT device FROM visits GROUP BY device ORDER BY count() DESC LIMIT 1 "
                       "SETTINGS dp_select = 'top', dp_mechanism = 'gaussian', dp_score_max = 100000",
     ["--epsilon", "1"], ["mechanism top-k (gaussian report noisy max)", "claimed:    ε 0.99"]),
    ("accuracy-first", "SELECT count(*) FROM visits SETTINGS dp_accuracy = 40, dp_confidence = 0.95, "
                       "dp_max_epsilon = 5", [],
     ["coordinate 0", "exact shift D→D′: normalized 1 (sensitivity 1)",
      "profile:    not estimated (accuracy-first release"]),
]


def _audit(store_dsn: str, database: str, *args: str, analyst: str = "default") -> str:
    out = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, "--analyst", analyst, "audit",
                                   *args, "--trials", TRIALS, "--seed", "7"])
    assert out.exit_code == 0, out.output
    return out.output


@pytest.mark.parametrize(("sql", "options", "expected"), [k[1:] for k in KINDS], ids=[k[0] for k in KINDS])
def test_every_release_kind_prints_its_summary(store_dsn, visits_db, sql, options, expected):
    output = _audit(store_dsn, visits_db, "--query", sql, *options)
    assert output.startswith(f"query:      {sql}\n"), output
    for line in ("neighbours: D′ = D ", f"mode:       fast, {TRIALS} trials per side", "ε_lb:       ",
                 "  threshold test:  ε_lb ", "  classifier:      ε_lb ",
                 "verdict:    consistent (all tests together at 95% confidence)", *expected):
        assert line in output, f"{line!r} missing from\n{output}"


def test_a_top_k_audit_writes_its_report(store_dsn, visits_db, tmp_path):
    sql = KINDS[5][1]
    output = _audit(store_dsn, visits_db, "--query", sql, "--epsilon", "1", "--report", str(tmp_path / "top.html"))
    page = (tmp_path / "top.html").read_text()
    assert f"report: {tmp_path / 'top.html'}" in output and "pick 1" in page and "consistent" in page


@pytest.fixture(scope="module")
def scratch(keeper: Engine, store_dsn: str):
    """A database of its own holding the fixture tables, for commands that write (budgets, watches)."""
    from dpch.fixtures import tables

    name = f"audit_cli_{uuid.uuid4().hex[:8]}"
    engine = Engine(store_dsn, database=name)
    tables.load_all(engine)
    engine.close()
    yield name
    keeper.command(f"DROP DATABASE IF EXISTS {quote_identifier(name)}")


def test_a_watch_audit_prints_its_summary(store_dsn, scratch):
    """The watch's threshold (38 000) is far above the question's value (28 860 capped rows), so no
    instance halts within the 10 questions on either side and no outcome has an ex-post claim: the
    audit says so (before issue 24 it stopped on an internal ValueError). The docs' example below
    audits a watch whose instances do halt."""
    runner = CliRunner()
    base = ["--dsn", store_dsn, "--database", scratch]
    assert runner.invoke(cli, [*base, "budget", "set", "--analyst", "wa", "--epsilon", "50",
                               "--delta", "1e-5"]).exit_code == 0
    created = runner.invoke(cli, [*base, "--analyst", "wa", "watch", "create", "north", "--epsilon", "40",
                                  "--threshold", "38000", "--lower", "37000", "--upper", "39000",
                                  "--table", "visits"])
    assert created.exit_code == 0, created.output
    sql = "SELECT count() FROM visits WHERE region = 'north' SETTINGS dp_watch = 'north'"
    output = _audit(store_dsn, scratch, "--query", sql, analyst="wa")
    for line in (f"watch north: {sql}", "neighbours: D′ = D ", f"{TRIALS} instances per side",
                 "no instance answered ⊤ within 10 questions on either side", "→ consistent"):
        assert line in output, f"{line!r} missing from\n{output}"


# -- the examples of docs/audit.md -----------------------------------------------------------------

DOCS = ROOT / "docs" / "audit.md"


def doc_commands(path: Path) -> list[list[str]]:
    """Every ``$ dpch …`` line of the console blocks in ``path``, split as a shell would (comments dropped)."""
    text = path.read_text(encoding="utf-8")
    blocks = re.findall(r"```console\n(.*?)```", text, flags=re.S)
    return [shlex.split(line[2:], comments=True) for block in blocks for line in block.splitlines()
            if line.startswith("$ dpch ")]


def test_the_docs_examples_run_as_written(store_dsn, scratch, tmp_path, monkeypatch):
    """Each command of docs/audit.md runs on the fixture tables (budget, watch and audit commands), with
    fewer trials and a fixed seed added to each audit; the suite's example is left to
    tests/audit/test_audit.py, which runs it."""
    commands = doc_commands(DOCS)
    audits = [c for c in commands if "audit" in c and "--suite" not in c]
    assert any("dp_select = 'top'" in " ".join(c) for c in audits), "the docs show a top-k audit"
    assert any("dp_watch" in " ".join(c) for c in audits), "the docs show a watch audit"
    monkeypatch.chdir(tmp_path)  # --report writes beside the reader
    runner = CliRunner()
    for command in commands:
        if "--suite" in command:
            continue
        args = ["--dsn", store_dsn, "--database", scratch, *command[1:]]
        if "audit" in command:
            args += ["--trials", TRIALS, "--seed", "11"]
        out = runner.invoke(cli, args)
        assert out.exit_code == 0, f"{shlex.join(command)}\n{out.output}"
        if "audit" in command:
            assert "consistent" in out.output, out.output

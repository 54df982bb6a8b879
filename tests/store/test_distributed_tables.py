"""``split_cap`` and verified tables on a Distributed table are refused in words, before any charge
(issue 26, part 3): the split point is read from one MergeTree's primary index and a verification
records one MergeTree's data parts, and a Distributed table's rows lie on several shards.

Runs against the test ClickHouse endpoint (tests/chendpoint.py) started with the test cluster
``test_shard_localhost`` (one shard: this process), so the Distributed table is real — ClickHouse's
own engine, shown as ``Distributed`` in system.tables — and a query on it runs. Negative control: the
same annotations on the local table are used, and the Distributed table without them is queried.
"""

from __future__ import annotations

import pytest

import dpch
from dpch.policy.verify import verify_rows_per_unit
from dpch.store.engine import Engine
from tests.helpers import ledger_rows

COLUMNS = "uid UInt32, v Int32 COMMENT 'dp: bounds=[0, 10]'"


@pytest.fixture(scope="module")
def cluster_server(tmp_path_factory: pytest.TempPathFactory):
    from tests.chendpoint import start

    with start(tmp_path_factory.mktemp("chcluster") / "store", keeper=False, cluster=True) as endpoint:
        yield endpoint


@pytest.fixture
def session(cluster_server, request: pytest.FixtureRequest):
    database = "d_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name[:40])
    s = dpch.connect(cluster_server.dsn(database), analyst="ana", seed=7, default_budget=dpch.Budget())
    engine = s.engine
    engine.command(f"CREATE TABLE {engine.table('local')} ({COLUMNS}) ENGINE = MergeTree ORDER BY uid")
    engine.command(f"INSERT INTO {engine.table('local')} SELECT number % 20, number % 10 FROM numbers(100)")
    engine.command(f"CREATE TABLE {engine.table('dist')} ({COLUMNS}) "
                   f"ENGINE = Distributed('test_shard_localhost', '{database}', 'local')")
    yield s
    s.close()
    _drop(cluster_server, database)


def _drop(cluster_server, database: str) -> None:
    admin = Engine(cluster_server.dsn())
    try:
        admin.command(f"DROP DATABASE IF EXISTS `{database}` SYNC")
    finally:
        admin.close()


def _annotate(session: dpch.Session, table: str, comment: str) -> None:
    session.engine.command(f"ALTER TABLE {session.engine.table(table)} MODIFY COMMENT '{comment}'")
    session.policy.reload()


def _refused(session: dpch.Session, sql: str) -> str:
    before = ledger_rows(session)
    with pytest.raises(dpch.PolicyError) as info:
        session.query(sql)
    assert ledger_rows(session) == before, "refused before anything is charged"
    return str(info.value)


def test_the_distributed_table_is_one(session):
    rows = session.engine.query_rows("SELECT engine FROM system.tables WHERE database = {db:String} AND name = 'dist'",
                                     {"db": session.engine.database})
    assert rows == [("Distributed",)]
    assert session.engine.query_rows(f"SELECT count() FROM {session.engine.table('dist')}") == [(100,)]


def test_split_cap_on_a_distributed_table_is_refused_in_words(session):
    _annotate(session, "dist", "dp: privacy_unit=uid, max_rows_per_unit=3, split_cap")
    message = _refused(session, "SELECT sum(v) FROM dist")
    assert "dist is a Distributed table" in message and "split_cap" in message
    assert "remove split_cap" in message  # what to do
    assert "Code:" not in message and "exp." not in message
    # negative controls: the same annotation on the local table, and the Distributed table without it
    _annotate(session, "local", "dp: privacy_unit=uid, max_rows_per_unit=3, split_cap")
    assert session.query("SELECT sum(v) FROM local").rows
    _annotate(session, "dist", "dp: privacy_unit=uid, max_rows_per_unit=3")
    assert session.query("SELECT sum(v) FROM dist").rows


def test_a_verification_of_a_distributed_table_is_refused(session):
    _annotate(session, "dist", "dp: privacy_unit=uid, max_rows_per_unit=5")
    with pytest.raises(dpch.PolicyError, match="dist is a Distributed table: its rows per unit cannot be verified"):
        verify_rows_per_unit(session.engine, session.policy, "dist")
    # a record that names the table anyway (an older dpch, or written by hand): refused when queried
    _annotate(session, "local", "dp: privacy_unit=uid, max_rows_per_unit=5")
    verify_rows_per_unit(session.engine, session.policy, "local")
    session.engine.command(f"INSERT INTO {session.engine.table('dpch_verified')} SELECT 'dist', unit, max_rows, "
                           f"parts, names, time FROM {session.engine.table('dpch_verified')} WHERE table = 'local'")
    session.policy.reload()
    message = _refused(session, "SELECT sum(v) FROM dist")
    assert "dist is a Distributed table" in message and "verification" in message and "dpch_verified" in message
    assert session.query("SELECT sum(v) FROM local").rows  # negative control: the local table's record is used


#: cap keys the two-stage tests compare under
CAP_KEYS = [(k, 3 * k + 1) for k in range(1, 5)]


def _same_values_under_each_key(engine, plan, fast: str, reference: str) -> None:
    """The two-stage form (``fast``) gives the one-stream cap's (``reference``) keys and measures, value
    for value, under each of :data:`CAP_KEYS`."""
    from dpch.pipeline.execute import exact

    for key in CAP_KEYS:
        two, one = exact(engine, plan, fast, key), exact(engine, plan, reference, key)
        assert two.keys == one.keys
        for name in two.measures:
            assert list(two.measures[name]) == list(one.measures[name]), (key, name)


def test_the_cap_on_shards_is_a_two_stage_aggregate_with_the_same_rows(cluster_server, request):
    """On a Distributed table the cap is ``groupArraySorted(k)`` per unit (each shard sends its per-unit
    state, at most k rows, issue 26 part 3), and keeps exactly the rows of the one-stream sorted cap
    under the same key: on two shards holding every row twice (a unit's rows on both, told apart by
    ``_shard_num``), for grouped sums and counts. Negative control: a different key keeps other rows."""
    from dpch.pipeline.execute import exact
    from dpch.sql.nodes import render
    from dpch.sql.rewrite import emit_tree

    database = "d_two_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name[:30])
    s = dpch.connect(cluster_server.dsn(database), analyst="ana", seed=7, default_budget=dpch.Budget())
    try:
        engine = s.engine
        # three columns besides the unit (g, v, w): each must come back from its own place in the kept tuple
        # (with two, a tupleElement index counted from the end picked the same ones)
        columns = ("uid UInt32, g UInt8 COMMENT 'dp: public, values=[0, 1, 2]', v Int32 COMMENT 'dp: bounds=[0, 10]', "
                   "w Int32 COMMENT 'dp: bounds=[0, 10]'")
        engine.command(f"CREATE TABLE {engine.table('local')} ({columns}) ENGINE = MergeTree ORDER BY uid")
        engine.command(f"INSERT INTO {engine.table('local')} SELECT number % 40, number % 3, number % 11, "
                       "number % 7 FROM numbers(600)")
        engine.command(f"CREATE TABLE {engine.table('dist')} ({columns}) "
                       f"ENGINE = Distributed('test_two_shards_localhost', '{database}', 'local') "
                       "COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=4'")
        s.policy.reload()
        plan = s.explain("SELECT g, count(*), sum(v), sum(w) FROM dist GROUP BY g").plan
        fast, reference = render(emit_tree(plan)), render(emit_tree(plan, fast_cap=False))
        assert "groupArraySorted(4)" in fast and "ARRAY JOIN" in fast and "groupArraySorted" not in reference
        keys = CAP_KEYS
        _same_values_under_each_key(engine, plan, fast, reference)
        # every unit has 30 rows (15 per shard): the cap keeps 4 per unit, 160 in all
        assert sum(exact(engine, plan, fast, keys[0]).measures["m0"]) == 160
        sums = {tuple(exact(engine, plan, fast, key).measures["m1"]) for key in keys}
        assert len(sums) > 1  # negative control: the key decides which rows, so the comparison can fail
    finally:
        s.close()
        _drop(cluster_server, database)


@pytest.mark.parametrize(("key", "groups"), [("g", None), ("g", 2), ("intDiv(v, 4)", None)])
def test_the_per_group_bound_on_shards_is_a_two_stage_aggregate_with_the_same_rows(cluster_server, request, key,
                                                                                   groups):
    """Under the per-group bound on a Distributed table, each unit's c rows per group are
    ``groupArraySorted(c)`` per (unit, group) (the first stage on the shards), and they are exactly the
    rows of the one-stream ``LIMIT c BY unit, keys`` under the same key: on two shards holding every row
    twice, for counts and sums, with every group kept and with G = 2 of 3 groups per unit, and for a key
    computed from a column (the first stage groups by the expression its alias stands for). Negative
    control: a different key keeps other rows, so the comparison can fail."""
    from dpch.pipeline.execute import exact
    from dpch.sql.nodes import render
    from dpch.sql.rewrite import emit_tree

    database = "d_pg_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name[:30])
    s = dpch.connect(cluster_server.dsn(database), analyst="ana", seed=7, default_budget=dpch.Budget())
    columns = "uid UInt32, g UInt8 COMMENT 'dp: public, values=[0, 1, 2]', v Int32 COMMENT 'dp: bounds=[0, 10]'"
    try:
        engine = s.engine
        engine.command(f"CREATE TABLE {engine.table('local')} ({columns}) ENGINE = MergeTree ORDER BY uid")
        engine.command(f"INSERT INTO {engine.table('local')} SELECT number % 40, number % 3, number % 11 "
                       "FROM numbers(600)")
        engine.command(f"CREATE TABLE {engine.table('dist')} ({columns}) "
                       f"ENGINE = Distributed('test_two_shards_localhost', '{database}', 'local') "
                       "COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=30, max_rows_per_group=2'")
        s.policy.reload()
        asked = " SETTINGS dp_bound = 'groups'" + (f", dp_max_groups = {groups}" if groups else "")
        plan = s.explain(f"SELECT {key} AS k, count(*), sum(v) FROM dist GROUP BY k" + asked).plan
        assert plan.per_group and plan.restrict_groups == (groups is not None)
        fast, reference = render(emit_tree(plan)), render(emit_tree(plan, fast_cap=False))
        cut = 'LIMIT 2 BY "__unit", '  # c rows by unit and group (G groups by unit is LIMIT G BY "__unit")
        assert "groupArraySorted(2)" in fast and cut not in fast
        assert "groupArraySorted" not in reference and cut in reference
        keys = CAP_KEYS
        _same_values_under_each_key(engine, plan, fast, reference)
        # each unit has 10 rows in each group (5 per shard): 2 kept per group, in 3 groups or in G = 2
        assert sum(exact(engine, plan, fast, keys[0]).measures["m0"]) == 40 * 2 * (groups or 3)
        sums = {tuple(exact(engine, plan, fast, key).measures["m1"]) for key in keys}
        assert len(sums) > 1  # negative control: the key decides which rows
    finally:
        s.close()
        _drop(cluster_server, database)

"""Every setting dpch pins (dpch/sql/pins.py) matters: each case runs dpch's emitted query under a server
profile that sets it, once with the pin and once with only that pin dropped (the negative control).
Unpinned, the exact pre-noise value is wrong — doubled, truncated, empty, partial; pinned, it is the
value of the same query on the whole table without the profile (or, for limits, ClickHouse fails the
query: after the charge that trips the analyst's lock, which is what a limit should do, instead of
releasing a truncated value).

The profile is given as the client's settings (what a server profile or a user's defaults are to a
query: below the query's own SETTINGS clause). Distributed cases run dpch's SQL with its table
replaced by two in-process shards holding different rows of it —
``remote('127.0.0.1,localhost', view(SELECT * FROM db.t WHERE s = shardNum()))``, chdb's own
distributed executor (ClickHouse 26.9) — and compare with the query on the table itself. What this
stand-in cannot show (network, replicas, a real cluster's placement) is in docs/serving.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import ClickHouseError
from sqlglot import exp

import dpch
from dpch.sql.cap import keyed
from dpch.sql.nodes import render
from dpch.sql.pins import PINS
from dpch.sql.rewrite import emit_tree
from tests.helpers import refused_uncharged

#: each unit (uid) has 6 rows, 3 on each shard (s alternates every 500 rows), v differs between them; one g
#: per unit; n is NULL for every 7th unit. 64-row granules, so read limits cut a table of 3000 rows mid-way.
TABLE = ("CREATE TABLE {t} (uid UInt32, s UInt8, g String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', "
         "v Int32 COMMENT 'dp: bounds=[0, 100]', n Nullable(String)) ENGINE = MergeTree ORDER BY tuple() "
         "SETTINGS index_granularity = 64 "
         "COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=2, max_groups_per_unit=1'")
ROWS = ("INSERT INTO {t} SELECT number % 500, 1 + intDiv(number, 500) % 2, ['a', 'b', 'c'][number % 500 % 3 + 1], "
        "number % 97, if(number % 500 % 7 = 0, NULL, toString(number % 500 % 5)) FROM numbers(3000)")
DIM = "CREATE TABLE {t} (g String, label String) ENGINE = MergeTree ORDER BY g COMMENT 'dp: public'"

SUM = "SELECT sum(v) FROM t"  # the cap's ORDER BY … LIMIT 2 BY unit form
COUNT = "SELECT count() FROM t"  # the cap's Σ least(rows, 2) per unit form
GROUPED = "SELECT g, count() FROM t GROUP BY g"  # three groups, keys declared
EMPTY_SUM = "SELECT sum(v) FROM t WHERE v > 1000"
EMPTY_COUNT = "SELECT count() FROM t WHERE v > 1000"
RESTRICTED = "SELECT n, count() FROM t GROUP BY n SETTINGS dp_delta = 1e-6"  # a key per unit, as (unit, key) pairs
#: the report of what the bound dropped reads the kept rows as (unit, tuple(key)) IN (a key per unit): a set
RESTRICTED_SET = "SELECT n, count() FROM t GROUP BY n SETTINGS dp_delta = 1e-6, dp_report_dropped = 1"
#: an analyst's IN list holding NULL (the groups-per-unit restriction compares keys in tuple(), NULL-safe
#: under either value, so it no longer shows this pin: tests/soundness/test_groups_unbiased.py)
NULL_IN = "SELECT count() FROM t WHERE n IN ('1', NULL)"
JOINED = "SELECT t.g, count() FROM t JOIN dim AS d ON t.g = d.g GROUP BY t.g"  # right side: the 3 rows of a, b, c

#: the table's row numbers, which the cap's order reads (dpch.sql.cap.row_identity): passed through the
#: view, so that each shard's rows keep the numbers they have in the table and the cap, under one key,
#: keeps the same rows on the shards as on the table (a Distributed table's shards number their own
#: rows, and the cap reads _shard_num there too)
ROW_NUMBER = "_part_starting_offset, _part_offset"
#: two shards, each holding the rows whose s is its number
SHARDS = "remote('127.0.0.1,localhost', view(SELECT *, " + ROW_NUMBER + " FROM {t} WHERE s = shardNum()){key})"
#: shard 1 as above, shard 2 unreachable (nothing listens on port 1: refused at once, no timeout)
ONE_SHARD_DOWN = "remote('127.0.0.1,127.0.0.1:1', view(SELECT *, " + ROW_NUMBER + " FROM {t} WHERE s = shardNum()))"
#: the cap key the emitted queries run with (one for all: the same rows kept in every run compared)
KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


@dataclass(frozen=True)
class Case:
    pin: str
    sql: str
    profile: dict[str, Any]
    #: the table replaced by this source ('' — the table itself)
    source: str = ""
    #: pins dropped in the negative control besides ``pin`` (one that is needed to let ``pin`` act)
    also: tuple[str, ...] = ()
    #: pinned, ClickHouse refuses the query (a limit reached) instead of answering
    fails: bool = False
    sharding_key: str = ""
    setup: tuple[str, ...] = field(default=())


CASES = [
    # a unit's rows on both shards: unmerged, each shard keeps 2 of the unit's rows (sum 52-like doubling)
    Case("distributed_group_by_no_merge", SUM, {"distributed_group_by_no_merge": 1}, SHARDS),
    Case("distributed_group_by_no_merge", GROUPED, {"distributed_group_by_no_merge": 2}, SHARDS),
    # LIMIT BY over the sharding key (the unit), not merged at the initiator: rows are not placed by it
    Case("optimize_distributed_group_by_sharding_key", SUM,
         {"optimize_skip_unused_shards": 1, "optimize_distributed_group_by_sharding_key": 1}, SHARDS,
         also=("optimize_skip_unused_shards",), sharding_key="uid"),
    # WHERE on the sharding key: only the shard v = 10 names (the first) is read, and the rows are on the second
    Case("optimize_skip_unused_shards", "SELECT count() FROM t WHERE v = 10 AND s = 2",
         {"optimize_skip_unused_shards": 1}, SHARDS, sharding_key="v"),
    Case("skip_unavailable_shards", SUM, {"skip_unavailable_shards": 1}, ONE_SHARD_DOWN, fails=True),
    Case("read_overflow_mode", SUM, {"max_block_size": 10, "max_rows_to_read": 50, "read_overflow_mode": "break"},
         fails=True),
    Case("read_overflow_mode", COUNT, {"max_block_size": 10, "max_rows_to_read": 50, "read_overflow_mode": "break"},
         fails=True),
    Case("read_overflow_mode_leaf", GROUPED,
         {"max_block_size": 10, "max_rows_to_read_leaf": 50, "read_overflow_mode_leaf": "break"}, fails=True),
    Case("result_overflow_mode", GROUPED,
         {"max_block_size": 1, "max_result_rows": 1, "result_overflow_mode": "break"}, fails=True),
    Case("sort_overflow_mode", SUM, {"max_block_size": 10, "max_rows_to_sort": 20, "sort_overflow_mode": "break"},
         fails=True),
    Case("group_by_overflow_mode", GROUPED,
         {"max_block_size": 10, "max_rows_to_group_by": 1, "group_by_overflow_mode": "break"}, fails=True),
    Case("set_overflow_mode", RESTRICTED_SET,
         {"max_block_size": 10, "max_rows_in_set": 1, "set_overflow_mode": "break"}, fails=True),
    # measured: the hash join's limit cuts the right side only with the parallel hash join (a profile's choice)
    Case("join_overflow_mode", JOINED, {"join_algorithm": "parallel_hash", "max_threads": 4, "max_block_size": 1,
                                        "max_rows_in_join": 1, "join_overflow_mode": "break"},
         fails=True),
    # the time limit is checked after the first block: 1 µs has always passed by then
    Case("timeout_overflow_mode", SUM,
         {"max_block_size": 10, "max_execution_time": 0.000001, "timeout_overflow_mode": "break"}, fails=True),
    Case("limit", GROUPED, {"limit": 1}),
    Case("offset", COUNT, {"offset": 1}),
    Case("offset", GROUPED, {"offset": 1}),
    Case("aggregate_functions_null_for_empty", EMPTY_SUM, {"aggregate_functions_null_for_empty": 1}),
    Case("empty_result_for_aggregation_by_empty_set", EMPTY_COUNT, {"empty_result_for_aggregation_by_empty_set": 1}),
    Case("transform_null_in", NULL_IN, {"transform_null_in": 1}),
    Case("apply_deleted_mask", SUM, {"apply_deleted_mask": 0}, setup=("DELETE FROM {t} WHERE uid < 100",)),
]


@pytest.fixture
def session(connect, database) -> dpch.Session:
    s = connect(analyst="pins")
    engine = s.engine
    engine.command(TABLE.format(t=engine.table("t")))
    engine.command(ROWS.format(t=engine.table("t")))
    engine.command(DIM.format(t=engine.table("dim")))
    engine.command(f"INSERT INTO {engine.table('dim')} SELECT ['a', 'b', 'c'][number + 1], ['A', 'B', 'C'][number + 1] "
                   "FROM numbers(3) UNION ALL SELECT concat('x', toString(number)), 'X' FROM numbers(97)")
    s.policy.reload()
    return s


def _emitted(session: dpch.Session, sql: str, drop: set[str]) -> str:
    """dpch's emitted SQL for ``sql``, without the pins named in ``drop``."""
    tree = emit_tree(session.explain(sql).plan)
    tree.set("settings", [s for s in tree.args["settings"] if s.this.name not in drop])
    return render(tree)


def _on(session: dpch.Session, sql: str, source: str, key: str) -> str:
    """``sql`` reading ``source`` instead of the table t (the test's substitution, once)."""
    if not source:
        return sql
    table = f'"{session.engine.database}"."t"'
    assert sql.count(f"{table} AS t0") == 1, sql
    return sql.replace(f"{table} AS t0",
                       source.format(t=session.engine.table("t"), key=f", {key}" if key else "") + " AS t0")


def _run(session: dpch.Session, sql: str, profile: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with session.engine.pool.client() as client:
        return sorted((tuple(r) for r in client.query(sql, parameters=keyed(sql, KEY) or None,
                                                      settings=profile or {}).result_rows), key=repr)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.pin}-{i}" for i, c in enumerate(CASES)])
def test_each_pin_keeps_the_exact_value(session, case):
    for statement in case.setup:
        session.engine.command(statement.format(t=session.engine.table("t")))
    right = _run(session, _emitted(session, case.sql, set()))  # the whole table, no profile
    pinned = _on(session, _emitted(session, case.sql, set()), case.source, case.sharding_key)
    unpinned = _on(session, _emitted(session, case.sql, {case.pin, *case.also}), case.source, case.sharding_key)
    assert pinned != unpinned
    # negative control: without the pin the profile changes the value, silently
    wrong = _run(session, unpinned, case.profile)
    assert wrong != right, f"{case.pin}: the profile did not change the unpinned value ({wrong})"
    if case.fails:
        with pytest.raises(ClickHouseError):
            _run(session, pinned, case.profile)
    else:
        assert _run(session, pinned, case.profile) == right


def test_shards_stand_in_holds_the_table(session):
    """The two-shard stand-in holds each row once: without any profile it gives the table's value,
    and a unit's rows lie on both shards (what lets an unmerged cap double a unit's contribution)."""
    t = session.engine.table("t")
    shards = SHARDS.format(t=t, key="")
    assert _run(session, f"SELECT shardNum(), count() FROM {shards} GROUP BY 1") == [(1, 1500), (2, 1500)]
    assert len(_run(session, f"SELECT uid FROM {t} GROUP BY uid HAVING uniqExact(s) = 2")) == 500
    for sql in (SUM, COUNT, GROUPED, RESTRICTED):
        emitted = _emitted(session, sql, set())
        assert _run(session, _on(session, emitted, SHARDS, "")) == _run(session, emitted)


@pytest.mark.parametrize("profile", [{"distributed_group_by_no_merge": 1}, {"distributed_group_by_no_merge": 2},
                                     {"optimize_skip_unused_shards": 1,
                                      "optimize_distributed_group_by_sharding_key": 1}])
def test_count_form_is_exact_on_shards_even_unpinned(session, profile):
    """Measured, not assumed: the COUNT form (Σ least(rows, k) per unit) counts per unit at the
    initiator, over a subquery; only the row read goes to the shards, so no profile above changes
    it even without the pins (the issue expected it to double too; on ClickHouse 26.9 it does not)."""
    right = _run(session, _emitted(session, COUNT, set()))
    drop = {"distributed_group_by_no_merge", "optimize_distributed_group_by_sharding_key",
            "optimize_skip_unused_shards"}
    for pins in (set(), drop):
        sql = _on(session, _emitted(session, COUNT, pins), SHARDS, "uid")
        assert _run(session, sql, profile) == right
    assert right == [(1000,)]  # 500 units, 2 rows each


def test_extremes_stay_out_of_the_result(session):
    """``extremes = 1`` appends a min row and a max row after the groups in text formats. dpch reads
    Native, which carries none, so today it changes nothing dpch reads: pinned so that no format
    ever mixes them with the groups. Unpinned, the TSV result has the two extra rows."""
    def tsv(sql: str) -> list[str]:
        with session.engine.pool.client() as client:
            return client.raw_query(sql, parameters=keyed(sql, KEY) or None, fmt="TSV",
                                    settings={"extremes": 1}).decode().splitlines()

    right = _run(session, _emitted(session, GROUPED, set()))
    assert len(tsv(_emitted(session, GROUPED, set()))) == len(right) == 3
    assert len(tsv(_emitted(session, GROUPED, {"extremes"}))) == 3 + 3  # a blank line, min, max
    assert _run(session, _emitted(session, GROUPED, {"extremes"}), {"extremes": 1}) == right  # Native: none


def test_distinct_limit_is_pinned_though_nothing_emitted_uses_distinct(session):
    """``distinct_overflow_mode = 'break'`` truncates a DISTINCT; no emitted query has one today (every
    emitted SQL of the corpus is checked), so the pin is defensive: shown here on a plain DISTINCT."""
    import json
    from pathlib import Path

    fixture = json.loads((Path(__file__).parent / "fixtures" / "emitted_sql.json").read_text())
    assert not any("DISTINCT" in texts["sql"].upper().split(" SETTINGS ")[0] for texts in fixture.values())
    sql = "SELECT count() FROM (SELECT DISTINCT number % 50 FROM numbers(1000))"
    profile = {"max_rows_in_distinct": 5, "distinct_overflow_mode": "break", "max_block_size": 10}
    assert _run(session, sql, profile) != [(50,)]
    with pytest.raises(ClickHouseError):
        _run(session, sql + " SETTINGS distinct_overflow_mode = 'throw'", profile)


def test_every_pin_is_a_setting_of_this_clickhouse(session):
    names = [pin.name for pin in PINS]
    known = session.engine.query_rows("SELECT name FROM system.settings WHERE has({n:Array(String)}, name)",
                                      {"n": names})
    assert {r[0] for r in known} == set(names)


def test_every_pin_has_a_case_or_a_reason():
    """Each pin added by issue 26 is shown to matter above, except max_parallel_replicas: parallel
    replicas need replicas that chdb cannot start (measured: a custom-key read through
    remote('127.0.0.1|localhost') tries the network), so it is pinned until they are tested."""
    shown = {c.pin for c in CASES} | {"extremes", "distinct_overflow_mode"}
    row_rule = {"join_use_nulls", "use_variant_as_common_type", "date_time_overflow_behavior", "enable_analyzer"}
    assert {pin.name for pin in PINS} - shown - row_rule == {"max_parallel_replicas"}


@pytest.mark.parametrize("name", ["distributed_group_by_no_merge", "read_overflow_mode", "Limit", "extremes"])
def test_analyst_cannot_set_a_pinned_setting(session, name):
    value = "'break'" if name == "read_overflow_mode" else "1"
    error = refused_uncharged(session, f"SELECT count() FROM t SETTINGS {name} = {value}")
    assert "dpch fixes it in every private query" in str(error)
    assert "exp." not in str(error) and "Code:" not in str(error)


def test_pins_win_over_the_profile_inside_subqueries(session):
    """The pins sit on the outermost SELECT; ClickHouse applies a query's SETTINGS to its subqueries and
    sends them to the shards: the cap inside the CTE runs under them (checked on the doubling case)."""
    emitted = _emitted(session, SUM, set())
    tree = emit_tree(session.explain(SUM).plan)
    assert isinstance(tree, exp.Select) and tree.args["settings"]
    assert all(not isinstance(node.args.get("settings"), list) for node in tree.find_all(exp.Subquery))
    sql = _on(session, emitted, SHARDS, "")
    assert _run(session, sql, {"distributed_group_by_no_merge": 1}) == _run(session, emitted)


def test_the_owner_docs_list_every_pin():
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "serving.md").read_text()
    assert "### Settings dpch pins" in text
    for pin in PINS:
        assert f"`{pin.name} = {pin.value!r}`" in text, pin.name


def test_a_pin_cannot_be_changed_after_it_is_made():
    """The pins are the proof's assumptions: a Pin is immutable (no code path can loosen one in place)."""
    with pytest.raises(AttributeError):
        PINS[0].value = "1"  # type: ignore[misc]

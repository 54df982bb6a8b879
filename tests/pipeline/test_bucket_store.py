"""The release store (issue 28, part 1; dpch.pipeline.bucket_store): a query over time buckets is answered
bucket by bucket, each bucket released once per analyst, and a moving range pays only for its new buckets.

Values are checked against ClickHouse's answer to the same question over whole buckets (at an ε so large
that the noise rounds away), costs against the ledger, and the clock is the session's, moved by the test."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from dpch import Budget
from dpch.errors import DpchError
from dpch.pipeline import bucket_store
from dpch.store import release_store
from tests.helpers import make_table

COLUMNS = ("uid UInt64, ts DateTime COMMENT 'dp: bounds=[\"2026-01-01\", \"2026-12-31\"]', "
           "region String COMMENT 'dp: public, values=[\"north\", \"south\"]', "
           "amount Float64 COMMENT 'dp: bounds=[0, 100]'")
#: final 300 s after a bucket ends; a cap that never binds here (so a released count is the true count)
COMMENT = "dp: privacy_unit=uid, max_rows_per_unit=100, final_after=300"
START = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp())
HOUR = 3600
HUGE = 1e9  # noise scale 100 / 1e9: every released count rounds to the true one


def rows(first: int, last: int) -> list[tuple]:
    """One row every 7 minutes from ``first`` to ``last`` (Unix seconds), 40 people, two regions."""
    return [(n % 40, datetime.fromtimestamp(t, UTC).replace(tzinfo=None), ("north", "south")[n % 2], float(n % 50))
            for n, t in enumerate(range(first, last, 420))]


def panel(start: int, end: int, *, extra: str = "", order: str = "ORDER BY time ASC LIMIT 1000") -> str:
    """Grafana's query builder time series (tests/sql/fixtures/bi_time.toml), macros expanded, hourly buckets."""
    return (f'SELECT toStartOfInterval(toDateTime(ts), INTERVAL 3600 second) as "time", count(*) {extra}'
            f'FROM events WHERE ( ts >= toDateTime({start}) AND ts <= toDateTime({end}) ) GROUP BY time {order}')


def truth(session, start: int, end: int) -> dict[datetime, int]:
    """ClickHouse's counts over the whole hours the range touches."""
    found = session.engine.query_rows(
        f"SELECT toStartOfInterval(ts, INTERVAL 3600 second) AS h, count() FROM {session.engine.table('events')} "
        f"WHERE h >= toStartOfInterval(toDateTime({start}), INTERVAL 3600 second) "
        f"AND h <= toStartOfInterval(toDateTime({end}), INTERVAL 3600 second) GROUP BY h")
    return {h: n for h, n in found}


@pytest.fixture
def events(connect):
    def make(analyst: str = "alice", comment: str = COMMENT, budget: Budget | None = None, seed: int = 12345):
        s = connect(analyst=analyst, default_budget=budget or Budget(1e12, 0.5), seed=seed)
        if not s.engine.table_exists("events"):
            make_table(s, COLUMNS, rows(START, START + 30 * HOUR), ["uid", "ts", "region", "amount"], name="events",
                       comment=comment)
        s.policy.reload()
        s.clock = lambda: START + 48 * HOUR  # every bucket of the data is final
        return s
    return make


def released(release) -> dict[datetime, int]:
    return {row[0]: round(row[1]) for row in release.rows}


def test_a_moving_range_pays_only_for_its_new_buckets_and_equals_clickhouse(events):
    s = events()
    first = s.query(panel(START + 1800, START + 5 * HOUR + 900), epsilon=HUGE)
    # whole buckets: the first and last hours the range touches are answered whole, as ClickHouse counts them
    assert released(first) == truth(s, START + 1800, START + 5 * HOUR + 900)
    assert len(first.rows) == 6 and first.cost.epsilon == HUGE
    moved = s.query(panel(START + 2 * HOUR + 1800, START + 8 * HOUR + 900), epsilon=HUGE)
    assert released(moved) == truth(s, START + 2 * HOUR + 1800, START + 8 * HOUR + 900)
    assert moved.cost.epsilon == HUGE  # hours 6–8: one release
    again = s.query(panel(START + 3 * HOUR, START + 7 * HOUR), epsilon=HUGE)
    assert again.cost.epsilon == 0 and again.measures == []
    assert s.budget().spent.epsilon == pytest.approx(2 * HUGE)  # two charges in the ledger, no more
    assert [r[0] for r in again.rows] == sorted(r[0] for r in again.rows)  # ORDER BY time ASC


def test_stored_buckets_are_re_served_exactly_and_only_missing_ones_are_noised_anew(events):
    s = events()
    first = s.query(panel(START, START + 4 * HOUR - 1), epsilon=0.5)
    later = s.query(panel(START + 2 * HOUR, START + 6 * HOUR - 1), epsilon=0.5)
    shared = {r[0]: r for r in first.rows} | {}
    for row, intervals in zip(later.rows, later.intervals, strict=True):
        if row[0] in shared:
            assert row == shared[row[0]]  # the same noisy value, not a new draw
            assert intervals == first.intervals[first.rows.index(row)]
    assert len([r for r in later.rows if r[0] in shared]) == 2 and later.cost.epsilon == 0.5


def test_the_store_is_never_served_across_analysts(events):
    alice, bob = events("alice"), events("bob", seed=54321)
    a = alice.query(panel(START, START + 6 * HOUR - 1), epsilon=0.5)
    b = bob.query(panel(START, START + 6 * HOUR - 1), epsilon=0.5)
    assert b.cost.epsilon == 0.5 and bob.budget().spent.epsilon == pytest.approx(0.5)
    assert [r[1] for r in a.rows] != [r[1] for r in b.rows]  # bob's own noise, not alice's release
    assert alice.query(panel(START, START + 6 * HOUR - 1), epsilon=0.5).cost.epsilon == 0
    assert bob.query(panel(START, START + 6 * HOUR - 1), epsilon=0.5).rows == b.rows


def test_another_shape_or_other_options_is_another_question(events):
    s = events()
    s.query(panel(START, START + 3 * HOUR - 1), epsilon=0.5)
    assert s.query(panel(START, START + 3 * HOUR - 1), epsilon=0.25).cost.epsilon == 0.25
    assert s.query(panel(START, START + 3 * HOUR - 1, extra=", sum(amount) "), epsilon=0.5).cost.epsilon == 0.5
    filtered = panel(START, START + 3 * HOUR - 1).replace(") GROUP BY", " AND region = 'north' ) GROUP BY")
    assert s.query(filtered, epsilon=0.5).cost.epsilon == 0.5
    assert s.query(filtered, epsilon=0.5).cost.epsilon == 0


def test_order_by_a_value_and_limit_apply_to_the_assembled_buckets(events):
    s = events()
    s.query(panel(START, START + 4 * HOUR - 1), epsilon=HUGE)
    top = s.query(panel(START, START + 8 * HOUR - 1, order="ORDER BY count(*) DESC, time ASC LIMIT 3"),
                  epsilon=HUGE)
    everything = truth(s, START, START + 8 * HOUR - 1)
    expected = sorted(everything.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert [(r[0], round(r[1])) for r in top.rows] == expected
    assert top.cost.epsilon == HUGE  # hours 4–7 were missing


def test_open_buckets_are_re_served_until_another_bucket_is_final_then_released_again(events):
    s = events()
    now = START + 10 * HOUR + 120  # 10:02: 09:00 ended 2 minutes ago (final 5 minutes after its end)
    s.clock = lambda: now
    first = s.query(panel(START + 6 * HOUR, now), epsilon=0.5)
    assert [r[0].hour for r in first.rows] == [6, 7, 8, 9, 10]
    assert any("2 buckets are not final" in n for n in first.notes)
    now += 120  # 10:04: nothing became final
    assert s.query(panel(START + 6 * HOUR, now), epsilon=0.5).rows == first.rows
    now += 120  # 10:06: 09:00 is final now, so the open buckets are released again (one release)
    second = s.query(panel(START + 6 * HOUR, now), epsilon=0.5)
    assert second.cost.epsilon == 0.5
    assert second.rows[:3] == first.rows[:3]  # 06–08 were final: re-served
    assert any("3 re-served" in n and "2 released now" in n for n in second.notes)  # 09:00 again, now final
    now += 600
    third = s.query(panel(START + 6 * HOUR, now), epsilon=0.5)
    assert third.cost.epsilon == 0 and third.rows == second.rows
    assert s.budget().spent.epsilon == pytest.approx(1.0)


def test_omitted_open_buckets_are_left_out_and_cost_nothing(events):
    s = events()
    now = START + 10 * HOUR + 120
    s.clock = lambda: now
    sql = panel(START + 6 * HOUR, now) + " SETTINGS dp_open_buckets = 'omit'"
    first = s.query(sql, epsilon=0.5)
    assert [r[0].hour for r in first.rows] == [6, 7, 8]
    assert any("left out" in n for n in first.notes)
    now += 3000
    assert s.query(panel(START + 6 * HOUR, now) + " SETTINGS dp_open_buckets = 'omit'", epsilon=0.5).cost.epsilon == 0.5
    assert s.query(panel(START + 6 * HOUR, now) + " SETTINGS dp_open_buckets = 'omit'", epsilon=0.5).cost.epsilon == 0


def test_explain_says_what_the_query_will_pay(events):
    s = events()
    before = s.explain(panel(START, START + 4 * HOUR - 1), epsilon=0.5)
    assert before.cost.epsilon == 0.5 and any("4 released now" in n for n in before.notes)
    s.query(panel(START, START + 4 * HOUR - 1), epsilon=0.5)
    after = s.explain(panel(START + HOUR, START + 3 * HOUR), epsilon=0.5)
    assert after.cost.epsilon == 0 and any("nothing released now (free)" in n for n in after.notes)
    shown = s.query("EXPLAIN DP " + panel(START, START + 5 * HOUR - 1), epsilon=0.5)
    text = "\n".join(r[0] for r in shown.rows)
    assert "1 released now" in text and "cost: ε 0.5" in text
    assert s.budget().spent.epsilon == pytest.approx(0.5)  # explaining spent nothing


def test_without_final_after_or_with_dp_store_off_every_query_is_released(events):
    s = events(comment="dp: privacy_unit=uid, max_rows_per_unit=100")
    assert s.query(panel(START, START + 3 * HOUR - 1), epsilon=0.5).cost.epsilon == 0.5
    assert s.query(panel(START, START + 3 * HOUR - 1), epsilon=0.5).cost.epsilon == 0.5
    stored = events("carol")
    off = panel(START, START + 3 * HOUR - 1) + " SETTINGS dp_store = 'off'"
    assert stored.query(off, epsilon=0.5).cost.epsilon == 0.5
    assert stored.query(off, epsilon=0.5).cost.epsilon == 0.5


def test_a_refused_release_charges_nothing_and_stores_nothing(events):
    s = events(budget=Budget(0.3, 0.5))
    with pytest.raises(DpchError, match="budget"):
        s.query(panel(START, START + 4 * HOUR - 1), epsilon=0.5)
    assert s.budget().spent.epsilon == 0
    assert release_store.size(s.engine)[0] == 0


def test_a_bad_store_setting_is_refused_in_words(events):
    s = events()
    with pytest.raises(DpchError, match="dp_open_buckets must be one of 'release', 'omit'"):
        s.query(panel(START, START + HOUR) + " SETTINGS dp_open_buckets = 'later'")


def test_superset_weeks_on_a_date_column_equal_clickhouse(connect):
    """A Superset time grain on a Date column (toMonday, tests/sql/fixtures/bi_time.toml), moved by a week."""
    s = connect(analyst="superset", default_budget=Budget(1e12, 0.5))
    make_table(s, "uid UInt64, day Date COMMENT 'dp: bounds=[\"2026-01-01\", \"2026-12-31\"]'",
               [(n % 30, date(2026, 1, 1) + timedelta(days=n % 120)) for n in range(3000)], ["uid", "day"],
               name="visits", comment="dp: privacy_unit=uid, max_rows_per_unit=1000, final_after=0")
    s.clock = lambda: START + 300 * 86400

    def weeks(first: str, last: str):
        return s.query(f"SELECT toMonday(day) AS __timestamp, count(*) AS count FROM visits WHERE day >= "
                       f"toDate('{first}') AND day < toDate('{last}') GROUP BY toMonday(day) ORDER BY __timestamp "
                       "LIMIT 10000", epsilon=HUGE)

    first, moved = weeks("2026-01-07", "2026-02-10"), weeks("2026-01-14", "2026-02-17")
    assert moved.cost.epsilon == HUGE and any("5 re-served" in n and "1 released now" in n for n in moved.notes)
    truth = dict(s.engine.query_rows(f"SELECT toMonday(day) AS w, count() FROM {s.engine.table('visits')} "
                                     "WHERE w >= toMonday(toDate('2026-01-14')) AND w <= toDate('2026-02-16') "
                                     "GROUP BY w"))
    assert {r[0]: round(r[1]) for r in moved.rows} == truth and len(truth) == 6
    assert [r[0] for r in first.rows][1:] == [r[0] for r in moved.rows][:-1]


def test_a_store_plan_is_immutable_and_spends_nothing(events):
    s = events()
    plan, opts = s.plan(panel(START, START + 3 * HOUR - 1), epsilon=0.5)
    planned = bucket_store.prepare(s, plan, opts, {"epsilon": 0.5})
    assert planned is not None and len(planned.missing) == 3 and planned.release is not None
    with pytest.raises(AttributeError):
        planned.missing = ()  # type: ignore[misc]
    assert s.budget().spent.epsilon == 0


def test_spacing_and_keyword_case_are_the_same_shape(events):
    s = events()
    s.query(panel(START, START + 3 * HOUR - 1), epsilon=0.5)
    respelled = panel(START, START + 3 * HOUR - 1).replace("SELECT", "select").replace(" FROM", "\n  from")
    assert s.query(respelled, epsilon=0.5).cost.epsilon == 0


def test_missing_buckets_on_both_sides_of_stored_ones_are_one_release_equal_to_clickhouse(events):
    s = events()
    s.query(panel(START + 3 * HOUR, START + 6 * HOUR - 1), epsilon=HUGE)  # hours 3–5 stored
    wider = s.query(panel(START, START + 9 * HOUR - 1), epsilon=HUGE)  # 0–2 and 6–8 missing: two runs
    assert released(wider) == truth(s, START, START + 9 * HOUR - 1) and len(wider.rows) == 9
    assert wider.cost.epsilon == HUGE and any("3 re-served" in n and "6 released now" in n for n in wider.notes)
    assert s.budget().spent.epsilon == pytest.approx(2 * HUGE)


def test_a_bucket_is_final_by_the_columns_own_time_zone(connect):
    """Day buckets of a Berlin column: at 23:30 UTC on 1 March it is already 2 March in Berlin, so Berlin's
    1 March (ended 30 minutes ago) is final and 2 March is the first open bucket — not UTC's 1 March."""
    s = connect(analyst="zones", default_budget=Budget(1e12, 0.5))
    make_table(s, "uid UInt64, ts DateTime('Europe/Berlin') COMMENT 'dp: bounds=[\"2026-01-01\", \"2026-12-31\"]'",
               [(1, datetime(2026, 3, 1, 12))], ["uid", "ts"], name="zoned",
               comment="dp: privacy_unit=uid, max_rows_per_unit=10, final_after=0")
    s.clock = lambda: datetime(2026, 3, 1, 23, 30, tzinfo=UTC).timestamp()
    sql = ("SELECT toStartOfDay(ts) AS d, count() FROM zoned WHERE ts >= toDateTime('2026-02-27 00:00:00', 'UTC') "
           "AND ts < toDateTime('2026-03-01 23:45:00', 'UTC') GROUP BY d")
    plan, opts = s.plan(sql, epsilon=1.0)
    planned = bucket_store.prepare(s, plan, opts, {"epsilon": 1.0})
    assert planned is not None
    # clickhouse-connect gives Berlin's midnights as UTC times: 2 March 00:00 Berlin is 1 March 23:00 UTC
    assert planned.boundary == release_store.bucket_text(datetime(2026, 3, 1, 23))
    assert planned.open == (datetime(2026, 3, 1, 23),)  # Berlin's 2 March: the only bucket not final


def test_final_buckets_missing_beside_stored_open_ones_are_released(events):
    """Only a *new open* bucket waits for the next release: final buckets never stored are released at once,
    even while the open buckets' last release is still served."""
    s = events()
    now = START + 10 * HOUR + 120
    s.clock = lambda: now
    s.query(panel(START + 8 * HOUR, now), epsilon=0.5)  # 08 final; 09 and 10 open, stored
    wider = s.query(panel(START + 5 * HOUR, now), epsilon=0.5)  # 05–07 final and missing
    assert [r[0].hour for r in wider.rows] == [5, 6, 7, 8, 9, 10] and wider.cost.epsilon == 0.5


def test_a_first_query_over_open_buckets_only_is_released(events):
    s = events()
    now = START + 10 * HOUR + 120
    s.clock = lambda: now
    first = s.query(panel(START + 9 * HOUR, now), epsilon=0.5)  # 09 and 10, both open, nothing stored
    assert [r[0].hour for r in first.rows] == [9, 10] and first.cost.epsilon == 0.5


def test_a_bucket_begun_since_the_last_release_waits_for_the_next_one(events):
    s = events()
    now = START + 10 * HOUR + 420  # 10:07: 09:00 final at 10:05
    s.clock = lambda: now
    first = s.query(panel(START + 6 * HOUR, now), epsilon=0.5)  # 06–09 final, 10 open
    now = START + 11 * HOUR + 60  # 11:01: 11:00 began, 10:00 not final until 11:05
    later = s.query(panel(START + 6 * HOUR, now), epsilon=0.5)
    assert later.cost.epsilon == 0 and later.rows == first.rows  # 11:00 left out, nothing released
    assert any(n.startswith("1 bucket begun since the last release is left out") for n in later.notes)
    assert later.release_id == first.release_id  # the release every bucket shown comes from
    now = START + 11 * HOUR + 360  # 11:06: 10:00 is final: one release, with the open 11:00
    third = s.query(panel(START + 6 * HOUR, now), epsilon=0.5)
    assert [r[0].hour for r in third.rows] == [6, 7, 8, 9, 10, 11] and third.cost.epsilon == 0.5


def test_the_notes_count_what_was_re_served_released_and_left_out(events):
    s = events()
    now = START + 10 * HOUR + 120
    s.clock = lambda: now
    first = s.query(panel(START + 6 * HOUR, now) + " SETTINGS dp_open_buckets = 'omit'", epsilon=0.5)
    assert first.notes[-1] == "2 buckets that are not final yet are left out (dp_open_buckets = 'omit')"
    again = s.query(panel(START + 5 * HOUR, now) + " SETTINGS dp_open_buckets = 'omit'", epsilon=0.5)
    store_note = next(n for n in again.notes if n.startswith("release store:"))
    assert store_note == (f"release store: 4 time buckets; 3 re-served from earlier releases ({first.release_id}), "
                          f"1 released now (release {again.release_id})")
    assert not any(" ()" in n for n in first.notes)  # no empty list of earlier releases


def test_order_by_a_value_that_may_be_null_puts_nulls_where_asked(events):
    s = events()
    bucket = "toStartOfInterval(toDateTime(ts), INTERVAL 3600 second)"
    value = f"CASE WHEN {bucket} >= '2026-03-01 02:00:00' THEN count(*) ELSE NULL END"
    sql = panel(START, START + 5 * HOUR - 1, extra=f", {value} AS c ", order="ORDER BY c DESC NULLS FIRST, time")
    first = s.query(sql, epsilon=HUGE)
    shown = [(r[0].hour, None if r[2] is None else round(r[2])) for r in first.rows]
    counts = truth(s, START, START + 5 * HOUR - 1)
    late = sorted(((h.hour, n) for h, n in counts.items() if h.hour >= 2), key=lambda hn: (-hn[1], hn[0]))
    assert shown == [(0, None), (1, None), *late]
    last = s.query(sql.replace("NULLS FIRST", "NULLS LAST"), epsilon=HUGE)
    assert [r[0].hour for r in last.rows][-2:] == [0, 1] and last.cost.epsilon == 0  # re-served, reordered


def test_explaining_an_all_stored_query_is_admissible_and_free(events):
    s = events(budget=Budget(0.6, 0.5))
    s.query(panel(START, START + 4 * HOUR - 1), epsilon=0.5)
    explained = s.explain(panel(START, START + 4 * HOUR - 1), epsilon=0.5)
    assert explained.admissible and explained.cost.epsilon == 0  # though 0.5 more would not fit the budget


def test_the_stores_size_counts_its_bucket_rows(events):
    s = events()
    assert release_store.size(s.engine) == (0, 0)  # before the first write
    s.query(panel(START, START + 3 * HOUR - 1), epsilon=0.5)
    rows, size = release_store.size(s.engine)
    assert rows == 3 and size > 0


def test_stored_values_of_every_kind_read_back_as_written(events):
    """The store's JSON keeps each value's type: times, dates, decimals, UUIDs, tuples, bytes, NULLs, floats."""
    from decimal import Decimal
    from uuid import UUID

    engine = events().engine
    row = (datetime(2026, 3, 1, 5, 6, 7, 891011), date(2026, 3, 1), Decimal("1.50"),
           UUID("12345678-1234-5678-1234-567812345678"), ("a", (1, 2.5)), b"\x00\xff", None, 0.1 + 0.2, 7, "é")
    bucket = release_store.bucket_text(row[0])
    intervals = [[None] * 9 + [(1.0, 2.0)]]
    release_store.read(engine, "ana", "shape", [], "b")  # creates the table, as every answer's first step does
    stored = release_store.StoredBucket(bucket, [row], intervals, False, "b", "r1")
    release_store.write(engine, "ana", "shape", [stored])
    got = release_store.read(engine, "ana", "shape", [bucket], "b")[bucket]
    assert got.rows == [row] and got.intervals == intervals
    assert (got.final, got.boundary, got.release_id) == (False, "b", "r1")
    assert release_store.read(engine, "bob", "shape", [bucket], "b") == {}  # another analyst's: nothing
    assert release_store.read(engine, "ana", "shape", [bucket], "other") == {}  # an open one, superseded
    with pytest.raises(AttributeError):
        got.final = True  # type: ignore[misc]


@pytest.mark.parametrize(("missing", "runs"), [
    ({0, 1, 2, 6, 7, 8}, [(0, 3), (6, 9)]),
    ({1, 2}, [(1, 3)]),
    ({8}, [(8, 9)]),
    ({7}, [(7, 8)]),  # the last but one: its run ends where the domain's last bucket begins
    (set(range(9)), [(0, 9)]),
    ({0, 2, 4}, [(0, 1), (2, 3), (4, 5)]),
    (set(), []),
])
def test_missing_buckets_are_cut_into_maximal_runs(missing, runs):
    """Each run is (its first bucket, the start of the bucket after its last): stored buckets between runs are
    never inside one (a release reading them would spend the units' bound on rows it does not show)."""
    assert bucket_store.missing_runs(list(range(9)), missing, 9) == runs

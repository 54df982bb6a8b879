"""Superset's series limit, answered as two releases (issue 28, part 2; :mod:`dpch.pipeline.series`).

The SQL is the shape ``get_sqla_query`` builds (apache/superset, ``superset/models/helpers.py``, commit
0500b4a274bf7f14042c892dc659f566d08969f2: ``inner_main_metric_expr`` labelled ``mme_inner__``, each series
column ``<name>__``, the subquery aliased ``series_limit`` and JOINed ON ``col = col__``), with the labels
``ClickHouseConnectEngineSpec._mutate_label`` gives (``superset/db_engine_specs/clickhouse.py``: the label
and the first six hex digits of its MD5). With ``time_groupby_inline`` true for ClickHouse, the inner query
has no time filter of its own.

Checked: the values equal ClickHouse's answer to the same SQL at a huge ε; the charge is the two releases',
composed; what dpch cannot answer, or a budget that fits only the first release, is refused before any
charge; several series columns keep only the chosen combinations.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

import pytest

import dpch
from tests.helpers import ledger_rows, make_table, refused_uncharged
from tests.soundness.exact_answers import mismatches, raw_rows

COLUMNS = ("uid UInt32, job String COMMENT 'dp: public, values=[\"nurse\", \"cook\", \"pilot\", \"clerk\"]', "
           "city String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', team LowCardinality(String), "
           "ts DateTime COMMENT 'dp: public, bounds=[\"2026-01-01\", \"2026-01-31\"]', "
           "x Float64 COMMENT 'dp: bounds=[0, 10]'")
#: units per job: 40 nurses, 30 cooks, 20 pilots, 10 clerks (the top 2 are nurse and cook, far apart);
#: each unit one row, on day 1 + uid % 5, in city a/b/c by uid % 3 (public) and team t0…t3 by uid % 4 (private)
SIZES = {"nurse": 40, "cook": 30, "pilot": 20, "clerk": 10}


def _rows():
    rows, uid = [], 0
    for job, size in SIZES.items():
        for _ in range(size):
            rows.append((uid, job, "abc"[uid % 3], f"t{uid % 4}", datetime(2026, 1, 1 + uid % 5, 10),
                         float(uid % 11)))
            uid += 1
    return rows


def label(name: str) -> str:
    """``ClickHouseConnectEngineSpec._mutate_label``: the label, '_', the first six hex digits of its MD5."""
    return f"{name}_{hashlib.md5(name.encode()).hexdigest()[:6]}"


def superset_sql(series: list[str], metric: str = "count(*)", limit: int = 2, where: str = "") -> str:
    """A time-series chart of ``metric`` by day and ``series``, limited to the top ``limit`` series."""
    grain = "toStartOfDay(toDateTime(ts))"
    outer = ", ".join(f"{c} AS {label(c)}" for c in series)
    inner = ", ".join(f"{c} AS {label(c + '__')}" for c in series)
    on = " AND ".join(f"{c} = {label(c + '__')}" for c in series)
    filters = f" AND {where}" if where else ""
    return (f"SELECT {grain} AS {label('__timestamp')}, {outer}, {metric} AS {label('count')} FROM t "
            f"JOIN (SELECT {inner}, {metric} AS {label('mme_inner__')} FROM t "
            f"{'WHERE ' + where + ' ' if where else ''}GROUP BY {', '.join(series)} "
            f"ORDER BY {label('mme_inner__')} DESC LIMIT {limit}) AS series_limit ON {on} "
            f"WHERE ts >= toDateTime('2026-01-01 00:00:00') AND ts < toDateTime('2026-01-06 00:00:00'){filters} "
            f"GROUP BY {', '.join(series)}, {grain} ORDER BY {label('count')} DESC LIMIT 10000")


@pytest.fixture
def session(connect):
    s = connect(analyst="superset", default_budget=dpch.Budget(epsilon=1e8, delta=1e-5))
    make_table(s, COLUMNS, _rows(), ["uid", "job", "city", "team", "ts", "x"],
               comment="dp: privacy_unit=uid, unique_units")
    return s


def _clickhouse(session, sql):
    return raw_rows(session.engine, session.engine.database, sql, ("t",))


def _nonempty(release):
    """The released rows of non-empty groups (dpch releases every day of the range, ClickHouse the days with
    rows); at a huge ε an empty group's count is within 0.01 of 0."""
    return [row for row in release.rows if abs(row[-1]) > 0.5]


@pytest.mark.parametrize("metric", ["count(*)", "sum(x)"])
def test_the_answer_is_clickhouses(session, metric):
    sql = superset_sql(["job"], metric)
    release = session.query(sql, epsilon=1e7)
    theirs = _clickhouse(session, sql)
    assert {r[1] for r in theirs} == {"nurse", "cook"}  # the true top 2
    assert not mismatches(_nonempty(release), theirs, [0.0, 0.0, 1e-3])


def test_the_charge_is_two_releases_composed(session):
    before = ledger_rows(session)
    release = session.query(superset_sql(["job"]), epsilon=0.5)
    assert ledger_rows(session) == before + 2
    assert release.cost.epsilon == pytest.approx(1.0)
    assert session.budget().spent.epsilon == pytest.approx(1.0)
    assert any("series limit" in note for note in release.notes)
    assert {r[1] for r in release.rows} <= set(SIZES)  # series of the released keys only


def test_several_series_columns_keep_the_chosen_combinations(session):
    """Two series columns: WHERE lists each column's chosen values and HAVING the chosen pairs; a pair of
    those values that was not chosen (possible with the lists alone) is not in the answer."""
    sql = superset_sql(["job", "city"], limit=3)
    release = session.query(sql, epsilon=1e7)
    theirs = _clickhouse(session, sql)
    chosen = {(r[1], r[2]) for r in theirs}
    assert len(chosen) == 3
    assert {(r[1], r[2]) for r in release.rows} == chosen
    assert not mismatches(_nonempty(release), theirs, [0.0, 0.0, 0.0, 1e-3])


def test_explain_shows_both_releases_and_spends_nothing(session):
    before = ledger_rows(session)
    explained = session.query("EXPLAIN DP " + superset_sql(["job"]), epsilon=0.5)
    text = "\n".join(r[0] for r in explained.rows)
    assert "two releases" in text and "together they cost ε 1" in text
    assert "release 1, the series keys" in text and "release 2, the series" in text
    assert ledger_rows(session) == before
    assert session.explain(superset_sql(["job"]), epsilon=0.5).cost.epsilon == pytest.approx(1.0)


def test_a_budget_for_one_release_only_is_refused_before_the_first(session):
    session.query("SELECT count() FROM t", epsilon=1e8 - 0.75)  # 0.75 left: one release of 0.5 fits, two do not
    before = ledger_rows(session)
    with pytest.raises(dpch.BudgetExceeded):
        session.query(superset_sql(["job"]), epsilon=0.5)
    assert ledger_rows(session) == before
    session.query(superset_sql(["job"]), epsilon=0.25)  # negative control: two of 0.25 fit
    assert ledger_rows(session) == before + 2


@pytest.mark.parametrize(("sql", "words"), [
    (superset_sql(["job"], metric="max(x)"), "max"),  # the top-N query's metric cannot be released
    (superset_sql(["job"]).replace("GROUP BY job, ", "GROUP BY job, uid, "), "privacy unit"),  # the series query
    (superset_sql(["team"]), "partition selection"),  # a private series key: its top-N needs δ
])
def test_what_dpch_cannot_answer_is_refused_before_any_charge(session, sql, words):
    refusal = refused_uncharged(session, sql, epsilon=0.5)
    assert words in f"{refusal} {refusal.hint or ''}"


def test_the_plan_shown_is_the_series_querys_with_the_whole_querys_fingerprint(session):
    """Clients are shown the series query's columns; the fingerprint (the release cache's key) is the whole
    query's, so two series limits differing only in N are not one entry."""
    plan, _ = session.plan(superset_sql(["job"]))
    assert plan.columns == [label("__timestamp"), label("job"), label("count")]
    other, _ = session.plan(superset_sql(["job"], limit=3))
    assert plan.query.fingerprint != other.query.fingerprint


def test_other_joins_with_a_subquery_are_still_refused(session):
    """Negative control: a JOIN of a subquery that is not a top-N (no LIMIT) is not read as a series limit."""
    sql = superset_sql(["job"]).replace(" LIMIT 2) AS series_limit", ") AS series_limit")
    refusal = refused_uncharged(session, sql, epsilon=0.5)
    assert "joins are supported with tables of the database only" in str(refusal)


# -- the split and the restriction, by value ---------------------------------------------------------------

def _limit(sql):
    import sqlglot

    from dpch.sql.series_limit import find
    return find(sqlglot.parse_one(sql, read="clickhouse"))


def test_several_series_columns_allow_only_the_chosen_pairs_not_their_cross_product(session):
    """Chosen (nurse, a) and (cook, b): the lists allow nurse/cook × a/b, four pairs; HAVING keeps two."""
    from dpch.sql.nodes import render
    from dpch.sql.series_limit import restricted

    limit = _limit(superset_sql(["job", "city"]))
    sql = render(restricted(limit, [("nurse", "a"), ("cook", "b"), ("nurse", "a")]))
    release = session.query(sql, epsilon=1e7)
    assert {(r[1], r[2]) for r in release.rows} == {("nurse", "a"), ("cook", "b")}
    assert not mismatches(_nonempty(release), _clickhouse(session, sql), [0.0, 0.0, 0.0, 1e-3])


def test_one_series_column_is_limited_by_its_list(session):
    from dpch.sql.nodes import render
    from dpch.sql.series_limit import restricted

    sql = render(restricted(_limit(superset_sql(["job"])), [("cook",), ("clerk",)]))
    assert {r[1] for r in session.query(sql, epsilon=1e7).rows} == {"cook", "clerk"}


def test_restricting_to_no_key_is_a_programming_error():
    from dpch.sql.series_limit import restricted

    with pytest.raises(ValueError, match="at least one"):
        restricted(_limit(superset_sql(["job"])), [])


@pytest.mark.parametrize("sql", [
    superset_sql(["job"]).replace("ON job = ", "ON (job = ").replace(" WHERE ts >=", ") WHERE ts >="),
    superset_sql(["job"]).replace(f"ON job = {label('job__')}", f"ON series_limit.{label('job__')} = job"),
    superset_sql(["job"]).replace(" JOIN (", " INNER JOIN ("),
])
def test_spellings_of_the_same_join_are_a_series_limit(sql):
    limit = _limit(sql)
    assert limit is not None and [name for _, name in limit.pairs] == [label("job__")]


@pytest.mark.parametrize("sql", [
    superset_sql(["job"]).replace(" JOIN (", " LEFT JOIN ("),  # keeps unmatched rows: not a restriction
    superset_sql(["job"]).replace(f"ON job = {label('job__')}", f"ON job = {label('job__')} AND city = 'a'"),
    superset_sql(["job"]).replace(f"ON job = {label('job__')}", f"ON job != {label('job__')}"),
    superset_sql(["job"]).replace(f"ON job = {label('job__')}", f"ON job = {label('job__')} OR job = 'x'"),
    superset_sql(["job"]).replace(f" AS series_limit ON job = {label('job__')}",
                                  f" AS series_limit USING ({label('job__')})"),
    superset_sql(["job"]).replace(f"ORDER BY {label('mme_inner__')} DESC ", ""),  # no ORDER BY: not a top-N
    "SELECT job, count() FROM t JOIN u ON t.uid = u.uid GROUP BY job",
    "SELECT job, count() FROM t GROUP BY job",
])
def test_other_joins_are_not_a_series_limit(sql):
    assert _limit(sql) is None


def test_the_split_cannot_be_changed():
    import dataclasses

    limit = _limit(superset_sql(["job"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        limit.pairs = ()


# -- what the answer needs ----------------------------------------------------------------------------------

def test_settings_in_the_query_apply_to_both_releases(session):
    before = ledger_rows(session)
    release = session.query(superset_sql(["job"]) + " SETTINGS dp_epsilon = 0.25")
    assert release.cost.epsilon == pytest.approx(0.5) and ledger_rows(session) == before + 2


def test_a_top_n_query_that_chooses_no_series_is_one_release(session):
    """An inner HAVING no noisy value passes: release 1 chose no key, so there is no series to release."""
    sql = superset_sql(["job"]).replace(f"ORDER BY {label('mme_inner__')} DESC",
                                        f"HAVING {label('mme_inner__')} > 1e9 ORDER BY {label('mme_inner__')} DESC")
    before = ledger_rows(session)
    release = session.query(sql, epsilon=1e7)
    assert release.rows == [] and release.columns == [label("__timestamp"), label("job"), label("count")]
    assert ledger_rows(session) == before + 1
    assert any("it chose none, so the series query was not run" in note for note in release.notes)


def test_a_top_n_query_over_one_listed_key(session):
    """Superset's filters apply to the inner query too: with one listed job, one candidate series."""
    sql = superset_sql(["job"], where="job IN ('pilot')")
    release = session.query(sql, epsilon=1e7)
    assert {r[1] for r in release.rows} == {"pilot"}


def test_the_note_names_both_releases_and_their_costs(session):
    release = session.query(superset_sql(["job"]), epsilon=0.5)
    (note,) = [n for n in release.notes if "series limit" in n]
    first_id, second_id = note.split("release ")[1].split(" ")[0], note.split("release ")[2].split(" ")[0]
    assert first_id and second_id and first_id != second_id and second_id == release.release_id
    assert note.count("ε 0.5") == 2


@pytest.mark.parametrize(("options", "shown"), [({"epsilon": 0.5}, "ε 1"),
                                                  ({"epsilon": 0.5, "delta": 1e-6, "mechanism": "gaussian"},
                                                   "ε 1, δ 2e-06")])
def test_explain_states_the_composed_cost_with_its_delta(session, options, shown):
    explained = session.query("EXPLAIN DP " + superset_sql(["job"]), **options)
    assert f"together they cost {shown}" in [r[0] for r in explained.rows]
    assert explained.notes == [f"EXPLAIN DP spends nothing; running the query would cost {shown}"]
    assert explained.cost.epsilon == 0.0


def test_a_private_series_key_is_listed_back_as_text(session):
    """team, a LowCardinality(String), has no public domain: its top-N is a partition selection (δ), and the
    series query lists the selected teams back (a String stand-in plans it beforehand)."""
    release = session.query(superset_sql(["team"]), epsilon=1e7, delta=1e-6)
    assert {r[1] for r in release.rows} <= {"t0", "t1", "t2", "t3"} and release.rows


@pytest.mark.parametrize(("sql", "words"), [
    # joined on the metric, not on a key: nothing to list back
    (superset_sql(["job"]).replace(f"ON job = {label('job__')}", f"ON x = {label('mme_inner__')}"),
     "not one of its GROUP BY keys"),
    # a Float64 key without a domain cannot be listed back as written
    (superset_sql(["x"]), "cannot list back"),
])
def test_series_keys_that_cannot_be_listed_back_are_refused_before_any_charge(session, sql, words):
    refusal = refused_uncharged(session, sql, epsilon=1.0, delta=1e-6)
    assert words in str(refusal)


@pytest.mark.parametrize("options", [{"accuracy": 5.0}, {"relative_error": 0.2, "max_epsilon": 5.0},
                                     {"watch": "w", "threshold": 10.0}])
def test_accuracy_targets_and_watches_are_refused_before_any_charge(session, options):
    """Their costs are settled after the fact, and an accuracy run may withhold an answer it was charged for:
    neither can be checked with the other release beforehand."""
    refusal = refused_uncharged(session, superset_sql(["job"]), **options)
    assert "accuracy targets and watches do not apply" in str(refusal)


def test_the_reported_time_is_within_the_calls(session):
    """The answer reports the time both releases took: positive, and no more than the call took (a bound that
    holds on any machine)."""
    import time

    for sql in (superset_sql(["job"]), "EXPLAIN DP " + superset_sql(["job"])):
        started = time.perf_counter()
        release = session.query(sql, epsilon=0.5)
        took_ms = (time.perf_counter() - started) * 1000.0
        assert 0.0 < release.elapsed_ms <= took_ms

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
           "city String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', team String, "
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

"""ClickHouse's names for the variance family (issue 16, part 5), and clear refusals of the
aggregates dpch does not compute privately.

``STD(age)`` used to be refused with "column age is used but not aggregated": the parser reads
STD as a plain function, so dpch looked inside it. Every spelling ClickHouse accepts now maps onto
dpch's variance statistics (STD is stddevPop, STDDEV is stddevSamp), verified against ClickHouse's
own ``system.functions`` and against its answers on the same data; an aggregate dpch cannot
compute is refused by name, with what to write instead.
"""

from __future__ import annotations

import pytest

from dpch import QueryRejected
from dpch.sql.aggregates import VARIANCE_ALIASES, VARIANCE_NAMES
from tests.helpers import make_table, refused_uncharged
from tests.soundness.exact_answers import assert_same_as_clickhouse, raw_rows

COLUMNS = ("uid UInt32, sex String COMMENT 'dp: public, values=[\"f\", \"m\"]', "
           "age UInt8 COMMENT 'dp: bounds=[18, 90]', spend Float64 COMMENT 'dp: bounds=[0, 100]'")
ROWS = [(1, "f", 30, 10.0), (1, "f", 31, 20.0), (2, "m", 45, 5.5), (3, "m", 60, 50.0), (3, "m", 61, 0.0),
        (4, "f", 22, 99.0), (5, "f", 88, 1.0), (6, "m", 35, 7.25)]


@pytest.fixture
def session(connect):
    s = connect(analyst="dialect")
    make_table(s, COLUMNS, ROWS, ["uid", "sex", "age", "spend"])
    return s


def test_names_are_clickhouses(keeper):
    """Each name dpch maps is one ClickHouse knows, with the case rule and the meaning it has there."""
    rows = keeper.query_rows("SELECT name, alias_to, case_insensitive FROM system.functions WHERE is_aggregate")
    functions = {name: (alias, bool(ci)) for name, alias, ci in rows}
    for name, variant in VARIANCE_NAMES.items():
        assert name in functions and not functions[name][1], f"{name}: ClickHouse spells it exactly"
        assert name.startswith(variant), name
    by_lower = {name.lower(): (name, alias, ci) for name, (alias, ci) in functions.items()}
    for alias, variant in VARIANCE_ALIASES.items():
        name, target, case_insensitive = by_lower[alias]
        assert case_insensitive, f"{name} is case-insensitive in ClickHouse"
        assert target == variant, f"ClickHouse's {name} is {target}, dpch maps it to {variant}"


SAME_AS_CLICKHOUSE = [
    "SELECT STD(age) FROM t",
    "SELECT std(spend) FROM t",
    "SELECT Std(age) AS s FROM t",
    "SELECT STDDEV(age) FROM t",
    "SELECT stddev(spend) FROM t",
    "SELECT VAR_POP(age), VAR_SAMP(age) FROM t",
    "SELECT var_pop(spend), var_samp(spend) FROM t",
    "SELECT STDDEV_POP(age), stddev_samp(age) FROM t",
    "SELECT varPopStable(age), varSampStable(spend), stddevPopStable(age), stddevSampStable(spend) FROM t",
    "SELECT sex, STD(age) AS s, STDDEV(spend) FROM t GROUP BY sex ORDER BY sex",
    "SELECT sex, count() FROM t GROUP BY sex HAVING STD(age) > 1 ORDER BY sex",
]


@pytest.mark.parametrize("sql", SAME_AS_CLICKHOUSE)
def test_exact_answer_equals_clickhouse(session, sql):
    assert_same_as_clickhouse(session, sql, raw_rows(session.engine, session.engine.database, sql, ("t",)))


def test_std_is_the_population_stddevs_statistic(session):
    """STD and stddevPop share one statistic (the same measures, no second charge)."""
    plan, _ = session.plan("SELECT STD(age) AS a, stddevPop(age) AS b, STDDEV(age) AS c, stddevSamp(age) AS d FROM t")
    variants = [plan.stats[out.stats[0]].variant for out in plan.outputs]
    assert variants == ["stddevPop", "stddevPop", "stddevSamp", "stddevSamp"]
    assert len(plan.measures) == 3, "count, Σ(x − mid), Σ(x − mid)² once for all four"


REFUSED = [
    ("SELECT VAR(age) FROM t", "VAR", "varSamp(x)"),
    ("SELECT VARPOP(age) FROM t", "VARPOP", "write varPop"),
    ("SELECT VARIANCE(age) FROM t", "VARIANCE", "write varSamp"),  # other SQLs' names: ClickHouse has none
    ("SELECT variance_pop(age) FROM t", "variance_pop", "write varPop"),
    ("SELECT stddevpop(age) FROM t", "stddevpop", "write stddevPop"),
    ("SELECT covarPop(age, spend) FROM t", "covarPop", "avg(x * y) - avg(x) * avg(y)"),
    ("SELECT corr(age, spend) FROM t", "corr", "avg(x * y)"),
    ("SELECT skewPop(age) FROM t", "skewPop", "avg(pow(x, 3))"),
    ("SELECT min(age) FROM t", "min", "quantile(p)(x) with p near 0"),
    ("SELECT max(spend) FROM t", "max", "quantile(p)(x) with p near 1"),
    ("SELECT uniq(age) FROM t", "uniq", "count(DISTINCT x)"),
    ("SELECT uniqCombined(age) FROM t", "uniqCombined", "uniqExact(x)"),
    ("SELECT any(age) FROM t", "any", "single rows"),
    ("SELECT quantileExact(0.5)(age) FROM t", "quantileExact", "quantile(p)(x)"),
    ("SELECT avgWeighted(age, spend) FROM t", "avgWeighted", "sum(x * w) / sum(w)"),
    ("SELECT sex, entropy(age) FROM t GROUP BY sex", "entropy", "no private form"),
]


@pytest.mark.parametrize(("sql", "name", "instead"), REFUSED)
def test_refused_by_name_with_what_to_write(session, sql, name, instead):
    refusal = refused_uncharged(session, sql, epsilon=1.0)
    text = f"{refusal} {refusal.hint or ''}"
    assert name in text and instead in text, text
    assert "not aggregated" not in text, "the misleading message is gone"


def test_std_is_no_longer_not_aggregated(session):
    """The regression of the issue: the query runs (noisy, with an interval)."""
    release = session.query("SELECT STD(age) FROM t", epsilon=1.0)
    (value,), (interval,) = release.rows[0], release.intervals[0]
    assert interval is not None and 0.0 <= interval[0] <= value <= interval[1] <= 36.0


def test_an_aggregate_alias_in_where_is_called_an_aggregate(session):
    """STD in WHERE gets the aggregate-in-WHERE message, not "STD() is not allowed"."""
    with pytest.raises(QueryRejected, match="aggregate functions are not allowed in WHERE"):
        session.query("SELECT count() FROM t WHERE STD(age) > 1")

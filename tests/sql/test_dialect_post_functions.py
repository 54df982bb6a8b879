"""Scalar functions over aggregates as post-processing (issue 16, part 5): ``POWER(SUM(age), 2)``,
``CAST(avg(x) AS Int64)``, ``toFloat64(count())`` … (:mod:`dpch.sql.post_functions`).

Post-processing of noisy values cannot leak, but it must be right twice:

- the value is ClickHouse's function of the noisy number: each function is evaluated on a grid
  of numbers (ties, negatives, out-of-range, NaN, ±inf) and compared with ClickHouse computing it
  on the same Float64, and exact (noise-free) answers equal ClickHouse's on the same data;
- the interval holds the function of the true value: each rule's image of many random intervals
  (fixed seed) contains the function at every sampled point (endpoints, 0, random points), with a
  negative control — the endpoint rule for an even power is caught on an interval holding 0.
"""

from __future__ import annotations

import math
import random
import re

import pytest
import sqlglot
from sqlglot import exp

from dpch.sql import functions, outputs, post_functions
from tests.helpers import make_table, refused_uncharged
from tests.soundness.exact_answers import assert_same_as_clickhouse, raw_rows

# -- values: dpch's evaluation equals ClickHouse's on the same Float64 ----------------------------

FUNCTIONS = [
    "pow(x, 2)", "POWER(x, 3)", "pow(x, -1)", "pow(x, -2)", "pow(x, 0.5)", "pow(2, x)",
    "abs(x)", "sqrt(x)", "cbrt(x)", "exp(x)", "exp2(x)", "exp10(x)", "log(x)", "ln(x)", "log2(x)", "log10(x)",
    "sign(x)", "round(x)", "round(x, 2)", "round(x, -1)", "floor(x)", "floor(x, 1)", "ceil(x, -2)", "trunc(x)",
    "trunc(x, 1)", "truncate(x)", "ceiling(x)",
    "CAST(x AS Int64)", "CAST(x AS Int32)", "CAST(x AS Int16)", "CAST(x AS Int8)", "CAST(x AS UInt8)",
    "CAST(x AS UInt16)", "CAST(x AS UInt32)", "CAST(x AS UInt64)", "CAST(x AS Float32)", "CAST(x AS Float64)",
    "x::Int64", "toInt64(x)", "toInt32(x)", "toInt8(x)", "toUInt8(x)", "toUInt64(x)", "toFloat64(x)", "toFloat32(x)",
]
NUMBERS = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.675, 1.005, 1245.0, -1245.0, 0.125, 3.7, -3.7, 44.9,
           255.9, 256.0, 300.5, -300.5, 40000.5, 3e9, -3e9, 5e9, 9.3e18, -9.3e18, 1e30, -1e30, 1e-300,
           math.nan, math.inf, -math.inf]


def _literal(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"toFloat64({v!r})"


def _post_expr(text: str) -> exp.Expr:
    """``text`` with its column x as the placeholder of a statistic s0 (what analysis makes)."""
    node = sqlglot.parse_one(f"SELECT {text}", read="clickhouse").expressions[0]
    return node.transform(lambda n: outputs.placeholder("s0") if isinstance(n, exp.Column) else n)


def _clickhouse(keeper, text: str, v: float):
    try:
        return keeper.query_rows("SELECT " + re.sub(r"\bx\b", _literal(v), text))[0][0]
    except Exception as error:  # noqa: BLE001 - ClickHouse refuses (NaN to an integer): dpch answers NULL
        assert "inf or nan" in str(error), error
        return None


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-15)


@pytest.mark.parametrize("text", FUNCTIONS)
def test_value_is_clickhouses(keeper, text):
    node = _post_expr(text)
    outputs.check(node, text)
    wrong = []
    for v in NUMBERS:
        mine, theirs = outputs.evaluate(node, {"s0": v}), _clickhouse(keeper, text, v)
        if not _same(mine, theirs):
            wrong.append(f"{text} at {v!r}: dpch {mine!r}, ClickHouse {theirs!r}")
    assert not wrong, "\n".join(wrong)


def test_integer_casts_give_integers(keeper):
    """ClickHouse's Int64 is an integer, so is dpch's (a client sees 2, not 2.0)."""
    assert outputs.evaluate(_post_expr("CAST(x AS Int64)"), {"s0": -2.5}) == -2
    assert isinstance(outputs.evaluate(_post_expr("toInt64(x)"), {"s0": 7.9}), int)
    assert outputs.evaluate(_post_expr("toInt64(x)"), {"s0": None}) is None, "NULL propagates"
    assert functions.result_type(_post_expr("CAST(x AS Int64)")) == "Int64"
    assert functions.result_type(_post_expr("(toFloat32(x))")) == "Float32"
    assert functions.result_type(_post_expr("round(x)")) is None


@pytest.mark.parametrize("text", ["toInt8(x)", "toInt64(x)", "toUInt64(x)", "CAST(x AS UInt8)", "toInt32(x)"])
def test_integer_arguments_wrap_as_clickhouse_wraps_integers(keeper, text):
    """An integer argument (a UInt64 key, a comparison's 0/1) converts as ClickHouse converts integers."""
    node = _post_expr(text)
    for v in (0, 1, 127, 128, 1000, -1000, 2**31 + 5, 2**63 + 5, 2**64 - 1):
        typed = f"toUInt64({v})" if v >= 0 else f"toInt64({v})"
        theirs = keeper.query_rows("SELECT " + re.sub(r"\bx\b", typed, text))[0][0]
        assert outputs.evaluate(node, {"s0": v}) == theirs, (text, v)


# -- intervals: each rule's image holds the function of every point of the interval ----------------

def _points(lo: float, hi: float, rng: random.Random) -> list[float]:
    inside = [lo, hi, *(rng.uniform(lo, hi) for _ in range(30))]
    return inside + [p for p in (0.0, -0.0, 0.5, -0.5) if lo <= p <= hi]


def _contains(iv: tuple[float, float], value) -> bool:
    if value is None or math.isnan(float(value)):
        return True  # no number to hold: ClickHouse's NaN or dpch's NULL (documented per rule)
    lo, hi, v = iv[0], iv[1], float(value)
    slack = [1e-9 * abs(e) if math.isfinite(e) else 0.0 for e in iv]
    return lo - slack[0] <= v <= hi + slack[1]


def _image_misses(text: str, rule=None, seed: int = 7) -> list[str]:
    """Points of random intervals whose function value the interval rule's image misses."""
    node = _post_expr(text)
    rng = random.Random(seed)
    misses = []
    for _ in range(300):
        scale = 10.0 ** rng.randint(-1, 4)
        lo = rng.uniform(-scale, scale)
        hi = lo + rng.choice([0.0, rng.uniform(0, scale)])
        image = rule((lo, hi)) if rule else outputs.interval(node, {"s0": (lo, hi)})
        misses += [f"{text} at {x!r} in [{lo}, {hi}]: image {image}" for x in _points(lo, hi, rng)
                   if not _contains(image, outputs.evaluate(node, {"s0": x}))]
    return misses


@pytest.mark.parametrize("text", FUNCTIONS)
def test_interval_holds_the_function_of_every_point(text):
    misses = _image_misses(text)
    assert not misses, "\n".join(misses[:5])


def test_negative_control_endpoint_rule_for_an_even_power_is_caught():
    """Mapping an interval's endpoints is right only for monotone functions: for pow(x, 2) over an
    interval holding 0 it misses the values near 0, and the containment check sees it."""
    def endpoints(iv):
        ends = sorted(v * v for v in iv)
        return ends[0], ends[1]

    assert _image_misses("pow(x, 2)", rule=endpoints), "a wrong rule must be caught"
    assert outputs.interval(_post_expr("pow(x, 2)"), {"s0": (-3.0, 2.0)}) == (0.0, 9.0)
    assert outputs.interval(_post_expr("pow(x, 3)"), {"s0": (-3.0, 2.0)}) == (-27.0, 8.0)
    assert outputs.interval(_post_expr("pow(x, -1)"), {"s0": (-1.0, 2.0)}) == (-math.inf, math.inf)
    assert outputs.interval(_post_expr("abs(x)"), {"s0": (-3.0, 2.0)}) == (0.0, 3.0)


def test_negative_control_cast_leaving_its_range_is_caught():
    """A truncating endpoint rule for toInt8 misses the wrap past 127; the rule dpch uses does not."""
    def truncation(iv):
        return float(math.trunc(iv[0])), float(math.trunc(iv[1]))

    node = _post_expr("toInt8(x)")
    assert not _contains(truncation((100.0, 300.0)), outputs.evaluate(node, {"s0": 200.0}))
    assert _contains(outputs.interval(node, {"s0": (100.0, 300.0)}), outputs.evaluate(node, {"s0": 200.0}))
    assert outputs.interval(_post_expr("CAST(x AS Int64)"), {"s0": (-2.5, 3.9)}) == (-2.0, 3.0)


# -- queries: exact answers equal ClickHouse's; released values are ClickHouse's function of them ---

COLUMNS = ("uid UInt32, sex String COMMENT 'dp: public, values=[\"f\", \"m\"]', "
           "age UInt8 COMMENT 'dp: bounds=[18, 90]', spend Float64 COMMENT 'dp: bounds=[0, 100]'")
ROWS = [(1, "f", 30, 10.0), (1, "f", 31, 20.0), (2, "m", 45, 5.5), (3, "m", 60, 50.0), (3, "m", 61, 0.0),
        (4, "f", 22, 99.0), (5, "f", 88, 1.0), (6, "m", 35, 7.25)]


@pytest.fixture
def session(connect):
    s = connect(analyst="post_functions")
    make_table(s, COLUMNS, ROWS, ["uid", "sex", "age", "spend"])
    return s


SAME_AS_CLICKHOUSE = [
    "SELECT POWER(SUM(age), 2) FROM t",
    "SELECT pow(avg(spend), 2), pow(avg(age) - 50, 2) AS d FROM t",
    "SELECT sqrt(varPop(spend)) FROM t",
    "SELECT abs(avg(age) - 50), round(avg(spend), 1), round(avg(spend), -1) FROM t",
    "SELECT CAST(avg(spend) AS Int64), toInt64(avg(age)), avg(spend)::Int32 FROM t",
    "SELECT toFloat64(count()), toInt64(count()) FROM t",
    "SELECT sex, CAST(avg(spend) AS Int64) AS a, trunc(avg(age), 1) FROM t GROUP BY sex ORDER BY sex",
    "SELECT exp(avg(spend) / 100), log(sum(spend)), log10(sum(age)), sign(avg(age) - 50) FROM t",
    "SELECT sex, count() FROM t GROUP BY sex HAVING toInt64(avg(age)) > 40 ORDER BY sex",
    "SELECT sex, floor(avg(spend), 1) AS f FROM t GROUP BY sex ORDER BY pow(avg(age) - 50, 2) DESC",
]


@pytest.mark.parametrize("sql", SAME_AS_CLICKHOUSE)
def test_exact_answer_equals_clickhouse(session, sql):
    assert_same_as_clickhouse(session, sql, raw_rows(session.engine, session.engine.database, sql, ("t",)))


def test_released_value_is_clickhouses_function_of_the_noisy_value(session, keeper):
    release = session.query("SELECT avg(spend) AS a, toInt64(avg(spend)) AS i, pow(avg(age) - 50, 2) AS p, "
                            "avg(age) AS b FROM t", epsilon=1.0)
    (a, i, p, b), (ia, ii, ip, ib) = release.rows[0], release.intervals[0]
    assert i == keeper.query_rows(f"SELECT toInt64({a!r})")[0][0]
    assert p == pytest.approx(keeper.query_rows(f"SELECT pow({b!r} - 50, 2)")[0][0], rel=1e-12)
    # each interval is the image of the statistic's own interval (one statistic: the same level)
    assert ii == (math.trunc(ia[0]), math.trunc(ia[1]))
    d = (ib[0] - 50.0, ib[1] - 50.0)
    assert ip == pytest.approx(post_functions.POW.image(d, (2.0, 2.0)))
    if d[0] <= 0 <= d[1]:
        assert ip[0] == 0.0


REFUSED = [
    ("SELECT CAST(avg(spend) AS String) FROM t", "supported in ORDER BY and HAVING, not as a result column"),
    ("SELECT CAST(avg(spend) AS Decimal(10, 2)) FROM t", "is not supported on released values and keys"),
    ("SELECT round(avg(spend), count()) FROM t", "must be a constant number"),
    ("SELECT intDiv(sum(age), 2) FROM t", "intDiv is not supported on released values and keys"),
    ("SELECT sex, toInt64(sex) FROM t GROUP BY sex", "arithmetic on sex"),
    ("SELECT log(3, avg(spend)) FROM t", "a logarithm of another base"),
    ("SELECT CAST(avg(spend) AS Nullable(Decimal(10, 2))) FROM t", "is not supported on released values and keys"),
]


@pytest.mark.parametrize(("sql", "reason"), REFUSED)
def test_refused_before_the_charge(session, sql, reason):
    refusal = refused_uncharged(session, sql, epsilon=1.0)
    assert reason in str(refusal), str(refusal)

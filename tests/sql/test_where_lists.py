"""A key WHERE limits to listed constants is released over that list (issue 28, :mod:`dpch.sql.where_lists`).

``WHERE occupation IN ('nurse', 'cook') GROUP BY occupation`` asks for two groups: ClickHouse answers those
two, and dpch, which releases every key of a public domain, released every declared value too (each
unlisted one a pure-noise row, which a series-limited chart shows as extra series). The list is a
constant of the query: the domain is the declared values it lists, or, for a key without a public
domain, the list itself (no partition selection, no δ). Values are checked against ClickHouse's at a huge
ε; the domains, and the sensitivity they imply, by value.
"""

from __future__ import annotations

import pytest
import sqlglot

from dpch.sql.where_lists import literal_value, where_lists
from tests.helpers import make_table, refused_uncharged
from tests.soundness.exact_answers import assert_same_as_clickhouse, raw_rows

COLUMNS = ("uid UInt32, job String COMMENT 'dp: public, values=[\"nurse\", \"cook\", \"pilot\"]', "
           "city Nullable(String), floor UInt8 COMMENT 'dp: bounds=[0, 9]', "
           "x Float64 COMMENT 'dp: bounds=[0, 10]'")
ROWS = [(u, ("nurse", "cook", "pilot")[u % 3], (None, "oslo", "rome", "lima")[u % 4], u % 10, float(u % 7))
        for u in range(60)]


@pytest.fixture
def session(connect):
    s = connect(analyst="lists")
    make_table(s, COLUMNS, ROWS, ["uid", "job", "city", "floor", "x"], comment="dp: privacy_unit=uid, unique_units")
    return s


def _domains(session, sql):
    plan, _ = session.plan(sql)
    return [k.values for k in plan.keys]


@pytest.mark.parametrize(("sql", "domains"), [
    # declared values, narrowed to the listed ones in the declared order
    ("SELECT job, count() FROM t WHERE job IN ('pilot', 'nurse') GROUP BY job", [("nurse", "pilot")]),
    ("SELECT job, count() FROM t WHERE job = 'cook' GROUP BY job", [("cook",)]),
    ("SELECT job, count() FROM t WHERE 'cook' = job AND x > 1 GROUP BY job", [("cook",)]),
    # two limits: the values both allow
    ("SELECT job, count() FROM t WHERE job IN ('nurse', 'cook') AND job IN ('cook', 'pilot') GROUP BY job",
     [("cook",)]),
    # a listed value outside the declared ones is not a group (the owner's domain bounds the list)
    ("SELECT job, count() FROM t WHERE job IN ('cook', 'chef') GROUP BY job", [("cook",)]),
    # a key with no public domain: the list is its domain, in the written order, without repeats
    ("SELECT city, count() FROM t WHERE city IN ('rome', 'oslo', 'rome') GROUP BY city", [("rome", "oslo")]),
    # a bounded integer key: the listed values within its bounds
    ("SELECT floor, count() FROM t WHERE floor IN (3, 11, 1) GROUP BY floor", [(3, 1)]),
    # negative controls: a list under OR, or of another kind than the key's, limits nothing
    ("SELECT job, count() FROM t WHERE job = 'cook' OR x > 1 GROUP BY job", [("nurse", "cook", "pilot")]),
    ("SELECT floor, count() FROM t WHERE floor IN ('3') GROUP BY floor", [tuple(range(10))]),
    ("SELECT floor, count() FROM t WHERE floor IN (3.0) GROUP BY floor", [tuple(range(10))]),
])
def test_the_domain_is_what_where_lists(session, sql, domains):
    assert _domains(session, sql) == domains


def test_a_key_without_public_domain_needs_no_partition_selection(session):
    """Without the list, city needs partition selection (δ > 0); with it, it is a public domain of two keys,
    and a unit reaches at most min(cap, 2) = 1 group here (unique_units): sensitivity 1."""
    refusal = refused_uncharged(session, "SELECT city, count() FROM t GROUP BY city")
    assert "partition selection" in str(refusal)
    plan, _ = session.plan("SELECT city, count() FROM t WHERE city IN ('rome', 'oslo') GROUP BY city")
    assert not plan.partition_selection and plan.measures[0].sensitivity == 1.0


@pytest.mark.parametrize("sql", [
    "SELECT job, count() AS n, avg(x) AS a FROM t WHERE job IN ('pilot', 'nurse') GROUP BY job ORDER BY job",
    "SELECT city, count() AS n FROM t WHERE city IN ('rome', 'oslo') GROUP BY city ORDER BY city",
    "SELECT city, job, sum(x) AS s FROM t WHERE city = 'lima' AND job IN ('cook', 'nurse') GROUP BY city, job "
    "ORDER BY job",
    "SELECT floor, count() AS n FROM t WHERE floor IN (3, 11, 1) GROUP BY floor ORDER BY floor",
])
def test_values_are_clickhouses(session, sql):
    assert_same_as_clickhouse(session, sql, raw_rows(session.engine, session.engine.database, sql, ("t",)))


def test_every_listed_group_is_released_even_empty(session):
    """The released keys are the list's, whatever the data holds: 'lima' has rows, 'paris' none (it is
    released, with a noisy zero), NULL and the unlisted cities are no group."""
    release = session.query("SELECT city, count() AS n FROM t WHERE city IN ('lima', 'paris') GROUP BY city",
                            epsilon=1.0)
    assert sorted(r[0] for r in release.rows) == ["lima", "paris"]


def test_a_list_keeping_no_declared_value_is_refused_before_the_charge(session):
    refusal = refused_uncharged(session, "SELECT job, count() FROM t WHERE job = 'chef' GROUP BY job")
    assert "WHERE keeps none of the key's public values" in str(refusal)


def _lists(where_sql):
    where = sqlglot.parse_one(f"SELECT 1 FROM t WHERE {where_sql}", read="clickhouse").args["where"].this
    return where_lists(where, lambda col: col.name)


def test_where_lists_reads_only_limits_every_row_meets():
    assert _lists("a IN ('x', 'y') AND (b = 3 AND c = -2)") == {"a": ("x", "y"), "b": (3,), "c": (-2,)}
    assert _lists("(a IN ('x', 'y')) AND a = 'y'") == {"a": ("y",)}
    assert _lists("a IN ('x') OR b = 1") == {}
    assert _lists("NOT a IN ('x')") == {}
    assert _lists("a NOT IN ('x')") == {}
    assert _lists("a IN (SELECT v FROM u)") == {}
    assert _lists("a IN ('x', b)") == {}  # not all constants: no list
    assert _lists("a = b") == {}
    assert _lists("lower(a) = 'x'") == {}  # an expression, not the column
    assert where_lists(None, lambda col: col.name) == {}
    assert _lists("a IN ('x')") == {"a": ("x",)}  # negative control of the refusals above


@pytest.mark.parametrize(("literal", "value"), [
    ("'x'", "x"), ("3", 3), ("-3", -3), ("3.5", None), ("1e3", None), ("-'x'", None), ("NULL", None),
    ("0x1F", None),
])
def test_literal_values(literal, value):
    node = sqlglot.parse_one(f"SELECT {literal}", read="clickhouse").expressions[0]
    assert literal_value(node) == value

"""GROUP BY keys' domains at their edges (issue 31, the campaign's survivors in ``sql/grouping.py``).

Each test pins a *value* the analysis computes for a key — the domain's size at the group limit, where a
domain comes from (shown by EXPLAIN), the days of a nullable date column — or a refusal's words, on a
real table in chdb:

- one bounded integer key of exactly :data:`MAX_GROUPS` values is accepted with that domain, and one
  more value is refused naming the key (before its values are listed: a per-key check, where the
  product check would first build a tuple of every value);
- a nullable date column with declared bounds is released over its declared days, like a plain date
  column (its type is read through ``Nullable(…)``);
- a time bucket limited by a WHERE range says so in its origin, whichever end WHERE limits;
- a date bucket over an expression is a private key (partition selection), and a time bucket the registry
  refuses, over a column without date bounds, asks for them;
- a GROUP BY on a public table's column that has no values is refused in words.
"""

from __future__ import annotations

import dataclasses
from datetime import date

import pytest

from dpch.sql.grouping import MAX_GROUPS, GroupKey
from tests.helpers import make_table, refused_uncharged

PRIVATE = ("uid UInt64, code String, "
           "k Int32 COMMENT 'dp: bounds=[0, 99999]', big Int32 COMMENT 'dp: bounds=[0, 100000]', "
           "d Date COMMENT 'dp: bounds=[\"2026-01-01\", \"2026-03-31\"]', "
           "nd Nullable(Date) COMMENT 'dp: bounds=[\"2026-01-01\", \"2026-01-03\"]', "
           "d2 Date, dt DateTime, nk Nullable(Int32) COMMENT 'dp: bounds=[0, 9]', "
           "off Int32 COMMENT 'dp: bounds=[5, 100004]'")


@pytest.fixture
def session(connect):
    s = connect(analyst="grouping")
    make_table(s, PRIVATE, [(1, "a", 5, 5, date(2026, 1, 2), date(2026, 1, 2))], ["uid", "code", "k", "big", "d", "nd"])
    make_table(s, "code String, label String", [], ["code", "label"], name="dim", comment="dp: public")
    return s


def keys(session, sql: str) -> dict[str, GroupKey]:
    return {k.label: k for k in session.plan(sql)[0].keys}


def test_one_integer_key_of_exactly_the_limit_is_accepted_and_one_more_value_is_refused(session):
    assert MAX_GROUPS == 100_000
    (key,) = keys(session, "SELECT k, count(*) FROM t GROUP BY k").values()
    assert key.origin == "bounds" and key.values is not None and len(key.values) == MAX_GROUPS
    assert (key.values[0], key.values[-1]) == (0, 99_999)
    error = refused_uncharged(session, "SELECT big, count(*) FROM t GROUP BY big")
    assert f"GROUP BY big would release 100001 groups, more than the limit of {MAX_GROUPS}" in str(error)


@pytest.mark.parametrize("sql, size", [
    ("SELECT intDiv(k, 1) AS b, count(*) FROM t GROUP BY b", MAX_GROUPS),
    ("SELECT intDiv(k, 1000) AS b, count(*) FROM t GROUP BY b", 100),
], ids=["step 1: the limit", "step 1000"])
def test_an_intdiv_key_lists_its_buckets(session, sql, size):
    (key,) = keys(session, sql).values()
    assert key.origin == "bounds" and key.values == tuple(range(size)) and key.type == "Int64"
    assert isinstance(key.sql, str) and key.sql.startswith("intDiv(")


@pytest.mark.parametrize("sql, message", [
    ("SELECT intDiv(big, 1) AS b, count(*) FROM t GROUP BY b",
     f"GROUP BY intDiv(big, 1) would release 100001 groups, more than the limit of {MAX_GROUPS}"),
    ("SELECT intDiv(k, 0) AS b, count(*) FROM t GROUP BY b", "write intDiv(column, positive whole number)"),
    ("SELECT intDiv(k, '3') AS b, count(*) FROM t GROUP BY b", "write intDiv(column, positive whole number)"),
    ("SELECT intDiv(k, 2.5) AS b, count(*) FROM t GROUP BY b", "write intDiv(column, positive whole number)"),
    ("SELECT intDiv(k + 1, 2) AS b, count(*) FROM t GROUP BY b", "write intDiv(column, positive whole number)"),
], ids=["past the limit", "step 0", "text step", "fractional step", "over an expression"])
def test_an_intdiv_key_outside_its_form_or_limit_is_refused_in_words(session, sql, message):
    assert message in str(refused_uncharged(session, sql))


@pytest.mark.parametrize("sql", ["SELECT off, count(*) FROM t GROUP BY off",
                                 "SELECT intDiv(off, 1) AS b, count(*) FROM t GROUP BY b"], ids=["column", "intDiv"])
def test_a_domain_not_starting_at_zero_is_counted_from_its_lower_end(session, sql):
    """[5, 100 004] holds exactly the limit's 100 000 values: the size is hi − lo + 1, whatever lo is."""
    (key,) = keys(session, sql).values()
    assert key.values is not None and (len(key.values), key.values[0], key.values[-1]) == (MAX_GROUPS, 5, 100_004)


def test_a_nullable_bounded_integer_key_is_released_as_its_base_type(session):
    (key,) = keys(session, "SELECT nk, count(*) FROM t GROUP BY nk").values()
    assert key.type == "Int32" and key.values == tuple(range(10))


def test_a_nullable_date_with_bounds_is_released_over_its_declared_days(session):
    (key,) = keys(session, "SELECT nd, count(*) FROM t GROUP BY nd").values()
    assert key.origin == "bounds"
    assert key.values is not None and [str(v) for v in key.values if v is not None] == [
        "2026-01-01", "2026-01-02", "2026-01-03"]


@pytest.mark.parametrize("where, origin", [
    ("", "bounds"),
    ("WHERE d >= '2026-02-01'", "bounds and WHERE range"),
    ("WHERE d < '2026-02-01'", "bounds and WHERE range"),
], ids=["no WHERE", "lower end", "upper end"])
def test_a_time_bucket_says_whether_a_where_range_limits_it(session, where, origin):
    (key,) = keys(session, f"SELECT toStartOfWeek(d) AS w, count(*) FROM t {where} GROUP BY w").values()
    assert key.origin == origin and key.values


def test_a_date_bucket_over_an_expression_is_a_private_key(session):
    """toStartOfMonth(d2 + 1) buckets an expression, not a column: its values come from the data (partition
    selection), where a bucket over a column with bounds is listed from them."""
    (key,) = keys(session, "SELECT toStartOfMonth(d2 + 1) AS m, count(*) FROM t GROUP BY m").values()
    assert key.origin == "partition selection" and key.values is None


def test_a_time_bucket_the_registry_refuses_asks_for_date_bounds(session):
    """toDate(dt) is not allowed on a row (its zone is the server's); over a column without declared date
    bounds the refusal names what would make the bucket listable."""
    error = refused_uncharged(session, "SELECT toStartOfMonth(toDate(dt)) AS m, count(*) FROM t GROUP BY m")
    assert "GROUP BY toStartOfMonth(toDate(dt)): this time bucket needs declared date bounds on dt" in str(error)


def test_a_public_table_column_without_values_is_refused_in_words(session):
    error = refused_uncharged(
        session, "SELECT dim.label, count(*) FROM t JOIN dim ON t.code = dim.code GROUP BY dim.label")
    assert "the public table has no values in this column" in str(error)


def test_a_group_key_is_frozen():
    key = GroupKey("k", None, (1, 2), "bounds")  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.values = (3,)  # type: ignore[misc]

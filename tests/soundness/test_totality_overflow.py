"""Regression tests for the soundness defects of issue 12 that live in the SQL layer and calibration:
error oracles (totality, docs/design.md rule 5), integer wrap-around (rule 6), quantile under-charging
and the cost self-check (rule 7), and NULL privacy units.

Each test plays the attack or builds the neighbours on real chdb and checks what comes out.
"""

from __future__ import annotations

from datetime import date

import pytest

from dpch.errors import CostCheckFailed, QueryRejected
from dpch.pipeline import execute
from dpch.pipeline.calibrate import NoisePlan, calibrate, check_cost
from dpch.sql.aggregate_kinds import stat_values
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY, make_table, run_private_keyed

PEOPLE = ("person_id UInt64, name String, income Float64 COMMENT 'dp: bounds=[0, 200000]', "
          "price Decimal(18, 2) COMMENT 'dp: bounds=[0, 100]', v UInt64 COMMENT 'dp: bounds=[0, 2305843009213693952]'")
COLUMNS = ["person_id", "name", "income", "price", "v"]
COMMENT = "dp: privacy_unit=person_id, max_rows_per_unit=2"
ORACLE = ("SELECT count() FROM people WHERE match('x', if(person_id = 1234 AND income > 30000, '(', 'x')) "
          "SETTINGS dp_epsilon = 1e-9")


def _rows(income_of_1234: float) -> list[tuple]:
    rows = [(i, f"p{i}", 1000.0 * i, 5, 7) for i in range(1, 40)]
    rows.append((1234, "target", income_of_1234, 5, 7))
    return rows


def _releases(session) -> int:
    return session.budget().releases


def _outcome(session, sql: str) -> str:
    try:
        session.query(sql)
        return "released"
    except QueryRejected as exc:
        return f"rejected: {exc}"


@pytest.mark.parametrize("income", [10_000.0, 50_000.0])
def test_error_oracle_is_refused_before_the_charge_whatever_the_data(connect, income):
    """The issue's binary-search oracle: a regex pattern computed from the row. Refused, with the
    same message whether or not the target's income is above the threshold, and nothing charged."""
    session = connect(analyst="attacker")
    make_table(session, PEOPLE, _rows(income), COLUMNS, name="people", comment=COMMENT)
    with pytest.raises(QueryRejected) as info:
        session.query(ORACLE)
    assert str(info.value) == (
        "match() needs a constant pattern here, not an expression over the rows (hint: write the pattern, unit, "
        "time zone or number as a literal: an expression computed from a row could make the query fail "
        "depending on the data, which dpch refuses)")
    assert _releases(session) == 0


ORACLE_VARIANTS = [
    # LIKE pattern computed from the row
    "SELECT count() FROM people WHERE name LIKE if(income > 30000, 'ab\\\\', 'x')",
    "SELECT count() FROM people WHERE name ILIKE concat(name, '%')",
    # a regex taken from a column
    "SELECT count() FROM people WHERE match('x', name)",
    # integer division and remainder raise on 0
    "SELECT count() FROM people WHERE intDiv(100, toInt64OrNull(name)) = 1",
    "SELECT count() FROM people WHERE person_id % (person_id - 1234) = 0",
    # a conversion that throws on a value that does not parse
    "SELECT count() FROM people WHERE toInt64(name) = 3",
    # the interval amount must be constant
    "SELECT count() FROM people WHERE toDateOrNull(name) + INTERVAL person_id DAY > toDateOrNull('2020-01-01')",
    # the same oracles inside an aggregate's condition
    "SELECT countIf(match(name, if(income > 3, '(', 'x'))) FROM people",
    "SELECT sumIf(income, name LIKE name) FROM people",
]


@pytest.mark.parametrize("sql", ORACLE_VARIANTS)
def test_row_dependent_failures_are_refused_before_the_charge(connect, sql):
    session = connect(analyst="attacker")
    make_table(session, PEOPLE, _rows(50_000.0), COLUMNS, name="people", comment=COMMENT)
    with pytest.raises(QueryRejected):
        session.query(sql + " SETTINGS dp_epsilon = 0.1")
    assert _releases(session) == 0


@pytest.mark.parametrize("sql", [
    "SELECT count() FROM people WHERE match(name, '(')",
    "SELECT count() FROM people WHERE name LIKE 'ab\\\\'",
])
def test_a_bad_constant_pattern_fails_the_probe_identically_on_any_data(connect, sql):
    """A constant pattern is validated before the charge by the probe (synthetic rows), so the
    outcome is the same on two different datasets."""
    outcomes = []
    for income in (10_000.0, 50_000.0):
        session = connect(analyst=f"a{int(income)}")
        table = f"people{int(income)}"
        make_table(session, PEOPLE, _rows(income), COLUMNS, name=table, comment=COMMENT)
        outcomes.append(_outcome(session, sql.replace("people", table) + " SETTINGS dp_epsilon = 0.1")
                        .replace(table, "people"))
        assert _releases(session) == 0
    assert outcomes[0] == outcomes[1] and outcomes[0].startswith("rejected"), outcomes


def test_decimal_division_by_zero_and_overflow_do_not_raise(connect):
    """Decimal / 0 raises and Decimal × Decimal overflows inside ClickHouse on values a row chooses;
    dpch reads Decimals as Float64, so the query runs and counts what ClickHouse counts in Float64."""
    session = connect(analyst="decimal")
    rows = [(i, f"p{i}", 10.0, 5 if i == 3 else i, 7) for i in range(1, 30)]
    make_table(session, PEOPLE, rows, COLUMNS, name="people", comment=COMMENT)
    for where, sql in [
        ("price / (price - 5) > 0", "SELECT count() FROM people WHERE price / (price - 5) > 0"),
        ("price * price * price * price > 1", "SELECT count() FROM people WHERE price * price * price * price > 1"),
    ]:
        plan, _ = session.plan(sql)
        exact = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY).measures
        direct = session.engine.query_rows(
            f"SELECT count() FROM {session.engine.table('people')} WHERE "
            + where.replace("price", "toFloat64(price)"))[0][0]
        assert float(exact["m0"][0]) == float(direct), where
    release = session.query("SELECT sum(price * price / (price + 0.5)) FROM people SETTINGS dp_epsilon = 1")
    assert release.rows  # ran: Decimal arithmetic is computed in Float64


def test_integer_sums_do_not_wrap_at_2_64(connect):
    """16 rows of 2^61 sum to 2^65: ClickHouse's UInt64 sum wraps to 0, dpch's Int128 does not, and
    removing one unit moves the exact sum by exactly its rows' values (≤ the sensitivity)."""
    session = connect(analyst="wrap")
    big = 2**61
    rows = [(i, f"p{i}", 1.0, 1, big) for i in range(1, 9) for _ in range(2)]
    make_table(session, PEOPLE, rows, COLUMNS, name="people", comment=COMMENT)
    make_table(session, PEOPLE, rows[2:], COLUMNS, name="people_minus_one", comment=COMMENT)
    raw = session.engine.query_rows(f"SELECT sum(v) FROM {session.engine.table('people')}")[0][0]
    assert raw == (16 * big) % 2**64  # the engine fact the fix is about (negative control)
    sums = {}
    for table in ("people", "people_minus_one"):
        plan, _ = session.plan(f"SELECT sum(v) FROM {table}")
        measure = plan.measures[0]
        rows_out = run_private_keyed(session.engine, emit_sql(plan, session.engine.database))
        sums[table] = int(rows_out[0][0])
    assert sums["people"] == 16 * big
    assert sums["people"] - sums["people_minus_one"] == 2 * big <= measure.sensitivity


@pytest.mark.parametrize("sql", ["SELECT avg(abs(pow(pow(v, 2), 2))) FROM people",
                                 "SELECT avg(v * v * v) FROM people"])
def test_integer_values_beyond_2_62_are_not_wrapped_through_int128(connect, sql):
    """Found by the neighbour fuzzer: an integer expression whose bounds exceed Int128 (here up to
    2^244 or 2^183) was clamped in Float64 and then cast with toInt128, which wraps silently, so the
    exact average came out negative. Integer values are carried exactly only below 2^62; beyond,
    as Float64. The exact aggregate must match Python's on the same clamped rows."""
    session = connect(analyst="wrap128")
    values = [0, 1, 3, 10**6, 2**40, 2**61 + 5]
    rows = [(i, f"p{i}", 1.0, 1, v) for i, v in enumerate(values, start=1)]
    make_table(session, PEOPLE, rows, COLUMNS, name="people", comment=COMMENT)
    plan, _ = session.plan(sql)
    emitted = emit_sql(plan, session.engine.database)
    assert "toInt128(least" not in emitted  # the wrapping form is gone
    data = execute.exact(session.engine, plan, emitted, CAP_KEY)
    (stat,) = plan.stats.values()
    exact = stat_values(stat, {m: v.astype(float) for m, v in data.measures.items()}, {})[0]
    power = 4 if "pow" in sql else 3
    expected = sum(float(v) ** power for v in values) / len(values)
    assert exact == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("sql,what", [
    ("SELECT sum(v * 90071992547410) FROM people", "too large for an exact integer sum"),
    ("SELECT sum(income * 1e300) FROM people", "too large for a floating-point sum"),
    ("SELECT avg(round(income, 400)) FROM people", "places"),
    ("SELECT avg(round(income, 1e400)) FROM people", "too large"),
])
def test_unrepresentable_plans_are_refused_before_the_charge(connect, sql, what):
    session = connect(analyst="big")
    make_table(session, PEOPLE, _rows(1.0), COLUMNS, name="people", comment=COMMENT)
    with pytest.raises(QueryRejected, match=what):
        session.query(sql + " SETTINGS dp_epsilon = 1")
    assert _releases(session) == 0


@pytest.mark.parametrize("count", [1, 2, 9])
def test_each_quantile_is_its_own_mechanism_with_its_own_share(connect, count):
    """Several quantiles of one column share a histogram but each runs an exponential mechanism:
    each gets ε/count, and they compose to exactly the ε charged."""
    session = connect(analyst="quantiles")
    make_table(session, PEOPLE, _rows(1.0), COLUMNS, name="people", comment=COMMENT)
    levels = [round(0.1 * (i + 1), 1) for i in range(count)]
    sql = "SELECT " + ", ".join(f"quantile({q})(income)" for q in levels) + " FROM people"
    plan, opts = session.plan(sql + " SETTINGS dp_epsilon = 0.9")
    noise = calibrate(plan, opts)
    assert len(noise.selectors) == count
    assert all(m.epsilon == pytest.approx(0.9 / count) for m in noise.selectors.values())
    release = session.query(sql + " SETTINGS dp_epsilon = 0.9")
    assert release.cost.epsilon == pytest.approx(0.9)
    assert sum(r.epsilon for r in release.measures) == pytest.approx(0.9)


def test_cost_self_check_fails_closed(connect):
    """Negative controls: a noise plan missing a quantile's mechanism, or composing to more than the
    request, is refused before anything is charged."""
    session = connect(analyst="selfcheck")
    make_table(session, PEOPLE, _rows(1.0), COLUMNS, name="people", comment=COMMENT)
    plan, opts = session.plan("SELECT quantile(0.5)(income), quantile(0.9)(income), count() FROM people")
    noise = calibrate(plan, opts)
    check_cost(plan, opts, noise)  # the real plan passes
    shared = NoisePlan(additive=dict(noise.additive), selectors=dict(list(noise.selectors.items())[:1]))
    with pytest.raises(CostCheckFailed):  # the old bug: two quantiles, one mechanism charged
        check_cost(plan, opts, shared)
    doubled = NoisePlan(additive={k: type(m)(m.epsilon * 2, m.sensitivity, integer=m.integer)
                                  for k, m in noise.additive.items()}, selectors=dict(noise.selectors))
    with pytest.raises(CostCheckFailed):
        check_cost(plan, opts, doubled)


def test_null_unit_rows_are_excluded(connect):
    """The issue's counterexample: with a Nullable unit, an added NULL-unit person could replace the
    kept NULL rows. NULL-unit rows are excluded, so adding any NULL-unit rows moves nothing."""
    session = connect(analyst="nulls")
    ddl = "uid Nullable(UInt64), x Float64 COMMENT 'dp: bounds=[-100, 100]'"
    comment = "dp: privacy_unit=uid, max_rows_per_unit=2"
    base = [(1, 5.0), (2, 7.0), (None, 100.0), (None, 100.0)]
    make_table(session, ddl, base, ["uid", "x"], name="n0", comment=comment)
    make_table(session, ddl, base + [(None, -100.0)] * 3, ["uid", "x"], name="n1", comment=comment)
    exact = []
    for table in ("n0", "n1"):
        plan, _ = session.plan(f"SELECT sum(x), count() FROM {table}")
        exact.append(execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY).measures)
    assert float(exact[0]["m0"][0]) == float(exact[1]["m0"][0]) == 12.0
    assert float(exact[0]["m1"][0]) == float(exact[1]["m1"][0]) == 2.0
    assert "Nullable" in session.table_policy("n0").describe()


def test_probe_is_a_tree_rewrite_of_the_emitted_query(connect):
    """The probe replaces table nodes only: a string literal spelling the table's qualified name is
    the same in the SQL that runs and in the SQL that was checked."""
    from dpch.sql.rewrite import emit_probe_sqls

    session = connect(analyst="probe")
    make_table(session, PEOPLE, _rows(1.0), COLUMNS, name="people", comment=COMMENT)
    db = session.engine.database
    literal = f"`{db}`.`people`"
    plan, _ = session.plan(f"SELECT count() FROM people WHERE name = '{literal}'")
    emitted, probe = emit_sql(plan, db), emit_probe_sqls(plan, db)[0]
    assert f"'{literal}'" in emitted and f"'{literal}'" in probe
    assert f'"{db}"."people"' in emitted and f'"{db}"."people"' not in probe
    synthetic = probe[probe.index("(SELECT materialize(CAST"):probe.index(") AS t0") + 1]
    eager = ", short_circuit_function_evaluation = 'disable'"
    assert probe.endswith(eager)
    assert probe.replace(synthetic, "").removesuffix(eager) == emitted.replace(f'"{db}"."people"', "")


def test_the_unfiltered_probe_reaches_every_aggregate(connect):
    """A type error inside an aggregate that only rows passing a key filter reach (toStartOfHour of a
    Date, which ClickHouse raises only when a row reaches it) is caught before the charge: the
    unfiltered probe runs the aggregates on the synthetic row."""
    session = connect(analyst="probe2")
    ddl = ("uid UInt64, g String COMMENT 'dp: public, values=[\"a\", \"b\"]', dt Date, "
           "w Float64 COMMENT 'dp: bounds=[0, 10]'")
    make_table(session, ddl, [(1, "a", date(2020, 1, 1), 1.0)], ["uid", "g", "dt", "w"], name="d",
               comment="dp: privacy_unit=uid, max_rows_per_unit=2")
    make_table(session, "pg String", [("a",), ("b",)], ["pg"], name="p", comment="dp: public")
    # the join condition drops the synthetic row ('' = '' but not <> ''): only the unfiltered probe
    # runs the aggregate over a joined row
    with pytest.raises(QueryRejected, match="ClickHouse cannot run this query"):
        session.query("SELECT count(), sum(if(toStartOfHour(dt) = toDateTime(0), w, 1)) FROM d JOIN p ON g = pg "
                      "AND pg <> '' "
                      "SETTINGS dp_epsilon = 1")
    assert _releases(session) == 0


def test_integer_bounds_between_2_32_and_2_53_run(connect):
    """Bounds in [2^32, 2^53) used to be Float64-vs-UInt64 literals in a clamp: a type error the probe
    reported as a problem with the WHERE clause. Now the query runs and its exact sum is right."""
    session = connect(analyst="wide")
    ddl = "uid UInt64, n Int64 COMMENT 'dp: bounds=[0, 1099511627776]'"
    rows = [(i, i * 1_000_000_007) for i in range(1, 20)]
    make_table(session, ddl, rows, ["uid", "n"], name="w", comment="dp: privacy_unit=uid, max_rows_per_unit=1")
    plan, _ = session.plan("SELECT sum(n * 2), avg(n) FROM w")
    out = run_private_keyed(session.engine, emit_sql(plan, session.engine.database))[0]
    assert int(out[0]) == sum(2 * n for _, n in rows)
    assert session.query("SELECT sum(n * 2) FROM w SETTINGS dp_epsilon = 1").rows

"""Values, not just acceptance (issue 12): every accepted corpus query's exact (pre-noise) answer
equals the same question asked of ClickHouse directly, on the same data.

The data are the fixture tables with every unit cut to its contribution cap and every value
clamped into its declared bounds (both checked below), so the cap and the clamps change
nothing: the analyst's SQL run raw must give dpch's exact statistics. Statistics that are
random by construction are compared where they are deterministic:

- a quantile: each group's histogram holds every value (its total is ClickHouse's count of the
  value), and the exact grid pick is within 1.5 grid steps of ``quantileExact`` (the exact
  quantile's bin, or the next one when q·n is nearer to that bin's upper rank);
- partition selection: every candidate key, its statistics and its count of distinct units,
  against ClickHouse's full GROUP BY (the selection itself is random).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

import dpch
from dpch import Budget
from tests.soundness.exact_answers import exact_answer, mismatches, raw_rows, raw_sql

CORPUS = tomllib.loads((Path(__file__).parents[2] / "dpch" / "fixtures" / "corpus.toml").read_text())
DATABASE = "values_fixture"

#: the fixture tables cut to their caps and clamped into their bounds (ClickHouse SQL, {src}/{dst})
_COPIES = {
    "visits": "SELECT user_id, visit_date, region, device, least(age, 90), least(duration_min, 120), "
              "least(spend, 500), least(pages, 50), converted FROM {src}.visits "
              "ORDER BY user_id, visit_date LIMIT 10 BY user_id",
    "people": "SELECT person_id, sex, region, birth_date, age, least(income, 250000), least(household_size, 8), "
              "employed, occupation, postcode FROM {src}.people",
    "regions": "SELECT * FROM {src}.regions",
}


@pytest.fixture(scope="module")
def session(keeper, store_dsn, visits_db):
    keeper.command(f"DROP DATABASE IF EXISTS {DATABASE}")
    keeper.command(f"CREATE DATABASE {DATABASE}")
    for table, select in _COPIES.items():
        keeper.command(f"CREATE TABLE {DATABASE}.{table} AS {visits_db}.{table}")
        keeper.command(f"INSERT INTO {DATABASE}.{table} {select.format(src=visits_db)}")
    s = dpch.connect(store_dsn, database=DATABASE, analyst="values", default_budget=Budget(1e9, 0.9), seed=5)
    _check_cap_and_bounds(s)
    yield s
    s.close()
    keeper.command(f"DROP DATABASE IF EXISTS {DATABASE}")


def _check_cap_and_bounds(session: dpch.Session) -> None:
    """The premise of the comparison: no unit above its cap, no value outside its bounds."""
    engine = session.engine
    for table in ("visits", "people"):
        policy = session.table_policy(table)
        worst = engine.query_rows(f"SELECT max(c) FROM (SELECT count() AS c FROM {engine.table(table)} "
                                  f"GROUP BY `{policy.privacy_unit}`)")[0][0]
        assert worst <= policy.contribution_cap, f"{table}: a unit has {worst} rows > cap"
        for column in policy.columns.values():
            bounds = column.date_bounds or column.bounds
            if bounds is None:
                continue
            lo, hi = (f"'{b}'" if column.date_bounds else repr(float(b)) for b in bounds)
            outside = engine.query_rows(f"SELECT countIf(`{column.name}` < {lo} OR `{column.name}` > {hi}) "
                                        f"FROM {engine.table(table)}")[0][0]
            assert outside == 0, f"{table}.{column.name}: {outside} values outside {bounds}"


def _quantile_text(sql: str) -> str:
    """The same question with ClickHouse's exact quantile instead of its sampling one."""
    sql = re.sub(r"\bmedian\(", "quantileExact(0.5)(", sql)
    return re.sub(r"\bquantile\(", "quantileExact(", sql)


@pytest.mark.parametrize("case", CORPUS["accepted"], ids=[c["sql"][:70] for c in CORPUS["accepted"]])
def test_exact_answer_equals_clickhouse(session, case):
    sql = case["sql"]
    answer = exact_answer(session, sql)
    plan = answer.plan
    quantiles = {name: stat for name, stat in plan.stats.items() if stat.kind == "quantile"}
    tolerances = [max((1.5 * plan.stats[s].grid[1] for s in out.stats if s in quantiles), default=0.0)
                  for out in plan.outputs]
    reference = _quantile_text(sql) if quantiles else sql
    if plan.limit is not None and not plan.order:
        # LIMIT without ORDER BY picks arbitrary groups in ClickHouse: dpch's must be among all of them
        everything = raw_rows(session.engine, DATABASE, re.sub(r"\s+LIMIT\s+\d+(\s+OFFSET\s+\d+)?", "", reference))
        assert len(answer.rows) == min(plan.limit, max(0, len(everything) - plan.offset))
        for row in answer.rows:
            assert any(not mismatches([row], [other], tolerances) for other in everything), (sql, row)
        return
    problems = mismatches(answer.rows, raw_rows(session.engine, DATABASE, reference), tolerances)
    assert not problems, f"{sql}: " + "; ".join(problems[:5])


QUANTILE_CASES = [c for c in CORPUS["accepted"] if "quantile" in c["sql"] or "median" in c["sql"]]


@pytest.mark.parametrize("case", QUANTILE_CASES, ids=[c["sql"][:70] for c in QUANTILE_CASES])
def test_quantile_histograms_hold_every_value(session, case):
    """Each group's histogram counts exactly the non-NULL values ClickHouse sees in that group."""
    answer = exact_answer(session, case["sql"])
    plan = answer.plan
    select = sqlglot.parse_one(raw_sql(case["sql"], DATABASE), read="clickhouse")
    for node in list(select.find_all(exp.Quantile)):
        node.replace(exp.Anonymous(this="count", expressions=[node.this.copy()]))
    for node in list(select.find_all(exp.Median)):
        node.replace(exp.Anonymous(this="count", expressions=[node.this.copy()]))
    raw = session.engine.query_rows(select.sql("clickhouse"))
    nkeys = len(plan.keys)
    key_positions = [i for i, out in enumerate(plan.outputs) if out.is_key]
    counts = {tuple(str(row[i]) for i in key_positions): row for row in raw}
    for name, stat in plan.stats.items():
        if stat.kind != "quantile":
            continue
        column = next(i for i, out in enumerate(plan.outputs) if name in out.stats)
        for g in answer.nonempty:
            key = tuple(str(v) for v in answer.data.keys[g][:nkeys])
            total = sum(answer.data.histograms[stat.measures[0]][g].values())
            assert total == counts[key][column], (case["sql"], key, total, counts[key][column])


SELECTION_CASES = [c for c in CORPUS["accepted"]
                   if (q := c["sql"]) and "GROUP BY" in q and "dp_delta" in q and "people" in q]


@pytest.mark.parametrize("case", SELECTION_CASES, ids=[c["sql"][:70] for c in SELECTION_CASES])
def test_partition_selection_candidates_count_their_units(session, case):
    """Every candidate key's count of distinct units equals ClickHouse's uniqExact of the unit."""
    answer = exact_answer(session, case["sql"])
    plan = answer.plan
    if not plan.partition_selection:
        pytest.skip("the query's keys have a public domain")
    select = sqlglot.parse_one(raw_sql(case["sql"], DATABASE), read="clickhouse")
    keys = [item for item in select.expressions if not item.find(exp.AggFunc)]
    unit = plan.table.privacy_unit
    select.set("expressions", [*keys, exp.Anonymous(this="uniqExact", expressions=[exp.column(unit)])])
    raw = {tuple(str(v) for v in row[:-1]): row[-1] for row in session.engine.query_rows(select.sql("clickhouse"))}
    assert len(raw) == len(answer.nonempty) == len(answer.data.keys)
    for key, units in zip(answer.data.keys, answer.data.units, strict=True):
        assert units == raw[tuple(str(v) for v in key)], (case["sql"], key)

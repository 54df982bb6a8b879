"""Sensitivity soundness for random queries from a small grammar (issue 5): for random accepted
queries and a random extreme unit added to a dataset, every measure's exact (pre-noise) vector
moves by at most its derived ℓ1 sensitivity, and by at most its ℓ2 sensitivity in ℓ2.

The grammar covers expressions inside aggregates (arithmetic, abs, least, if, round), the
conditional aggregates, variance, count(DISTINCT), WHERE, GROUP BY a declared key, a bucket of a
bounded column, and a private key (partition selection: the groups are aligned by key, a key
missing on one side counting as 0)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpch.pipeline import execute
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY, make_table

CAP = 3
COLUMNS = (
    "uid UInt64, region String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', "
    "x Float64 COMMENT 'dp: bounds=[-5, 10]', n Int32 COMMENT 'dp: bounds=[0, 100]', "
    "y Nullable(Float64) COMMENT 'dp: bounds=[2, 4]', name String"
)
NAMES = ["uid", "region", "x", "n", "y", "name"]
COMMENT = f"dp: privacy_unit=uid, max_rows_per_unit={CAP}, max_groups_per_unit=2"

conditions = st.sampled_from(["x > 0", "n < 50", "region = 'a'", "y IS NULL", "name LIKE 'n1%'", "abs(x) < 3"])
leaves = st.sampled_from(["x", "n", "y", "2", "0.5"])


def _expr(children):
    return st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "*"]), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        children.map(lambda e: f"abs({e})"),
        children.map(lambda e: f"least({e}, 7)"),
        children.map(lambda e: f"round({e})"),
        st.tuples(conditions, children, children).map(lambda t: f"if({t[0]}, {t[1]}, {t[2]})"),
    )


expressions = st.recursive(leaves, _expr, max_leaves=4)
aggregates = st.one_of(
    st.just("count(*)"), st.just("count(y)"), st.just("count(DISTINCT uid)"), st.just("count(DISTINCT name)"),
    conditions.map(lambda c: f"countIf({c})"),
    expressions.map(lambda e: f"sum({e})"),
    expressions.map(lambda e: f"avg({e})"),
    st.tuples(expressions, conditions).map(lambda t: f"sumIf({t[0]}, {t[1]})"),
    expressions.map(lambda e: f"varPop({e})"),
)
groupings = st.sampled_from(["", "region", "intDiv(n, 25)", "name"])
wheres = st.one_of(st.just(""), conditions)


@st.composite
def queries(draw) -> str:
    aggs = draw(st.lists(aggregates, min_size=1, max_size=3))
    group = draw(groupings)
    where = draw(wheres)
    select = ", ".join(([group] if group else []) + [f"{a} AS a{i}" for i, a in enumerate(aggs)])
    sql = f"SELECT {select} FROM {{t}}"
    if where:
        sql += f" WHERE {where}"
    if group:
        sql += f" GROUP BY {group}"
    return sql + " SETTINGS dp_delta = 1e-6"


rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "z"]),
        st.floats(-1e6, 1e6, allow_nan=False),
        st.integers(-(2**31), 2**31 - 1),
        st.none() | st.floats(-1e6, 1e6, allow_nan=False),
        st.sampled_from(["n1", "n2", "fresh1", "fresh2", "fresh3"]),
    ),
    min_size=1, max_size=3 * CAP + 2,
)


def _base_rows() -> list[tuple]:
    rng = np.random.default_rng(11)
    rows = []
    for uid in range(1, 31):
        for _ in range(int(rng.integers(1, 6))):
            rows.append((uid, ["a", "b", "c", "z"][int(rng.integers(0, 4))], float(rng.normal(3, 6)),
                         int(rng.integers(-20, 130)), None if rng.random() < 0.2 else float(rng.uniform(0, 6)),
                         f"n{int(rng.integers(0, 4))}"))
    return rows


@pytest.fixture
def base(connect):
    session = connect(analyst="grammar")
    rows = _base_rows()
    make_table(session, COLUMNS, rows, NAMES, name="d", comment=COMMENT)
    make_table(session, COLUMNS, [], NAMES, name="d2", comment=COMMENT)
    return session, rows


def _exact(session, sql):
    plan, _ = session.plan(sql)
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    keys = [tuple(str(v) for v in k) for k in data.keys]
    return plan, {m.name: dict(zip(keys, data.measures[m.name], strict=True)) for m in plan.measures
                  if m.kind != "histogram"}


def _violations(session, template: str, rows_d2: list[tuple], scale: float = 1.0) -> list[str]:
    """Measures whose change exceeds ``scale`` × their derived sensitivity (ℓ1 or ℓ2)."""
    engine = session.engine
    engine.command(f"TRUNCATE TABLE {engine.table('d2')}")
    engine.insert("d2", rows_d2, NAMES)
    plan, a = _exact(session, template.format(t="d"))
    _, b = _exact(session, template.format(t="d2"))
    found = []
    for m in plan.measures:
        if m.name not in a:
            continue
        keys = sorted(set(a[m.name]) | set(b[m.name]))
        va = np.array([a[m.name].get(k, 0.0) for k in keys])
        vb = np.array([b[m.name].get(k, 0.0) for k in keys])
        l1 = float(np.abs(va - vb).sum())
        l2 = float(np.sqrt(((va - vb) ** 2).sum()))
        tol = 1e-9 * max(1.0, m.sensitivity) + 1e-6
        if l1 > scale * m.sensitivity + tol:
            found.append(f"{m.sql}: ℓ1 change {l1} > {scale * m.sensitivity}")
        if l2 > scale * m.l2_sensitivity + tol:
            found.append(f"{m.sql}: ℓ2 change {l2} > {scale * m.l2_sensitivity}")
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(template=queries(), extra=rows_strategy)
def test_random_queries_stay_within_their_sensitivity(base, template, extra):
    session, rows = base
    violations = _violations(session, template, rows + [(999, *r) for r in extra])
    assert not violations, f"{template}: {violations}"


def test_negative_control_understated_sensitivity_is_caught(base):
    """The same check flags a violation when the sensitivity is understated by half."""
    session, rows = base
    extreme = [(999, "a", 1e6, 2**31 - 1, 1e6, "fresh1")] * (CAP + 2)
    template = "SELECT count(*) AS c, sum(x) AS s FROM {t}"
    assert not _violations(session, template, rows + extreme)
    assert len(_violations(session, template, rows + extreme, scale=0.5)) == 4  # ℓ1 and ℓ2 of both

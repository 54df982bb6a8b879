"""The emitted SQL is built as one sqlglot tree and rendered once (docs/design.md rule 4; issue 12,
defect 7): no dpch-generated text is parsed on the way, and the SQL is the same as before.

``fixtures/emitted_sql.json`` holds, for every accepted query of ``dpch/fixtures/corpus.toml`` and
every join of ``test_public_joins.py``, the emitted SQL and both probes as the text-assembling code
produced them (``render(parse_one(<assembled text>))``), recorded at commit 3fd297e by running this
module with ``DPCH_WRITE_EMIT_FIXTURE=1`` before the conversion to trees. The per-test database
name of the join cases is written as ``{db}``.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

import dpch
from dpch import Budget
from dpch.sql.parse import DIALECT
from dpch.sql.rewrite import emit_probe_sqls, emit_sql, emit_tree, render
from tests.helpers import make_table
from tests.sql.test_corpus import CORPUS
from tests.sql.test_public_joins import DIM, DIM_ROWS, PRIVATE, ROWS, SAME_AS_CLICKHOUSE

FIXTURE = Path(__file__).parent / "fixtures" / "emitted_sql.json"
WRITE = os.environ.get("DPCH_WRITE_EMIT_FIXTURE") == "1"
SQL_DIR = Path(__file__).parents[2] / "dpch" / "sql"
#: modules that build emitted SQL: none may parse text (the analyst's SQL is parsed in parse.py)
BUILDERS = ("rewrite.py", "bounds.py", "aggregates.py", "grouping.py", "relation.py", "analyze.py",
            "rewrite_literals.py", "nodes.py")


def _emitted(session: dpch.Session, sql: str, database: str) -> dict[str, object]:
    explanation = session.explain(sql)
    plan = explanation.plan
    filtered, unfiltered = emit_probe_sqls(plan, database)
    texts: dict[str, str | list[str]] = {"sql": emit_sql(plan, database), "probe": filtered,
                                         "probe_unfiltered": unfiltered}
    texts["measures"] = [m.sql for m in plan.measures]
    return {k: _anonymous(v, database) for k, v in texts.items()}


def _anonymous(text: str | list[str], database: str) -> str | list[str]:
    """``text`` with the per-test database name written ``{db}`` (the fixture's database is fixed)."""
    if isinstance(text, list):
        return [str(_anonymous(t, database)) for t in text]
    for quote in ('"', "`"):
        text = text.replace(f"{quote}{database}{quote}", f"{quote}{{db}}{quote}")
    return text


def _collect(store_dsn: str, visits_db: str, connect, database: str) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    corpus = dpch.connect(store_dsn, database=visits_db, analyst="emit", default_budget=Budget(1e6, 0.5), seed=3)
    try:
        for case in CORPUS["accepted"]:
            out["corpus: " + case["sql"]] = _emitted(corpus, case["sql"], visits_db)
    finally:
        corpus.close()
    s = connect(analyst="emit")
    make_table(s, PRIVATE, ROWS, ["uid", "region", "x", "t"])
    make_table(s, DIM, DIM_ROWS, ["region", "name", "t"], name="dim", comment="dp: public")
    make_table(s, DIM, DIM_ROWS + [("a", "Alpha bis", 20)], ["region", "name", "t"], name="dim2",
               comment="dp: public")
    for sql in SAME_AS_CLICKHOUSE:
        out["joins: " + sql] = _emitted(s, sql, database)
    return out


def test_emitted_sql_is_unchanged(store_dsn, visits_db, connect, database):
    actual = _collect(store_dsn, visits_db, connect, database)
    if WRITE:
        FIXTURE.write_text(json.dumps(actual, indent=1, ensure_ascii=False) + "\n")
    expected = json.loads(FIXTURE.read_text())
    assert set(actual) == set(expected)
    for key, texts in expected.items():
        for part in ("sql", "probe", "probe_unfiltered"):
            assert actual[key][part] == texts[part], f"{key} [{part}]"
        # EXPLAIN's measure expressions are rendered from the same trees: as before, except that the
        # conditions inside, once rendered with double quotes, now quote like the rest (backticks), and
        # floor/ceil read as the emitted SQL spells them
        shown = [str(m).replace('"', "`").replace("floor(", "FLOOR(").replace("ceil(", "CEIL(")
                 for m in texts["measures"]]
        assert actual[key]["measures"] == shown, key


def test_calls_take_nodes_only():
    """A node constructor never parses: text given as an argument is refused, not parsed."""
    from sqlglot import exp

    from dpch.sql.nodes import call

    assert render(call("toFloat64", exp.column("x"))) == "toFloat64(x)"
    with pytest.raises(TypeError):
        call("toFloat64", "x) OR (1")  # type: ignore[arg-type]


@pytest.mark.parametrize("module", BUILDERS)
def test_builders_parse_no_text(module):
    """An AST scan: the modules that build emitted SQL call no sqlglot parse function."""
    tree = ast.parse((SQL_DIR / module).read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    names = {getattr(c.func, "attr", getattr(c.func, "id", "")) for c in calls}
    assert not names & {"parse_one", "parse", "maybe_parse", "parse_identifier"}, module
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not imported & {"parse_one", "parse", "maybe_parse"}, module


GROUPED = ("uid UInt32, s String, x Float64 COMMENT 'dp: bounds=[0, 10]', "
           "n UInt8 COMMENT 'dp: bounds=[0, 20]'")


@pytest.mark.parametrize("sql", [
    "SELECT s, count() FROM t GROUP BY s",
    "SELECT s, n, sum(x) FROM t WHERE x > 1 GROUP BY s, n",
    "SELECT upper(s) AS u, count() FROM t GROUP BY u",
])
def test_each_units_groups_at_random(connect, database, sql):
    """Partition selection with G < k (no corpus query has it): each unit's G groups, chosen under the
    release's key with the unit in the hash (issue 27), NULL-safe (a NULL key is one group of GROUP BY),
    read once as (unit, group) pairs of partial states (issue 29): ``FROM (SELECT unit, keys, <m>State(…)
    FROM rows GROUP BY unit, keys ORDER BY unit, sipHash64Keyed(key, unit, tuple(keys)) LIMIT G BY unit)``,
    merged per group, a group's units the count of its pairs; no IN set is left."""
    s = connect(analyst="emit")
    make_table(s, GROUPED, [(1, "a", 1.0, 3)], ["uid", "s", "x", "n"],
               comment="dp: privacy_unit=uid, max_rows_per_unit=3, max_groups_per_unit=2")
    plan = s.explain(sql + " SETTINGS dp_delta = 1e-6").plan
    assert plan.restrict_groups
    keys = [k.sql for k in plan.keys]
    unit, rows = "`__unit`", "`__rows`"
    key = "({dpch_cap_key0: UInt64}, {dpch_cap_key1: UInt64})"
    states = ", ".join(f"{m.node.meta.get('clickhouse_name') or m.node.this}State"
                       f"({', '.join(a.sql(dialect=DIALECT) for a in m.node.iter_expressions())}) AS {m.name}"
                       for m in plan.measures)
    aliased = ", ".join(f"{k} AS k{i}" for i, k in enumerate(keys))
    pairs = (f"SELECT {unit}, {aliased}, {states} FROM {rows} GROUP BY {unit}, {', '.join(keys)} "
             f"ORDER BY {unit}, sipHash64Keyed({key}, {unit}, tuple({', '.join(keys)})) "
             f"LIMIT {plan.groups_per_unit} BY {unit}")
    tree = emit_tree(plan)
    assert render(tree.args["from_"].this.this) == render(sqlglot.parse_one(pairs, read=DIALECT))
    assert tree.args.get("where") is None and tree.find(exp.In) is None
    merged = [render(e) for e in tree.expressions]
    assert merged[len(keys):] == [*(f"{m.node.meta.get('clickhouse_name') or m.node.this}Merge({m.name}) AS {m.name}"
                                   for m in plan.measures), "count() AS units"]

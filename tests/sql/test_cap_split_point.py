"""The split point's subquery reads the unit from the primary index *by the index's alias* (dpch.sql.cap,
``split_point``): an unqualified name that the index lacked would resolve to the outer query's column
(ClickHouse 26 runs correlated subqueries) instead of failing. Checked on the emitted tree, with a negative
control (the same subquery with the name unqualified)."""

from __future__ import annotations

from sqlglot import exp

from dpch.sql.cap import INDEX_ALIAS, SPLIT_MARKS, split_point
from dpch.sql.nodes import render


def _unit_columns(node: exp.Expr) -> list[exp.Column]:
    return [c for c in node.find_all(exp.Column) if c.name == "uid"]


def test_the_unit_is_read_from_the_index_by_its_alias():
    point = split_point("db", "t", "uid")
    columns = _unit_columns(point)
    assert columns and all(c.table == INDEX_ALIAS for c in columns)
    text = render(point)
    assert f"groupArray({SPLIT_MARKS})({INDEX_ALIAS}." in text and "mergeTreeIndex('db', 't') AS __index" in text
    # negative control: the unqualified form is what the check above refuses
    bare = point.copy().transform(lambda n: exp.column(n.name) if isinstance(n, exp.Column) else n)
    assert not all(c.table == INDEX_ALIAS for c in _unit_columns(bare))

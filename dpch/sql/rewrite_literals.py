"""SQL literals for values dpch itself places in emitted SQL (declared keys, bounds)."""

from __future__ import annotations

from dpch.sql.nodes import literal_node, render


def literal(value: object) -> str:
    """A ClickHouse literal's text for a declared key value (strings escaped by sqlglot), rendered
    from :func:`dpch.sql.nodes.literal_node`, the node emitted SQL holds."""
    return render(literal_node(value))

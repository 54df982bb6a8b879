"""Node constructors for the SQL dpch emits, and the two ways a tree becomes text.

Every fragment of emitted SQL is built here as a sqlglot node (docs/design.md rule 4): nothing
dpch generates is ever parsed, so the tree that the probe checks is the tree that runs. A
function call is built as the ClickHouse parser would build it (same node class, original name
kept), so a tree renders exactly as the same SQL parsed and rendered would.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlglot import exp
from sqlglot.dialects.clickhouse import ClickHouse

from dpch.sql.parse import DIALECT
from dpch.sql.pins import PINS


class _Shown(ClickHouse):
    """ClickHouse as dpch *displays* fragments (EXPLAIN, derivations): backtick-quoted identifiers."""

    class Tokenizer(ClickHouse.Tokenizer):
        IDENTIFIERS = ["`", '"']


def render(tree: exp.Expr) -> str:
    """The one way an emitted tree becomes the SQL that runs."""
    return tree.sql(dialect=DIALECT)


def show(tree: exp.Expr) -> str:
    """A fragment as dpch displays it (identifiers in backticks); never sent to ClickHouse as a query
    of its own by the emit path."""
    return tree.sql(dialect=_Shown)


def num(x: float) -> str:
    """A ClickHouse numeric literal's text for a bound (also used in messages)."""
    # whole numbers are written as integers at any size below 2^64: a Float64 literal beside an
    # integer column makes least/greatest fail with a type error (no common type)
    if float(x).is_integer() and abs(x) < 2**64:
        return str(int(x))
    return repr(float(x))


def number(x: float) -> exp.Expr:
    """The literal node of :func:`num`."""
    return exp.Literal.number(num(x))


def float_number(x: float) -> exp.Expr:
    """``x`` as a Float64 literal node (``0.0``, ``1e-05``): beside a Float64 value it keeps the type."""
    return exp.Literal.number(repr(float(x)))


#: calls the parser builds by a parser of their own (e.g. floor, ceil): no original name is kept
_SPECIAL_PARSE = frozenset(ClickHouse.parser_class.FUNCTION_PARSERS)


def call(name: str, *args: exp.Expr) -> exp.Func:
    """``name(args…)`` as the ClickHouse parser builds it; the arguments are copied.

    Only nodes are accepted: ``exp.func`` would parse a string argument, and nothing dpch builds
    is ever parsed.
    """
    if not all(isinstance(a, exp.Expr) for a in args):
        raise TypeError(f"{name}(): arguments must be sqlglot nodes, not text")
    node = exp.func(name, *args, dialect=DIALECT)
    if not isinstance(node, exp.Anonymous) and name.upper() not in _SPECIAL_PARSE:
        node.meta["clickhouse_name"] = name  # rendered under the name written, as a parsed call is
    return node


def cast_to(node: exp.Expr, type_: str) -> exp.Expr:
    """``CAST(node, 'type')``: ClickHouse's cast to a type named by a string."""
    return exp.CastToStrType(this=node.copy(), to=exp.Literal.string(type_))


def ident(name: str) -> exp.Identifier:
    return exp.Identifier(this=name, quoted=True)


def column(name: str, table: str | None = None) -> exp.Column:
    """A quoted column, optionally qualified by an (unquoted, dpch-made) table alias such as ``t0``."""
    qualifier = exp.Identifier(this=table, quoted=False) if table else None
    return exp.Column(this=ident(name), table=qualifier)


def table(database: str, name: str, alias: str | None = None) -> exp.Table:
    """``database.name [AS alias]``."""
    node = exp.Table(this=ident(name), db=ident(database))
    if alias:
        node.set("alias", exp.TableAlias(this=exp.Identifier(this=alias, quoted=False)))
    return node


def subquery(select: exp.Query, alias: str) -> exp.Subquery:
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.Identifier(this=alias, quoted=False)))


def paren(node: exp.Expr) -> exp.Paren:
    return exp.Paren(this=node.copy())


def conjunction(nodes: list[exp.Expr]) -> exp.Expr:
    """``(a) AND (b) AND …`` left to right, each conjunct in parentheses."""
    result: exp.Expr = paren(nodes[0])
    for node in nodes[1:]:
        result = exp.And(this=result, expression=paren(node))
    return result


def conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    """The conditions of ``node``'s top-level AND, through parentheses (none for None): what every row
    that meets ``node`` meets."""
    if node is None:
        return []
    if isinstance(node, exp.Paren):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def alias(node: exp.Expr, name: str, *, quoted: bool = True) -> exp.Alias:
    return exp.Alias(this=node.copy(), alias=exp.Identifier(this=name, quoted=quoted))


def ordered(node: exp.Expr) -> exp.Ordered:
    return exp.Ordered(this=node.copy(), nulls_first=False)


def limit_by(count: int, by: exp.Expr, *more: exp.Expr) -> exp.Limit:
    """ClickHouse's ``LIMIT count BY by, more…``."""
    return exp.Limit(expression=exp.Literal.number(count), expressions=[e.copy() for e in (by, *more)])


def setting(name: str, value: exp.Expr) -> exp.EQ:
    return exp.EQ(this=exp.column(name), expression=value)


def pinned_settings() -> list[exp.EQ]:
    """Settings every emitted query (and every query that types one) carries, whatever the server
    profile says: the row rule (docs/design.md rule 5), the cap and the exact value were checked
    under them. :data:`dpch.sql.pins.PINS` lists each with why it is pinned."""
    return [setting(pin.name, exp.Literal.number(pin.value) if isinstance(pin.value, int)
                    else exp.Literal.string(pin.value)) for pin in PINS]


def literal_node(value: object) -> exp.Expr:
    """The literal of a value dpch places in emitted SQL (a declared key, a unit in the audit)."""
    if isinstance(value, datetime):
        return exp.convert(value.isoformat(sep=" "))
    if isinstance(value, date):
        return exp.convert(value.isoformat())
    return exp.convert(value)


def is_within(node: exp.Expr, ancestor: exp.Expr) -> bool:
    """Whether ``ancestor`` is one of ``node``'s ancestors (by identity: an equal subtree elsewhere is not)."""
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False


__all__ = ["alias", "call", "cast_to", "column", "conjunction", "conjuncts", "float_number", "ident", "is_within",
           "limit_by", "literal_node", "num", "number", "ordered", "paren", "pinned_settings", "render", "setting",
           "show", "subquery", "table"]

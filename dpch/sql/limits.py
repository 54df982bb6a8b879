"""Limits on the planner itself: how large and how deep a query dpch will plan.

Planning is recursive in places (sqlglot's parser and generator, dpch's analysis) and runs under
Python's default recursion limit of 1000 frames, shared with whatever called dpch; and its work
grows with the size of the tree. Without limits, 300 nested ``addDays(…)`` raised RecursionError,
and a 68 KB chain of ``+ INTERVAL 1 DAY`` cost more than 30 s of CPU per request. So every query is
measured before and right after parsing, and one past a limit is refused at once, in words naming
the limit and what to write instead — before anything is read or charged, from the text alone:

- :data:`MAX_QUERY_BYTES` — the text, in UTF-8 bytes; ClickHouse's own default ``max_query_size``.
- :data:`MAX_NESTING` — brackets (parentheses, function calls, subqueries, arrays, tuples) and
  ``CASE … END`` inside one another, counted on the tokens before parsing: sqlglot's parser takes
  about 25 frames per level, so 24 levels leave room for the caller's stack and the later walks.
- :data:`MAX_DEPTH` — levels of the parsed tree (a chain of ``+``, ``-`` or ``NOT`` is one level per
  operator). A list joined by ``AND`` or ``OR``, which BI tools write long (a multi-value filter), is
  first rebalanced (:func:`balance_connectors`: the same condition, rendered the same) and then
  costs log₂ of its length: such lists are limited only by size.
- :data:`MAX_NODES` — the tree's nodes (names, values, operators): every stage walks the tree, and
  20 000 nodes plan in about a second.
- :data:`MAX_TIME_CONSTANTS` — date and time constants to evaluate in ClickHouse
  (:mod:`.time_constants`; each costs two round trips).

Real BI SQL is far inside these: the Grafana, Superset, Metabase, JDBC and clickhouse-connect
queries of the test fixtures nest brackets at most 3 deep, and dpch's own emitted SQL 13 deep
(``tests/sql/test_limits.py`` checks every fixture against the limits).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.dialects.clickhouse import ClickHouse
from sqlglot.tokens import Token, TokenType

from dpch.errors import QueryRejected

#: the query text, in UTF-8 bytes (ClickHouse's default max_query_size)
MAX_QUERY_BYTES = 262_144
#: brackets and CASE … END inside one another
MAX_NESTING = 24
#: levels of the parsed tree, after long AND/OR lists are rebalanced
MAX_DEPTH = 64
#: nodes of the parsed tree
MAX_NODES = 20_000
#: constant dates and times folded by evaluating them in ClickHouse (docs/sql-reference.md "Dates and times")
MAX_TIME_CONSTANTS = 128

_OPENING = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE})
_CLOSING = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END})
#: AND and OR lists shorter than this are left as parsed
_BALANCE_FROM = 8

LIMITS_HINT = "see docs/sql-reference.md, \"Limits on a query\""


def check_text(text: str) -> None:
    """Refuses a query text over :data:`MAX_QUERY_BYTES` (before it is tokenized)."""
    # a character is at most 4 bytes in UTF-8: encode only when the length alone cannot decide
    if len(text) <= MAX_QUERY_BYTES // 4:
        return
    size = len(text) if len(text) > MAX_QUERY_BYTES else len(text.encode("utf-8", errors="replace"))
    if size > MAX_QUERY_BYTES:
        raise QueryRejected(
            f"the query is {size / 1024:.0f} KiB; dpch plans queries of at most {MAX_QUERY_BYTES // 1024} KiB "
            "(ClickHouse's own default max_query_size)",
            hint="send less text: e.g. put a long list of values in a public table and JOIN it; " + LIMITS_HINT)


def check_nesting(tokens: Sequence[Token]) -> None:
    """Refuses brackets and ``CASE … END`` nested deeper than :data:`MAX_NESTING` (before parsing,
    whose recursion they drive)."""
    depth = deepest = 0
    for token in tokens:
        if token.token_type in _OPENING:
            depth += 1
            if depth > deepest:
                deepest = depth
        elif token.token_type in _CLOSING and depth > 0:
            depth -= 1
    if deepest > MAX_NESTING:
        raise QueryRejected(
            f"the query nests brackets {deepest} levels deep (parentheses, function calls, subqueries or CASE "
            f"inside one another); dpch's planner allows at most {MAX_NESTING}",
            hint="write it flatter, e.g. addDays(d, 300) instead of 300 nested addDays(…), or a CTE instead of "
                 "nested subqueries; " + LIMITS_HINT)


def check_unparsed(text: str) -> None:
    """:func:`check_text` and :func:`check_nesting` of ``text``, for callers that parse it themselves
    (the gateway reads metadata queries before the DP path does). sqlglot's TokenError propagates."""
    check_text(text)
    check_nesting(ClickHouse().tokenize(text))


def too_deep() -> QueryRejected:
    """The refusal of a query whose planning ran out of Python's stack although it is within the
    limits above (a shape they do not measure, e.g. a long run of prefix operators)."""
    return QueryRejected(
        f"the query is nested too deeply for dpch's planner (at most {MAX_NESTING} levels of brackets and "
        f"{MAX_DEPTH} levels of operators)",
        hint="write it flatter: fold repeated steps into one (d + INTERVAL 300 DAY) and drop redundant "
             "NOT, - or brackets; " + LIMITS_HINT)


def balance_connectors(tree: exp.Expr) -> exp.Expr:
    """``tree`` with each long list joined by one AND (or one OR) rebuilt as a balanced tree.

    sqlglot parses ``a OR b OR c OR d`` as ((a OR b) OR c) OR d, one level per term; ClickHouse reads
    it as one ``or(a, b, c, d)``. Both connectives are associative (also with NULL's three-valued
    logic), and the balanced tree renders as the same text, so the condition is unchanged; only its
    depth drops to log₂ of its length. Brackets the analyst wrote stay (a Paren is a term). Iterative:
    the list may be far longer than Python's stack."""
    roots = [node for node in tree.walk() if isinstance(node, exp.And | exp.Or)
             and not (isinstance(node.parent, type(node)) and node.arg_key in ("this", "expression"))]
    for root in roots:
        terms = _terms(root)
        if len(terms) < _BALANCE_FROM:
            continue
        balanced = _balanced(type(root), terms)
        if root is tree:
            tree = balanced
        else:
            root.replace(balanced)
    return tree


def _terms(root: exp.Expr) -> list[exp.Expr]:
    """The terms of the AND (or OR) list rooted at ``root``, left to right."""
    kind = type(root)
    terms: list[exp.Expr] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if type(node) is kind:
            stack.append(node.expression)  # popped after the left side: terms stay in order
            stack.append(node.this)
        else:
            terms.append(node)
    return terms


def _balanced(kind: type[exp.And] | type[exp.Or], terms: list[exp.Expr]) -> exp.Expr:
    level = terms
    while len(level) > 1:  # pairwise, bottom up: depth ⌈log₂ n⌉ without recursion
        paired: list[exp.Expr] = [kind(this=level[i], expression=level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def check_tree(tree: exp.Expr) -> None:
    """Refuses a parsed tree deeper than :data:`MAX_DEPTH` or larger than :data:`MAX_NODES` (call it
    after :func:`balance_connectors`). Iterative, and stops at the first limit passed."""
    nodes = deepest = 0
    stack: list[tuple[exp.Expr, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise QueryRejected(
                f"the query has more than {MAX_NODES:,} parts (names, values and operators); dpch's planner "
                f"allows at most {MAX_NODES:,}",
                hint="shorten long lists of values, e.g. put them in a public table and JOIN it; " + LIMITS_HINT)
        if depth > deepest:
            deepest = depth
            if deepest > MAX_DEPTH:
                raise QueryRejected(
                    f"an expression in the query is more than {MAX_DEPTH} levels deep (e.g. a chain of more than "
                    f"{MAX_DEPTH} +, - or NOT); dpch's planner allows at most {MAX_DEPTH}",
                    hint="fold repeated steps into one, e.g. d + INTERVAL 300 DAY instead of 300 times + INTERVAL "
                         "1 DAY (long AND/OR lists are fine); " + LIMITS_HINT)
        stack.extend((child, depth + 1) for child in node.iter_expressions())


def check_time_constants(count: int) -> None:
    """Refuses a query with more than :data:`MAX_TIME_CONSTANTS` date/time constants to fold."""
    if count > MAX_TIME_CONSTANTS:
        raise QueryRejected(
            f"the query has {count} date or time constants to evaluate; dpch evaluates at most {MAX_TIME_CONSTANTS}",
            hint="compare with a range (t >= toDate('…') AND t < toDate('…')) instead of listing dates; "
                 + LIMITS_HINT)


__all__ = [
    "MAX_DEPTH", "MAX_NESTING", "MAX_NODES", "MAX_QUERY_BYTES", "MAX_TIME_CONSTANTS", "balance_connectors",
    "check_nesting", "check_text", "check_time_constants", "check_tree", "check_unparsed", "too_deep",
]

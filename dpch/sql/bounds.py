"""Row expressions: bounds by interval arithmetic, and the clamped SQL that enforces them.

An aggregate's argument may be any expression over bounded columns, literals, arithmetic,
comparisons, CASE/if and an allowlist of monotone or bounded functions. Every column read
as a *value* is clamped to its declared bounds in the emitted SQL, so the expression's
value provably lies in the interval computed here (interval arithmetic; a Lipschitz map of
bounded inputs has bounded output, the DPCH paper Remark 1).
The final value is clamped to that interval once more and non-finite results (0/0, sqrt of
a negative) are replaced by a fixed in-range value, so no row can push an aggregate outside
the bound or turn it into NaN.

Columns used inside *conditions* (WHERE, the test of an if/CASE, countIf) need no bounds:
a condition only selects rows and cannot raise a sum above k·max|bound|.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from dpch.errors import MissingBoundsError, QueryRejected
from dpch.policy.model import is_numeric_type
from dpch.sql import functions, guards
from dpch.sql.expression_types import (
    ExpressionTypes,
    is_datetime64,
    placeholder,
    static_type,
)
from dpch.sql.intervals import BOOL, Interval, ValueExpr
from dpch.sql.nodes import call, float_number, number, show
from dpch.sql.shape import literal_type
from dpch.sql.value_rules import MAX_ROUND_PLACES, Branch


@dataclass(frozen=True)
class ColumnRef:
    """A column as an expression reads it: its node in that context, its type and its bounds."""

    node: exp.Expr
    name: str
    type: str
    bounds: Interval | None
    integer: bool
    is_unit: bool = False

    @property
    def sql(self) -> str:
        return show(self.node)


Mode = Literal["value", "condition"]
Resolver = Callable[[exp.Column], ColumnRef]

AGGREGATE_NAMES = frozenset({
    "count", "sum", "avg", "min", "max", "quantile", "median", "uniq", "any", "stddevpop",
    "stddevsamp", "varpop", "varsamp", "grouparray", "argmax", "argmin", "countif", "sumif",
    "avgif", "uniqexact", "anylast", "topk", "variance", "stddev", "var_pop", "var_samp",
    "stddev_pop", "stddev_samp", "groupuniqarray", "quantiles", "quantileexact", "std", "varpopstable",
    "varsampstable", "stddevpopstable", "stddevsampstable",
})


_NAMED = (exp.Anonymous, exp.AnonymousAggFunc, exp.CombinedAggFunc, exp.ParameterizedAgg)


def function_name(node: exp.Expr) -> str:
    """The lower-case SQL name of a function node ('' for anything else)."""
    if isinstance(node, _NAMED):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return ""


def clamp(node: exp.Expr, interval: Interval) -> exp.Expr:
    """``node`` clamped to ``interval`` in its own (integer or date) type: bounds as exact literals."""
    return call("least", call("greatest", node, number(interval.lo)), number(interval.hi))


def keep_null(value: exp.Expr, clamped: exp.Expr) -> exp.Expr:
    """``clamped``, but NULL where ``value`` is NULL: ClickHouse's least/greatest skip a NULL
    argument, so a bare clamp would turn every NULL into the lower bound (summed, and counted by avg)
    instead of leaving it out as sum and avg do."""
    return call("if", call("isNull", value), exp.Null(), clamped)


def clamp_float(node: exp.Expr, interval: Interval) -> exp.Expr:
    """Float64 ``node`` clamped to ``interval``; bounds as Float64 literals (least(Float64, UInt64) is a
    type error in ClickHouse for integers of 2^32 and more)."""
    return call("least", call("greatest", node, float_number(interval.lo)), float_number(interval.hi))


# -- types ------------------------------------------------------------------------------------------


def read_type(type_: str) -> str:
    """The type emitted SQL reads a column of type ``type_`` as (:func:`read_column`)."""
    if _is_decimal(type_):
        return type_.replace(type_[type_.index("Decimal"):_closing(type_, type_.index("Decimal")) + 1], "Float64")
    return type_


def _closing(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


class Typer:
    """The ClickHouse type of any node of an analyst's row expression, under ``resolve``.

    Literals and columns are typed here (a column as emitted SQL reads it, :func:`read_type`); anything
    else by ClickHouse (:class:`ExpressionTypes`), with each column replaced by a non-constant value of
    its read type. ``prefetch`` types a batch in one round trip."""

    def __init__(self, resolve: Resolver, types: ExpressionTypes | None) -> None:
        self.resolve = resolve
        self.types = types or ExpressionTypes(None)

    def static(self, node: exp.Expr) -> str | None:
        """The type of a literal or column, known without asking ClickHouse (None: ask)."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column):
            return read_type(self.resolve(node).type)
        if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
            return literal_type(node.this)
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and node.this.this.isdigit():
            return literal_type(node.this.this, negative=True)
        if isinstance(node, exp.Interval) and node.unit is not None:
            return f"Interval{node.unit.name.capitalize().rstrip('s')}"
        return static_type(node) or _folded_constant_type(node)

    def _typed(self, node: exp.Expr) -> exp.Expr:
        """``node`` with each column replaced by a placeholder of its read type (reads no table)."""
        holder = exp.Paren(this=node.copy())
        for col in list(holder.find_all(exp.Column)):
            col.replace(placeholder(read_type(self.resolve(col).type)))
        return holder.this

    def prefetch(self, nodes: list[exp.Expr]) -> None:
        asked = [self._typed(n) for n in nodes if self.static(n) is None]
        if asked:
            self.types.types(asked)

    def __call__(self, node: exp.Expr) -> str:
        found = self.static(node)
        if found is not None:
            return found
        return self.types.types([self._typed(node)])[0]


#: the types of the exact forms every date and time constant is folded into (:mod:`.time_constants`)
_FOLDED_TYPES = {"todate": "Date", "todate32": "Date32", "fromunixtimestamp64nano": "DateTime64(9)"}


def _folded_constant_type(node: exp.Expr) -> str | None:
    """The type of a folded date or time constant (``toDateTime(1700000000, 'UTC')``: DateTime('UTC')),
    known without asking: a dashboard's time filter costs no round trip to type."""
    if not isinstance(node, exp.Anonymous) or not all(isinstance(a, exp.Literal) for a in node.expressions):
        return None
    name = str(node.this).lower()
    if name == "todatetime" and node.expressions and not node.expressions[0].is_string:
        zone = node.expressions[1].this if len(node.expressions) > 1 else None
        return f"DateTime('{zone}')" if zone else "DateTime"
    return _FOLDED_TYPES.get(name) if len(node.expressions) == 1 else None


def _type_questions(node: exp.Expr) -> list[exp.Expr]:
    """The nodes whose types the registry's family checks and guards will ask for."""
    asked: list[exp.Expr] = []
    for sub in node.walk():
        entry = functions.rule(sub)
        if entry is None:
            continue
        for arg, child in functions.arguments(sub, entry):
            if arg.accepts is not functions.Accepts.CONSTANT and (arg.family != functions.Family.ANY
                                                                 or entry.same_family or entry.guard is not None):
                asked.append(child)
    return asked


# -- conditions --------------------------------------------------------------------------------------


def check_condition(node: exp.Expr, resolve: Resolver, types: ExpressionTypes | None = None) -> None:
    """Validates a condition: every node in the registry (:mod:`.functions`), constant-only arguments
    literal and time zones known, every argument of a type its rule accepts (ClickHouse's own types),
    known columns, no subqueries or aggregates. Nothing here depends on the rows."""
    for sub in node.walk():
        if isinstance(sub, exp.Select | exp.Subquery):
            raise QueryRejected("subqueries in conditions are not supported", hint="filter with literal values")
        if isinstance(sub, exp.Window):
            raise QueryRejected("window functions (OVER) are not supported")
        if isinstance(sub, exp.AggFunc) or function_name(sub) in AGGREGATE_NAMES:
            raise QueryRejected(
                "aggregate functions are not allowed in WHERE or inside another aggregate",
                hint="filter rows on columns; filter groups with HAVING",
            )
        if isinstance(sub, exp.Column):
            _check_readable(resolve(sub))
            continue
        functions.check_total(sub)
    typer = Typer(resolve, types)
    typer.prefetch(_type_questions(node))
    for sub in node.walk():
        functions.check_families(sub, typer)
        for kind, constant in functions.constant_kinds(sub):
            if kind == functions.ZONE and isinstance(constant, exp.Literal) and constant.is_string:
                check_zone(constant.this, typer.types)


#: column types whose values a function runs on per variant, so a type error appears only on the rows
#: holding another variant: never read inside an expression
_PER_VARIANT = ("Variant(", "Dynamic", "JSON", "Object(")


def _check_readable(ref: ColumnRef) -> None:
    if any(marker in ref.type for marker in _PER_VARIANT):
        raise QueryRejected(f"column {ref.name} has type {ref.type}, which dpch does not read in expressions",
                            hint="a function over it runs per variant and could fail on some rows only; the "
                                 "data owner can expose a typed column instead")


def check_zone(zone: str, types: ExpressionTypes) -> None:
    """Refuses a constant time zone ClickHouse does not know (asked before the charge; without a
    database the probe asks)."""
    if types.describe is None:
        return
    try:
        types.types([call("toDateTime", number(0), exp.Literal.string(zone))])
    except QueryRejected:
        raise QueryRejected(f"unknown time zone {zone!r}",
                            hint="use a zone name ClickHouse knows, e.g. 'UTC', 'Europe/Berlin', 'Asia/Kolkata'"
                            ) from None


def condition(node: exp.Expr, resolve: Resolver, types: ExpressionTypes | None = None) -> exp.Expr:
    """A validated condition as a new tree: guards (:mod:`.guards`) around the arguments the registry
    marks guarded, and column references mapped to how emitted SQL reads them (:func:`read_column`).

    Decimal columns are read as Float64: Decimal division by zero and Decimal overflow raise inside
    ClickHouse, which a row could trigger on purpose (docs/design.md rule 5); DateTime64 columns are
    read clamped to the range every scale holds (:func:`guards.read_datetime64`).
    """
    check_condition(node, resolve, types)
    typer = Typer(resolve, types)
    holder = exp.Paren(this=node.copy())  # a parent, so that a bare column can be replaced too
    for sub in reversed(list(holder.walk())):  # descendants before their ancestors
        entry = functions.rule(sub)
        if entry is not None and entry.guard is not None:
            guarded = entry.guard(sub, typer)
            if guarded is not sub:
                sub.replace(guarded)
    for col in list(holder.find_all(exp.Column)):
        ref = resolve(col)
        col.replace(read_column(ref.node, ref.type))
    return holder.this


def expression_type(node: exp.Expr, resolve: Resolver, types: ExpressionTypes | None) -> str:
    """ClickHouse's type of the row expression ``node`` (a subquery's projected column); 'String' where
    no database is at hand to ask (planning without one is for tests: nothing runs)."""
    if types is None or types.describe is None:
        return Typer(resolve, None).static(node) or "String"
    return Typer(resolve, types)(node)


def read_column(node: exp.Expr, type_: str) -> exp.Expr:
    """How emitted SQL reads a column of ClickHouse type ``type_``: Decimals as Float64, DateTime64 clamped
    to the range every scale holds, the rest as is."""
    if _is_decimal(type_):
        return call("toFloat64", node)
    if is_datetime64(type_):
        return guards.read_datetime64(node.copy(), type_)
    return node.copy()


def _is_decimal(type_: str) -> bool:
    return "Decimal" in type_


#: integer values are carried exactly (in Int128) only below this magnitude: at most 2^64 rows of
#: |value| < 2^62 sum to < 2^126, and toInt128 of a larger Float64 (e.g. pow(x, 4) clamped at 1e48)
#: would wrap silently (docs/design.md rule 6); larger integer values are carried as Float64
MAX_EXACT_INTEGER = 2.0**62


class ValueTranslator:
    """Translates a value expression into clamped SQL with bounds (interval arithmetic). The rules per
    function are the registry's (:func:`functions.value_rule`, :mod:`.value_rules`)."""

    def __init__(self, resolve: Resolver, types: ExpressionTypes | None = None) -> None:
        self.resolve = resolve
        self.types = types

    def translate(self, node: exp.Expr, context: str) -> ValueExpr:
        """``context`` names the aggregate for error messages, e.g. ``sum(x * 2)``."""
        while isinstance(node, exp.Paren):
            node = node.this
        value = self.value(node, context)
        nullable = self.nullable(node)
        interval = value.interval.check()
        exact_integer = (value.integer and float(interval.lo).is_integer() and float(interval.hi).is_integer()
                         and interval.magnitude < MAX_EXACT_INTEGER)
        if isinstance(node, exp.Column) and exact_integer:
            # clamped in the column's own type (exact; an integer is never NaN), then widened so that
            # sums accumulate in Int128 and cannot wrap (docs/design.md rule 6)
            ref = self.resolve(node)
            tree: exp.Expr = call("toInt128", clamp(ref.node, interval))
            return ValueExpr(keep_null(ref.node, tree) if nullable else tree, interval, value.integer, nullable)
        fallback = float(min(max(0.0, interval.lo), interval.hi))
        inner = value.node
        if isinstance(node, exp.Column):  # clamp once: NaN/inf first, then the bounds
            inner = self.resolve(node).node
        tree = clamp_float(call("ifNotFinite", call("toFloat64", inner), float_number(fallback)), interval)
        if exact_integer:
            tree = call("toInt128", tree)
        return ValueExpr(keep_null(inner, tree) if nullable else tree, interval, value.integer, nullable)

    def nullable(self, node: exp.Expr) -> bool:
        """Whether ``node`` can evaluate to NULL on some row."""
        if any(isinstance(n, exp.Null) for n in node.walk()):
            return True
        return any("Nullable(" in self.resolve(c).type for c in node.find_all(exp.Column))

    # -- the recursion ---------------------------------------------------------------------------

    def value(self, node: exp.Expr, context: str) -> ValueExpr:
        """One node's translation: columns and literals here, conditions as 0/1, functions by their
        registry rule."""
        if isinstance(node, exp.Paren):
            return self.value(node.this, context)
        if isinstance(node, exp.Column):
            return self._column(node, context)
        if isinstance(node, exp.Literal):
            if node.is_string:
                raise QueryRejected(f"{context}: a string literal is not a number")
            number_ = float(node.this)
            return ValueExpr(number(number_), Interval(number_, number_), number_.is_integer())
        if isinstance(node, exp.Boolean):
            truth = 1.0 if node.this else 0.0
            return ValueExpr(number(truth), Interval(truth, truth), True)
        if _is_condition(node):
            return ValueExpr(call("toUInt8", condition(node, self.resolve, self.types)), BOOL, True)
        found = functions.rule(node)
        if found is not None and found.value is not None:
            return found.value(node, self, context)
        if isinstance(node, exp.Func):
            name = functions.display_name(node)  # as the analyst wrote it (toString, not tostring)
            raise QueryRejected(
                f"{context}: function {name.rstrip('()')}() is not supported inside aggregates",
                hint="use arithmetic, if/CASE, abs, least/greatest, round/floor/ceil, sqrt, log, exp, pow",
            )
        raise QueryRejected(f"{context}: {functions.display_name(node)} is not supported inside aggregates")

    def _column(self, node: exp.Column, context: str) -> ValueExpr:
        ref = self.resolve(node)
        if ref.bounds is None:
            if not is_numeric_type(ref.type):
                raise QueryRejected(f"{context}: column {ref.name} is not numeric (type {ref.type})")
            if ref.is_unit:
                raise QueryRejected(f"{context}: the privacy unit column cannot be aggregated as a value")
            raise MissingBoundsError(
                f"{context} needs bounds on {ref.name}, and it has none",
                hint=f"the data owner adds them: ALTER TABLE ... COMMENT COLUMN {ref.name} "
                "'dp: bounds=[lo, hi]' (or in the policy TOML)",
            )
        # inside an expression every column is computed in Float64: integer arithmetic wraps
        # silently and Decimal arithmetic raises, both on values a row chooses (rules 5 and 6)
        tree = clamp_float(call("toFloat64", ref.node), ref.bounds)
        if self.nullable(node):
            tree = keep_null(ref.node, tree)
        return ValueExpr(tree, ref.bounds, ref.integer)

    def branches(self, branches: list[Branch], context: str) -> ValueExpr:
        """if/CASE: the value lies in the union of the branches' intervals (a missing ELSE is 0)."""
        parts: list[exp.Expr] = []
        interval, integer = None, True
        for cond, value in branches:
            translated = self.value(value, context) if value is not None else ValueExpr(number(0), Interval(0, 0),
                                                                                           True)
            interval = translated.interval if interval is None else interval.union(translated.interval)
            integer = integer and translated.integer
            if cond is not None:
                parts.append(condition(cond, self.resolve, self.types))
            parts.append(translated.node)
        assert interval is not None
        return ValueExpr(call("multiIf", *parts), interval, integer)


def _is_condition(node: exp.Expr) -> bool:
    return isinstance(node, exp.And | exp.Or | exp.Not | exp.EQ | exp.NEQ | exp.GT | exp.GTE | exp.LT
                      | exp.LTE | exp.In | exp.Between | exp.Like | exp.ILike | exp.Is)


__all__ = ["AGGREGATE_NAMES", "BOOL", "MAX_EXACT_INTEGER", "MAX_ROUND_PLACES", "ColumnRef", "Interval", "Typer",
           "ValueExpr", "ValueTranslator", "check_condition", "check_zone", "clamp", "clamp_float", "condition",
           "expression_type",
           "function_name", "keep_null", "read_column", "read_type"]

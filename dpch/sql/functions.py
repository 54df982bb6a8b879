"""The registry of every function and operator dpch lets into emitted SQL, with its totality conditions.

docs/design.md rule 5 (totality): emitted SQL must not raise on any row. An error that appears only
when a chosen row has a chosen property is a noiseless oracle: ``WHERE match('x', if(id = 1234 AND
income > 30000, '(', 'x'))`` fails exactly when one person's income exceeds 30 000, and a binary
search on such errors reads a value exactly for a negligible ε. So nothing reaches ClickHouse
unless it is listed here, and each entry says what makes it total:

- ``constant``: arguments that must be literals, because ClickHouse compiles them and fails on a
  bad one (regex and LIKE patterns, rounding places, week modes, date units). A literal argument
  is the same on every row, so a bad one fails the probe (:func:`dpch.sql.rewrite.emit_probe_sqls`)
  before anything is charged, whatever the data;
- Decimal operands: Decimal division by zero raises and Decimal overflow raises or wraps, so every
  Decimal column is read as Float64 (:func:`read_as`), where ``/`` by 0 gives ±inf/NaN and nothing
  raises;
- functions with a throwing and a non-throwing form are listed in their non-throwing form only
  (``toInt64OrNull``, not ``toInt64``; ``/`` rather than ``intDiv``; no ``%``).

Entries are keyed by sqlglot node class (how sqlglot parses ClickHouse SQL) and, for functions
sqlglot does not know, by lower-case name. Anything else is refused before the charge.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql.parse import DIALECT


@dataclass(frozen=True)
class Totality:
    """Why an operator or function cannot raise on a row's value, and the conditions for it.

    ``constant`` lists the arguments that must be literals: sqlglot arg names for node classes,
    positions (0-based) for functions sqlglot parses as anonymous calls.
    """

    why: str
    constant: tuple[str | int, ...] = ()
    #: what to write instead when a constant argument is an expression over the rows
    hint: str = ""


_STRUCTURE = Totality("structure: no computation")
_LOGIC = Totality("boolean logic over UInt8/Nullable(UInt8) is total")
_COMPARE = Totality("comparison never raises on a value (type mismatches fail the probe, on no data)")
_ARITH = Totality("+, -, * wrap or give ±inf on overflow and never raise; Decimal operands are read as Float64")
_DIV = Totality("'/' returns Float64: x/0 is ±inf or NaN, never an error; Decimal operands are read as Float64")
_MATH = Totality("Float64 math: out-of-domain arguments give NaN or ±inf, never an error")
_STRING = Totality("total on every string, including empty and invalid UTF-8")
_DATE = Totality("calendar functions are total on Date/DateTime values")
_NULL = Totality("NULL tests and NULL replacement are total")
_PARSE = Totality("the …OrNull form returns NULL on a value that does not parse, never an error")
#: the exact forms dpch.sql.time_constants folds every constant date or time into; they would raise on
#: a bad text or number, so their arguments must be literals, which the folding has already evaluated
_TIME_CONSTANT = Totality(
    "a date or time constant, evaluated once before the charge", constant=(0, 1),
    hint="compare the date or time column itself with a constant, e.g. visit_date >= toDate('2026-01-01'); "
         "a column that holds dates as text can be read with toDateOrNull(column)")

#: operators and functions sqlglot parses into their own node classes
NODE_RULES: dict[type[exp.Expr], Totality] = {
    # structure
    exp.Column: _STRUCTURE, exp.Identifier: _STRUCTURE, exp.Literal: _STRUCTURE, exp.Boolean: _STRUCTURE,
    exp.Null: _STRUCTURE, exp.Paren: _STRUCTURE, exp.Tuple: _STRUCTURE, exp.Array: _STRUCTURE,
    exp.DataType: _STRUCTURE,
    # logic and comparison
    exp.And: _LOGIC, exp.Or: _LOGIC, exp.Not: _LOGIC, exp.Xor: _LOGIC,
    exp.EQ: _COMPARE, exp.NEQ: _COMPARE, exp.GT: _COMPARE, exp.GTE: _COMPARE, exp.LT: _COMPARE,
    exp.LTE: _COMPARE, exp.NullSafeEQ: _COMPARE, exp.NullSafeNEQ: _COMPARE, exp.In: _COMPARE,
    exp.Between: _COMPARE, exp.Is: _COMPARE,
    exp.Case: Totality("CASE picks a branch; each branch is checked on its own"),
    exp.If: Totality("if picks a branch; each branch is checked on its own"),
    # patterns: a non-constant pattern is compiled per row and raises on an invalid one
    exp.Like: Totality("a constant LIKE pattern is checked once, before the charge", constant=("expression",)),
    exp.ILike: Totality("a constant LIKE pattern is checked once, before the charge", constant=("expression",)),
    exp.RegexpLike: Totality("a constant regular expression is compiled once, before the charge",
                             constant=("expression",)),
    # arithmetic
    exp.Add: _ARITH, exp.Sub: _ARITH, exp.Mul: _ARITH, exp.Neg: _ARITH, exp.Div: _DIV,
    exp.Interval: Totality("date arithmetic with a constant interval saturates, never raises", constant=("this",)),
    # math
    exp.Abs: _MATH, exp.Sqrt: _MATH, exp.Exp: _MATH, exp.Ln: _MATH, exp.Log: _MATH, exp.Sign: _MATH,
    exp.Pow: _MATH, exp.Floor: _MATH, exp.Ceil: _MATH,
    exp.Round: Totality("rounding places must be a constant (ClickHouse requires it)", constant=("decimals",)),
    exp.Least: _MATH, exp.Greatest: _MATH,
    # strings
    exp.Lower: _STRING, exp.Upper: _STRING, exp.Length: _STRING, exp.StartsWith: _STRING,
    exp.EndsWith: _STRING, exp.StrPosition: _STRING, exp.Substring: _STRING, exp.Concat: _STRING,
    exp.Trim: _STRING, exp.ArrayContains: Totality("membership test is total"),
    # dates
    exp.DayOfWeekIso: _DATE, exp.Year: _DATE, exp.Month: _DATE, exp.Day: _DATE,
    exp.DateTrunc: Totality("the truncation unit must be a constant", constant=("unit",)),
    exp.TimestampTrunc: Totality("the truncation unit must be a constant", constant=("unit",)),
    # NULLs
    exp.Coalesce: _NULL,
}

#: functions sqlglot parses as anonymous calls, by lower-case name
NAMED_RULES: dict[str, Totality] = {
    "lengthutf8": _STRING, "empty": _STRING, "notempty": _STRING, "positioncaseinsensitive": _STRING,
    "tostring": Totality("every value has a text form"),
    "tofloat64ornull": _PARSE, "toint64ornull": _PARSE, "todateornull": _PARSE,
    "toyear": _DATE, "tomonth": _DATE, "todayofmonth": _DATE, "tohour": _DATE,
    "tostartofweek": Totality("the week mode must be a constant", constant=(1,)),
    "isnull": _NULL, "isnotnull": _NULL,
    "multiif": Totality("multiIf picks a branch; each branch is checked on its own"),
    "todate": _TIME_CONSTANT, "todate32": _TIME_CONSTANT, "todatetime": _TIME_CONSTANT,
    "fromunixtimestamp64nano": _TIME_CONSTANT,
}

#: the registry's functions as an analyst types them (shell completion and the docs), plus intDiv,
#: which GROUP BY accepts as a bucket of a bounded column with a constant positive divisor
TYPED_NAMES = (
    "abs", "ceil", "coalesce", "concat", "dateTrunc", "day", "empty", "endsWith", "exp", "floor", "greatest",
    "has", "if", "ifNull", "intDiv", "isNotNull", "isNull", "least", "length", "lengthUTF8", "ln", "log",
    "log10", "log2", "lower", "match", "month", "multiIf", "notEmpty", "position", "positionCaseInsensitive",
    "pow", "power", "round", "sign", "sqrt", "startsWith", "substring", "toDateOrNull", "toDayOfMonth",
    "toDayOfWeek", "toFloat64OrNull", "toHour", "toInt64OrNull", "toMonth", "toStartOfWeek", "toString",
    "toYear", "trim", "upper", "year",
    # date and time constants, folded before the charge (dpch.sql.time_constants); with toStartOf…
    # also time-bucket keys of a column with date bounds (dpch.sql.time_buckets)
    "toDate", "toDate32", "toDateTime", "toDateTime64", "fromUnixTimestamp64Milli", "fromUnixTimestamp64Nano",
    "parseDateTimeBestEffort", "now", "today", "yesterday", "addDays", "toStartOfMonth", "toStartOfInterval",
    "toMonday",
)

#: lower-case names that only ever appear as interval units or date parts (rendered, never evaluated)
_UNIT_PARENTS = (exp.Interval, exp.DateTrunc, exp.TimestampTrunc)


def rule(node: exp.Expr) -> Totality | None:
    """The totality rule of ``node`` (None: not allowed in emitted SQL)."""
    found = NODE_RULES.get(type(node))
    if found is not None:
        return found
    if isinstance(node, exp.Anonymous):
        return NAMED_RULES.get(str(node.this).lower())
    if isinstance(node, exp.Var) and isinstance(node.parent, _UNIT_PARENTS):
        return _STRUCTURE
    return None


def display_name(node: exp.Expr) -> str:
    """How the analyst would write ``node``'s function or operator (never a sqlglot class name)."""
    if isinstance(node, exp.Anonymous):
        return f"{node.this}()"
    if isinstance(node, exp.Func):
        head = node.sql(dialect=DIALECT).split("(", 1)[0].strip()
        if head and " " not in head:
            return f"{head}()"
    words = {exp.Mod: "the % operator", exp.Window: "window functions (OVER)", exp.Cast: "CAST",
             exp.Escape: "LIKE … ESCAPE", exp.Select: "a subquery", exp.Subquery: "a subquery",
             exp.Star: "*", exp.Placeholder: "a query parameter", exp.Parameter: "a query parameter"}
    for cls, word in words.items():
        if isinstance(node, cls):
            return word
    return node.key.replace("_", " ").upper()


def _argument(node: exp.Expr, where: str | int) -> exp.Expr | None:
    if isinstance(where, int):
        items = node.expressions
        return items[where] if where < len(items) else None
    return node.args.get(where)


def is_constant(node: exp.Expr | None) -> bool:
    """A literal (string, number, NULL, or a signed number): the same value on every row."""
    if node is None:
        return True  # an omitted optional argument takes ClickHouse's constant default
    if isinstance(node, exp.Neg):
        return is_constant(node.this)
    if isinstance(node, exp.Paren):
        return is_constant(node.this)
    if isinstance(node, exp.Interval):
        return is_constant(node.this)
    return isinstance(node, exp.Literal | exp.Null | exp.Boolean | exp.Var)


def is_constant_argument(node: exp.Expr) -> bool:
    """Whether ``node`` (a literal, possibly signed or parenthesised) sits in an argument the registry
    lists as ``constant``: ClickHouse compiles such a value (a pattern, a unit, rounding places), so
    whether the query runs can depend on the value itself, not only on its type."""
    while isinstance(node.parent, exp.Neg | exp.Paren):
        node = node.parent
    parent = node.parent
    if parent is None:
        return False
    found = rule(parent)
    return found is not None and any(_argument(parent, arg) is node for arg in found.constant)


#: hints for refused constructs that have a total alternative
ALTERNATIVES = {
    "intdiv": "use '/' (it never fails on 0) and round/floor",
    "modulo": "the remainder by 0 raises; it is not available",
    "toint64": "use toInt64OrNull(...)", "tofloat64": "use toFloat64OrNull(...) or arithmetic",
    "cast": "use the …OrNull conversion functions, e.g. toInt64OrNull",
}


def check_total(node: exp.Expr, where: str = "") -> None:
    """Raises :class:`QueryRejected` unless ``node`` (one node, not its children) is in the registry
    and its constant arguments are literals."""
    found = rule(node)
    context = f"{where}: " if where else ""
    if found is None:
        name = display_name(node)
        key = (str(node.this).lower() if isinstance(node, exp.Anonymous) else
               "modulo" if isinstance(node, exp.Mod) else node.key.lower())
        raise QueryRejected(
            f"{context}{name} is not allowed in dpch queries",
            hint=ALTERNATIVES.get(key, "dpch allows only functions that cannot fail on a row's value: "
                                       "comparisons, arithmetic, common string, date and math functions "
                                       "(SELECT name FROM system.functions lists them)"),
        )
    for arg in found.constant:
        if not is_constant(_argument(node, arg)):
            raise QueryRejected(
                f"{context}{display_name(node)} needs a constant here, not an expression over the rows",
                hint=found.hint or "write the pattern, unit or number as a literal: an expression computed from "
                                   "a row could make the query fail depending on the data, which dpch refuses",
            )


__all__ = ["ALTERNATIVES", "NAMED_RULES", "NODE_RULES", "TYPED_NAMES", "Totality", "check_total", "display_name",
           "is_constant", "is_constant_argument", "rule"]

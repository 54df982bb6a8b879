"""The registry: every function and operator dpch lets into a query, one entry each.

docs/design.md rule 5: **a row may be garbage, never an error.** A row-level expression may give any
value for a row (the sensitivity bound covers one row's worst value), but an error changes the whole
query, which nothing bounds: ``WHERE match('x', if(id = 1234 AND income > 30000, '(', 'x'))`` fails
exactly when one person's income exceeds 30 000, and a scan over such failures reads the value for a
negligible ε. So nothing reaches ClickHouse unless it is listed here, and each entry says, for each
argument, why no row can make it raise:

- :attr:`Accepts.ANY` — *any value*: the boundary fuzzer (tests/soundness/test_boundaries.py) feeds
  the extremes of every type the argument accepts, chosen per row, through dpch's emitted form on real
  ClickHouse, and nothing raises. The argument's :class:`~dpch.sql.expression_types.Family` says which
  types it accepts: ClickHouse's own type of the argument (:mod:`.expression_types`) is checked before
  the charge, so ``toDayOfWeek(<string>)``, which parses the text and raises on a bad one, is refused;
- :attr:`Accepts.CONSTANT` — *constant only*: a literal (time zones, modes, units, patterns, places,
  escape characters). It is the same on every row, so ClickHouse accepts or refuses it before the
  charge (the probe, and for time zones an explicit check), whatever the data;
- :attr:`Accepts.GUARDED` — *guarded*: dpch emits a saturating guard (:mod:`.guards`) that keeps the
  argument where the function cannot raise.

An entry also holds the function's other roles: its interval rule inside an aggregate
(:mod:`.value_rules`), its use in post-processing (:mod:`.post_functions`), and where else it may
appear — as a link of a time bucket (:mod:`.time_buckets`) or as a date/time constant folded before
the charge (:mod:`.time_constants`). A function missing here is refused everywhere.

Entries are keyed by sqlglot node class (how sqlglot parses ClickHouse SQL) and, for functions sqlglot
leaves as anonymous calls, by lower-case name.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql import guards, post_functions, value_rules
from dpch.sql.expression_types import Family, describe_family, families, is_datetime64, unwrap
from dpch.sql.nodes import call, show
from dpch.sql.parse import DIALECT
from dpch.sql.post_functions import PostResolver
from dpch.sql.value_rules import ValueRule


class Accepts(enum.Enum):
    """What an argument may be, and why no row can make the function raise on it."""

    ANY = "any value"
    CONSTANT = "constant only"
    GUARDED = "guarded"


class Use(enum.Flag):
    """Where a function may appear."""

    ROW = enum.auto()  # conditions, values inside aggregates, expression keys, join conditions
    BUCKET = enum.auto()  # a link of a time bucket over a column with date bounds (GROUP BY)
    CONSTANT = enum.auto()  # a date or time constant, folded before the charge (every argument a literal)
    POST = enum.auto()  # post-processing of released values (result columns, HAVING, ORDER BY)


@dataclass(frozen=True)
class Arg:
    """One argument (or, with ``many``, every argument from ``at`` on) and what it accepts."""

    #: the argument in words (messages and the docs' table)
    what: str
    #: the sqlglot arg name, or the position among an anonymous call's arguments
    at: str | int
    accepts: Accepts = Accepts.ANY
    family: Family = Family.ANY
    #: ``at`` names a list (``expressions``), or a position from which every argument is this one
    many: bool = False
    #: a sensible value, as SQL (the boundary fuzzer fills the other arguments with these)
    sample: str = "1"
    #: a constant this argument must be, checked before the charge ("time zone")
    kind: str = ""


#: the ClickHouse type of one of the node's children (the analyst's tree, before any guard)
TypeOf = Callable[[exp.Expr], str]
#: a node's guard: the node with saturating guards around the arguments marked GUARDED
Guard = Callable[[exp.Expr, TypeOf], exp.Expr]


@dataclass(frozen=True)
class Function:
    """One function or operator: its arguments' rules and its roles."""

    #: how the analyst writes it
    name: str
    #: sqlglot node classes and lower-case names of anonymous calls this entry is for
    keys: tuple[type[exp.Expr] | str, ...]
    #: why it cannot raise on a row (the docs' table)
    why: str
    args: tuple[Arg, ...] = ()
    use: Use = Use.ROW
    #: the call with ``{0}``, ``{1}``… for its arguments, in :attr:`args` order (fuzzer, docs)
    template: str = ""
    #: the operands must share a family, except a string constant (comparisons: ClickHouse converts a
    #: non-constant operand to the other's type per row, which raises on overflow or bad text)
    same_family: bool = False
    guard: Guard | None = None
    value: ValueRule | None = None
    post: PostResolver | None = None
    #: what to write instead when an argument is refused
    hint: str = ""
    #: tells entries that share a key apart (an anonymous name with a different number of arguments)
    arity: tuple[int, int] | None = field(default=None)

    @property
    def row(self) -> bool:
        return Use.ROW in self.use


# -- argument shorthands --------------------------------------------------------------------------

N, INT, S, D, T = Family.NUMBER, Family.INTEGER, Family.STRING, Family.DATE, Family.TIME
ANY = Family.ANY
DATE_SAMPLE = "toDate('2021-03-04')"
TIME_SAMPLE = "toDateTime('2021-03-04 05:06:07')"


def _a(what: str, at: str | int, family: Family = ANY, sample: str = "1", **kw: object) -> Arg:
    return Arg(what, at, Accepts.ANY, family, sample=sample, **kw)  # type: ignore[arg-type]


def _c(what: str, at: str | int, sample: str, kind: str = "") -> Arg:
    return Arg(what, at, Accepts.CONSTANT, sample=sample, kind=kind)


def _g(what: str, at: str | int, family: Family, sample: str) -> Arg:
    return Arg(what, at, Accepts.GUARDED, family, sample=sample)


ZONE = "time zone"


# -- guards ---------------------------------------------------------------------------------------

def _substring_guard(node: exp.Expr, type_of: TypeOf) -> exp.Expr:
    copy = node.copy()
    for name in ("start", "length"):
        child = node.args.get(name)
        if child is not None:
            copy.set(name, guards.substring_argument(copy.args[name], type_of(child)))
    return copy


def _date_arithmetic_guard(node: exp.Expr, type_of: TypeOf) -> exp.Expr:
    """``x ± y`` whose result is a DateTime64 (a DateTime64 operand, or a date shifted by a sub-day
    interval): the date operand is clamped so that the result fits (:func:`guards.date_arithmetic`)."""
    result = type_of(node)
    if not is_datetime64(result):
        return node
    for side in ("this", "expression"):
        child = node.args[side]
        if not isinstance(child, exp.Interval) and Family.DATE in families(type_of(child)) \
                and unwrap(type_of(child)) != "Nothing":
            return guards.date_arithmetic(node, side, type_of(child), result)
    return node


# -- the entries ------------------------------------------------------------------------------------

_STRUCTURE = "structure: no computation"
_LOGIC = "boolean logic over UInt8 is total; another type is refused by ClickHouse before the charge"
_COMPARE = ("comparison never raises when both sides share a family of types (a string constant is converted "
            "once, before the charge); DateTime64 values are read within the range every scale holds")
_MATH = "Float64 math: out-of-domain arguments give NaN or ±inf, never an error"
_STRING = "total on every string, including empty, huge and invalid UTF-8"
_DATE = "calendar functions are total on dates and times (a string, which they would parse, is refused)"
_PARSE = "the …OrNull form returns NULL on a value that does not parse, never an error"
_TIME_CONSTANT = "a date or time constant, evaluated once before the charge"
_FOLDED = "a date or time constant: folded to its value before the charge, every argument a literal"
_BUCKET = "a time bucket over a column clamped into its declared date bounds; other arguments literals"
_TIME_HINT = ("compare the date or time column itself with a constant, e.g. visit_date >= toDate('2026-01-01'); "
              "a column that holds dates as text can be read with toDateOrNull(column)")

S1 = "'abcdef'"
#: conversions that are also links of a time bucket (over a column clamped into its date bounds)
_BUCKET_LINKS = ("toUInt32",)
_BUCKET_TOO = "; in a time bucket, of a column clamped into its declared date bounds"


def _comparison(cls: type[exp.Expr], symbol: str) -> Function:
    return Function(symbol, (cls,), _COMPARE, (_a("left side", "this"), _a("right side", "expression")),
                    template=f"{{0}} {symbol} {{1}}", same_family=True)


def _unary(name: str, cls: type[exp.Expr] | str, why: str, family: Family, sample: str,
           value: ValueRule | None = None, post: PostResolver | None = None, use: Use = Use.ROW) -> Function:
    at: str | int = 0 if isinstance(cls, str) else "this"
    return Function(name, (cls,), why, (_a("argument", at, family, sample),), use=use, template=f"{name}({{0}})",
                    value=value, post=post)


def _date_part(name: str, key: type[exp.Expr] | str, family: Family = D, zone: bool = True,
               use: Use = Use.ROW) -> Function:
    sample = TIME_SAMPLE if family == T else DATE_SAMPLE
    if isinstance(key, str):
        args = (_a("date", 0, family, sample),) + ((_c(ZONE, 1, "'UTC'", ZONE),) if zone else ())
        template = f"{name}({{0}}, {{1}})" if zone else f"{name}({{0}})"
    else:
        args, template = (_a("date", "this", family, sample),), f"{name}({{0}})"
    return Function(name, (key,), _DATE, args, template=template, use=use)


ENTRIES: tuple[Function, ...] = (
    # structure
    *(Function(c.__name__.lower(), (c,), _STRUCTURE) for c in (
        exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.DataType, exp.Var)),
    Function("tuple", (exp.Tuple,), _STRUCTURE, (_a("items", "expressions", many=True),), template="({0}, 1)"),
    Function("array", (exp.Array,), "an array literal", (_c("items", "expressions", "'a'"),), template="[{0}]"),
    Function("INTERVAL", (exp.Interval,), "an interval of constant length",
             (_c("length", "this", "1"),), template="INTERVAL {0} DAY"),
    # logic
    Function("AND", (exp.And,), _LOGIC, (_a("left side", "this", sample="1 = 1"),
                                         _a("right side", "expression", sample="1 = 1")), template="({0}) AND ({1})"),
    Function("OR", (exp.Or,), _LOGIC, (_a("left side", "this", sample="1 = 1"),
                                       _a("right side", "expression", sample="1 = 1")), template="({0}) OR ({1})"),
    Function("NOT", (exp.Not,), _LOGIC, (_a("argument", "this", sample="1 = 1"),), template="NOT ({0})"),
    Function("xor", (exp.Xor,), _LOGIC, (_a("left side", "this", sample="1 = 1"),
                                         _a("right side", "expression", sample="1 = 1")), template="xor({0}, {1})"),
    # comparison
    _comparison(exp.EQ, "="), _comparison(exp.NEQ, "!="), _comparison(exp.GT, ">"), _comparison(exp.GTE, ">="),
    _comparison(exp.LT, "<"), _comparison(exp.LTE, "<="), _comparison(exp.NullSafeEQ, "<=>"),
    Function("IS DISTINCT FROM", (exp.NullSafeNEQ,), _COMPARE,
             (_a("left side", "this"), _a("right side", "expression")), template="{0} IS DISTINCT FROM {1}",
             same_family=True),
    Function("IN", (exp.In,), _COMPARE, (_a("value", "this"), _a("list", "expressions", many=True)),
             template="{0} IN ({1}, 2)", same_family=True),
    Function("BETWEEN", (exp.Between,), _COMPARE, (_a("value", "this"), _a("lower end", "low"),
                                                   _a("upper end", "high", sample="2")),
             template="{0} BETWEEN {1} AND {2}", same_family=True),
    Function("IS NULL", (exp.Is,), "a NULL test is total", (_a("value", "this"), _c("NULL", "expression", "NULL")),
             template="{0} IS NULL"),
    Function("CASE", (exp.Case,), "CASE picks a branch; each branch is checked on its own",
             value=value_rules.case_branches),
    Function("if", (exp.If,), "if picks a branch; each branch is checked on its own",
             (_a("condition", "this", sample="1 = 1"), _a("then", "true"), _a("else", "false", sample="2")),
             template="if({0}, {1}, {2})", value=value_rules.if_branches),
    Function("multiIf", ("multiif",), "multiIf picks a branch; each branch is checked on its own",
             (_a("conditions and branches", 0, many=True, sample="1 = 1"),), template="multiIf({0}, 1, 2)",
             value=value_rules.multi_if),
    # patterns: a non-constant pattern is compiled per row and raises on an invalid one
    Function("LIKE", (exp.Like,), "a constant LIKE pattern is checked once, before the charge",
             (_a("string", "this", S, S1), _c("pattern", "expression", "'%b%'", "pattern")), template="{0} LIKE {1}"),
    Function("ILIKE", (exp.ILike,), "a constant LIKE pattern is checked once, before the charge",
             (_a("string", "this", S, S1), _c("pattern", "expression", "'%b%'", "pattern")), template="{0} ILIKE {1}"),
    Function("match", (exp.RegexpLike,), "a constant regular expression is compiled once, before the charge",
             (_a("string", "this", S, S1), _c("pattern", "expression", "'b.d'", "pattern")),
             template="match({0}, {1})"),
    # arithmetic
    Function("+", (exp.Add,), "+ wraps or gives ±inf and never raises; a DateTime64 result is kept in range "
             "(guarded); a string, which ClickHouse would parse as a date, is refused",
             (_g("left side", "this", N | D | Family.INTERVAL, "2"), _g("right side", "expression",
                                                                       N | D | Family.INTERVAL, "3")),
             template="{0} + {1}", guard=_date_arithmetic_guard, value=value_rules.arithmetic),
    Function("-", (exp.Sub,), "- wraps or gives ±inf and never raises; a DateTime64 result is kept in range "
             "(guarded); a string, which ClickHouse would parse as a date, is refused",
             (_g("left side", "this", N | D | Family.INTERVAL, "2"), _g("right side", "expression",
                                                                       N | D | Family.INTERVAL, "3")),
             template="{0} - {1}", guard=_date_arithmetic_guard, value=value_rules.arithmetic),
    Function("*", (exp.Mul,), "* wraps or gives ±inf on overflow and never raises; Decimal columns are read as "
             "Float64", (_a("left side", "this", N, "2"), _a("right side", "expression", N, "3")),
             template="{0} * {1}", value=value_rules.arithmetic),
    Function("/", (exp.Div,), "'/' returns Float64: x/0 is ±inf or NaN, never an error; Decimal columns are "
             "read as Float64", (_a("dividend", "this", N, "2"), _a("divisor", "expression", N, "3")),
             template="{0} / {1}", value=value_rules.divide),
    Function("-x", (exp.Neg,), "negation wraps and never raises", (_a("argument", "this", N, "2"),),
             template="-{0}", value=value_rules.negate),
    # math
    _unary("abs", exp.Abs, _MATH, N, "-2", value_rules.absolute, post_functions.ABS_RESOLVER, Use.ROW | Use.POST),
    _unary("sqrt", exp.Sqrt, _MATH, N, "2", value_rules.square_root, post_functions.SQRT_RESOLVER,
           Use.ROW | Use.POST),
    _unary("exp", exp.Exp, _MATH, N, "2", value_rules.exponential, post_functions.EXP_RESOLVER, Use.ROW | Use.POST),
    _unary("log", exp.Ln, _MATH, N, "2", value_rules.logarithm, post_functions.LN_RESOLVER, Use.ROW | Use.POST),
    Function("log2", (exp.Log,), _MATH, (_c("base", "this", "2"), _a("argument", "expression", N, "2")),
             template="log2({1})", value=value_rules.logarithm, post=post_functions.log_resolver,
             use=Use.ROW | Use.POST),
    _unary("sign", exp.Sign, _MATH, N, "-2", value_rules.sign, post_functions.SIGN_RESOLVER, Use.ROW | Use.POST),
    Function("pow", (exp.Pow,), _MATH, (_a("base", "this", N, "2"), _a("exponent", "expression", N, "3")),
             template="pow({0}, {1})", value=value_rules.power, post=post_functions.POW_RESOLVER,
             use=Use.ROW | Use.POST),
    *(Function(name, (cls,), "rounding places must be a constant (ClickHouse requires it)",
               (_a("argument", "this", N, "2.5"), _c("places", "decimals", "1")), template=f"{name}({{0}}, {{1}})",
               value=value_rules.rounding, post=resolver, use=Use.ROW | Use.POST)
      for name, cls, resolver in (("round", exp.Round, post_functions.ROUND_RESOLVER),
                                  ("floor", exp.Floor, post_functions.FLOOR_RESOLVER),
                                  ("ceil", exp.Ceil, post_functions.CEIL_RESOLVER))),
    Function("least", (exp.Least,), "picks one of its arguments; they share a family of types",
             (_a("first", "this", sample="2"), _a("others", "expressions", many=True, sample="3")),
             template="least({0}, {1})", same_family=True, value=value_rules.extreme),
    Function("greatest", (exp.Greatest,), "picks one of its arguments; they share a family of types",
             (_a("first", "this", sample="2"), _a("others", "expressions", many=True, sample="3")),
             template="greatest({0}, {1})", same_family=True, value=value_rules.extreme),
    # post-processing only: on a row they would raise (a cast of text or of NaN) or are not needed
    Function("cbrt", (exp.Cbrt,), "post-processing of released values only", use=Use.POST,
             post=post_functions.CBRT_RESOLVER),
    Function("trunc", (exp.Trunc,), "post-processing of released values only", use=Use.POST,
             post=post_functions.TRUNC_RESOLVER),
    Function("CAST", (exp.Cast,), "post-processing of released values only (on a row a cast raises on text "
             "and on NaN; use the …OrNull conversions)", use=Use.POST, post=post_functions.cast_resolver,
             hint="use the …OrNull conversion functions, e.g. toInt64OrNull"),
    *(Function(name, (name.lower(),), "post-processing of released values only (on a row a conversion raises on "
               "text and on NaN; use the …OrNull conversions)" + (_BUCKET_TOO if name in _BUCKET_LINKS else ""),
               use=Use.POST | (Use.BUCKET if name in _BUCKET_LINKS else Use.POST),
               post=post_functions.named_resolver(name), hint="use the …OrNull conversion functions or arithmetic")
      for name in post_functions.NAMED),
    # strings
    _unary("lower", exp.Lower, _STRING, S, S1), _unary("upper", exp.Upper, _STRING, S, S1),
    _unary("length", exp.Length, _STRING, S | Family.OTHER, S1),
    _unary("lengthUTF8", "lengthutf8", _STRING, S, S1), _unary("empty", "empty", _STRING, S | Family.OTHER, S1),
    _unary("notEmpty", "notempty", _STRING, S | Family.OTHER, S1),
    Function("startsWith", (exp.StartsWith,), _STRING, (_a("string", "this", S, S1),
                                                        _a("prefix", "expression", S, "'ab'")),
             template="startsWith({0}, {1})"),
    Function("endsWith", (exp.EndsWith,), _STRING, (_a("string", "this", S, S1), _a("suffix", "expression", S, "'ef'")),
             template="endsWith({0}, {1})"),
    Function("position", (exp.StrPosition,), _STRING,
             (_a("string", "this", S, S1), _a("needle", "substr", S, "'c'"), _a("start", "position", INT, "1")),
             template="position({0}, {1}, {2})"),
    Function("positionCaseInsensitive", ("positioncaseinsensitive",), _STRING,
             (_a("string", 0, S, S1), _a("needle", 1, S, "'C'"), _a("start", 2, INT, "1")),
             template="positionCaseInsensitive({0}, {1}, {2})"),
    Function("substring", (exp.Substring,), "total on every string; the offset and length are clamped to ±2^62 "
             "(substring raises at Int64's minimum)",
             (_a("string", "this", S, S1), _g("offset", "start", INT, "2"), _g("length", "length", INT, "3")),
             template="substring({0}, {1}, {2})", guard=_substring_guard),
    Function("concat", (exp.Concat,), "every value has a text form", (_a("parts", "expressions", many=True,
                                                                          sample="'x'"),),
             template="concat({0}, 'x')"),
    Function("trim", (exp.Trim,), _STRING, (_a("string", "this", S, "' ab '"), _c("characters", "expression", "'x'")),
             template="trim(BOTH {1} FROM {0})"),
    Function("has", (exp.ArrayContains,), "membership in a constant array",
             (_c("array", "this", "['a', 'b']"), _a("value", "expression", sample="'a'")), template="has({0}, {1})"),
    # dates
    # sqlglot reads toDayOfWeek(d) as its own node and toDayOfWeek(d, mode, zone) as a call by name
    Function("toDayOfWeek", (exp.DayOfWeekIso,), _DATE, (_a("date", "this", D, DATE_SAMPLE),),
             template="toDayOfWeek({0})"),
    Function("toDayOfWeek", ("todayofweek",), _DATE,
             (_a("date", 0, D, DATE_SAMPLE), _c("mode", 1, "0", "mode"), _c(ZONE, 2, "'UTC'", ZONE)),
             template="toDayOfWeek({0}, {1}, {2})"),
    _date_part("year", exp.Year), _date_part("month", exp.Month), _date_part("day", exp.Day),
    _date_part("toYear", "toyear", use=Use.ROW | Use.BUCKET),
    _date_part("toMonth", "tomonth", use=Use.ROW | Use.BUCKET),
    _date_part("toDayOfMonth", "todayofmonth"),
    _date_part("toHour", "tohour", T),
    Function("toStartOfWeek", ("tostartofweek",), "the week mode must be a constant",
             (_a("date", 0, D, DATE_SAMPLE), _c("mode", 1, "1", "mode"), _c(ZONE, 2, "'UTC'", ZONE)),
             template="toStartOfWeek({0}, {1}, {2})", use=Use.ROW | Use.BUCKET | Use.CONSTANT),
    Function("dateTrunc", (exp.DateTrunc,), "the truncation unit and time zone must be constants",
             (_c("unit", "unit", "'month'", "unit"), _a("date", "this", D, DATE_SAMPLE),
              _c(ZONE, "zone", "'UTC'", ZONE)),
             template="dateTrunc({0}, {1}, {2})", use=Use.ROW | Use.BUCKET | Use.CONSTANT),
    Function("toStartOfDay", (exp.TimestampTrunc,), "the truncation unit and time zone must be constants "
             "(toStartOfDay, …Hour, …Month, …Quarter, …Year, toMonday)",
             (_a("date", "this", D, TIME_SAMPLE), _c("unit", "unit", "DAY", "unit"), _c(ZONE, "zone", "'UTC'", ZONE)),
             template="toStartOfDay({0}, {2})", use=Use.ROW | Use.BUCKET | Use.CONSTANT),
    # NULLs
    Function("coalesce", (exp.Coalesce,), "NULL replacement is total; the arguments share a family of types",
             (_a("first", "this", sample="1"), _a("others", "expressions", many=True, sample="2")),
             template="coalesce({0}, {1})", same_family=True, value=value_rules.coalesce),
    _unary("isNull", "isnull", "a NULL test is total", ANY, "1"),
    _unary("isNotNull", "isnotnull", "a NULL test is total", ANY, "1"),
    # conversions that cannot raise
    _unary("toFloat64OrNull", "tofloat64ornull", _PARSE, S, "'1.5'"),
    _unary("toInt64OrNull", "toint64ornull", _PARSE, S, "'15'"),
    _unary("toDateOrNull", "todateornull", _PARSE, S | D, "'2021-03-04'"),
    Function("toString", ("tostring",), "every value has a text form; the time zone must be a constant",
             (_a("value", 0, sample="1"), _c(ZONE, 1, "'UTC'", ZONE)), template="toString({0}, {1})",
             use=Use.ROW | Use.POST, post=post_functions.to_string_resolver),
    # date and time constants, in the exact forms dpch.sql.time_constants folds every constant into
    *(Function(name, (name.lower(),), _TIME_CONSTANT, (_c("value", 0, sample), _c(ZONE, 1, "'UTC'", ZONE)),
               template=f"{name}({{0}}, {{1}})", use=Use.ROW | Use.BUCKET | Use.CONSTANT, hint=_TIME_HINT)
      for name, sample in (("toDate", "'2021-03-04'"), ("toDate32", "'2021-03-04'"), ("toDateTime", "1614834367"))),
    Function("fromUnixTimestamp64Nano", ("fromunixtimestamp64nano",), _TIME_CONSTANT,
             (_c("nanoseconds", 0, "1614834367000000000"),), template="fromUnixTimestamp64Nano({0})",
             use=Use.ROW | Use.CONSTANT, hint=_TIME_HINT),
)


def _entry(name: str, use: Use, why: str) -> Function:
    return Function(name, (name.lower(),), why, use=use, hint=_TIME_HINT)


#: functions that only build time buckets (over a column clamped into its date bounds) or date constants
#: (folded before the charge): refused on a row
BUCKET_OR_CONSTANT: tuple[Function, ...] = (
    *(_entry(n, Use.BUCKET | Use.CONSTANT, _BUCKET) for n in (
        "toStartOfInterval", "toLastDayOfMonth", "toStartOfFiveMinutes", "toStartOfTenMinutes",
        "toStartOfFifteenMinutes", "toDateTime64")),
    *(_entry(n, Use.BUCKET, _BUCKET) for n in (
        "toUnixTimestamp", "toYYYYMM", "toYYYYMMDD", "toStartOfISOYear")),
    Function("intDiv", ("intdiv",), "GROUP BY only: a bucket of a bounded integer column, or of a time column's "
             "seconds, by a constant positive divisor (on a row it raises on 0: use '/' and floor)",
             use=Use.BUCKET, hint="use '/' (it never fails on 0) and round/floor"),
    *(_entry(n, Use.CONSTANT, _FOLDED) for n in (
        "fromUnixTimestamp", "fromUnixTimestamp64Second", "fromUnixTimestamp64Milli", "fromUnixTimestamp64Micro",
        "parseDateTimeBestEffort", "parseDateTimeBestEffortUS", "parseDateTime64BestEffort",
        "parseDateTime64BestEffortUS", "parseDateTime", "parseDateTimeInJodaSyntax", "now", "now64", "today",
        "yesterday", "addDays", "addHours", "addMinutes", "addSeconds", "addMilliseconds", "addWeeks", "addMonths",
        "addQuarters", "addYears", "subtractDays", "subtractHours", "subtractMinutes", "subtractSeconds",
        "subtractMilliseconds", "subtractWeeks", "subtractMonths", "subtractQuarters", "subtractYears")),
    *(Function(name, (cls,), _FOLDED, use=Use.CONSTANT, hint=_TIME_HINT)
      for name, cls in (("CURRENT_TIMESTAMP", exp.CurrentTimestamp), ("CURRENT_DATE", exp.CurrentDate))),
)

REGISTRY: tuple[Function, ...] = ENTRIES + BUCKET_OR_CONSTANT

_BY_KEY: dict[type[exp.Expr] | str, Function] = {}
for _fn in REGISTRY:
    for _key in _fn.keys:
        _BY_KEY.setdefault(_key, _fn)  # the first entry of a key is its row rule (toStartOfDay: TimestampTrunc)

#: lower-case names that only ever appear as interval units or date parts (rendered, never evaluated)
_UNIT_PARENTS = (exp.Interval, exp.DateTrunc, exp.TimestampTrunc)


def lookup(node: exp.Expr) -> Function | None:
    """The registry's entry for ``node`` (None: not a function dpch knows)."""
    if isinstance(node, exp.Anonymous):
        return _BY_KEY.get(str(node.this).lower())
    return _BY_KEY.get(type(node))


def rule(node: exp.Expr, use: Use = Use.ROW) -> Function | None:
    """The entry for ``node`` if it may appear in ``use`` (None: not there)."""
    if isinstance(node, exp.Var) and not isinstance(node.parent, _UNIT_PARENTS) and use == Use.ROW:
        return None  # a bare word is a unit or date part only under an interval or a truncation
    found = lookup(node)
    return found if found is not None and use in found.use else None


def arguments(node: exp.Expr, entry: Function) -> Iterator[tuple[Arg, exp.Expr]]:
    """Each argument of ``node`` present in the call, with its rule."""
    for arg in entry.args:
        if isinstance(arg.at, int):
            items = list(node.expressions)
            chosen = items[arg.at:] if arg.many else items[arg.at:arg.at + 1]
        else:
            value = node.args.get(arg.at)
            chosen = list(value) if isinstance(value, list) else ([] if value is None else [value])
        for child in chosen:
            if isinstance(child, exp.Expr):
                yield arg, child


def display_name(node: exp.Expr) -> str:
    """How the analyst would write ``node``'s function or operator (never a sqlglot class name)."""
    if isinstance(node, exp.Anonymous):
        return f"{node.this}()"
    entry = lookup(node)
    if isinstance(node, exp.TimestampTrunc):  # toStartOfDay, toStartOfMonth, … toMonday: as rendered
        return f"{node.sql(dialect=DIALECT).split('(', 1)[0]}()"
    if entry is not None and entry.template:
        return f"{entry.name}()" if entry.name[:1].isalpha() and not entry.name.isupper() else entry.name
    words = {exp.Mod: "the % operator", exp.Window: "window functions (OVER)", exp.Cast: "CAST",
             exp.Escape: "LIKE … ESCAPE", exp.Select: "a subquery", exp.Subquery: "a subquery",
             exp.Star: "*", exp.Placeholder: "a query parameter", exp.Parameter: "a query parameter",
             exp.Bracket: "an array subscript [ ]"}
    for cls, word in words.items():
        if isinstance(node, cls):
            return word
    if isinstance(node, exp.Func):
        head = node.sql(dialect=DIALECT).split("(", 1)[0].strip()
        if head and " " not in head:
            return f"{head}()"
    return node.key.replace("_", " ").upper()


def is_constant(node: exp.Expr | None) -> bool:
    """A literal (string, number, NULL, or a signed number): the same value on every row."""
    if node is None:
        return True  # an omitted optional argument takes ClickHouse's constant default
    if isinstance(node, exp.Neg | exp.Paren):
        return is_constant(node.this)
    if isinstance(node, exp.Interval):
        return is_constant(node.this)
    if isinstance(node, exp.Array | exp.Tuple):
        return all(is_constant(e) for e in node.expressions)
    return isinstance(node, exp.Literal | exp.Null | exp.Boolean | exp.Var)


def is_constant_argument(node: exp.Expr) -> bool:
    """Whether ``node`` (a literal, possibly signed or parenthesised) sits in an argument the registry
    lists as constant: ClickHouse compiles such a value (a pattern, a unit, rounding places), so whether
    the query runs can depend on the value itself, not only on its type."""
    while isinstance(node.parent, exp.Neg | exp.Paren | exp.Array | exp.Tuple):
        node = node.parent
    parent = node.parent
    if parent is None:
        return False
    entry = lookup(parent)
    if entry is None:
        return False
    return any(arg.accepts is Accepts.CONSTANT and child is node for arg, child in arguments(parent, entry))


#: hints for refused constructs that have a total alternative
ALTERNATIVES = {
    "intdiv": "use '/' (it never fails on 0) and round/floor",
    "modulo": "the remainder by 0 raises; it is not available",
    "toint64": "use toInt64OrNull(...)", "tofloat64": "use toFloat64OrNull(...) or arithmetic",
    "cast": "use the …OrNull conversion functions, e.g. toInt64OrNull",
}


def check_total(node: exp.Expr, where: str = "") -> None:
    """Raises :class:`QueryRejected` unless ``node`` (one node, not its children) may appear on a row
    and its constant-only arguments are literals."""
    found = rule(node)
    context = f"{where}: " if where else ""
    if found is None:
        name = display_name(node)
        key = (str(node.this).lower() if isinstance(node, exp.Anonymous) else
               "modulo" if isinstance(node, exp.Mod) else node.key.lower())
        entry = lookup(node)
        hint = ALTERNATIVES.get(key) or (entry.hint if entry is not None and entry.hint else
                                         "dpch allows only functions that cannot fail on a row's value: "
                                         "comparisons, arithmetic, common string, date and math functions "
                                         "(SELECT name, arguments FROM system.functions lists them)")
        where_words = " on a row" if entry is not None and entry.use != Use.ROW else ""
        raise QueryRejected(f"{context}{name} is not allowed{where_words} in dpch queries", hint=hint)
    for arg, child in arguments(node, found):
        if arg.accepts is Accepts.CONSTANT and not is_constant(child):
            raise QueryRejected(
                f"{context}{display_name(node)} needs a constant {arg.what} here, not an expression over the rows",
                hint=found.hint or "write the pattern, unit, time zone or number as a literal: an expression "
                                   "computed from a row could make the query fail depending on the data, "
                                   "which dpch refuses",
            )


def check_families(node: exp.Expr, type_of: TypeOf, where: str = "") -> None:
    """Raises :class:`QueryRejected` when an argument of ``node`` has a type its rule does not accept
    (ClickHouse's own type, :mod:`.expression_types`), or the operands of a comparison do not share a
    family."""
    entry = rule(node)
    if entry is None:
        return
    context = f"{where}: " if where else ""
    checked = [(arg, child) for arg, child in arguments(node, entry) if arg.accepts is not Accepts.CONSTANT]
    for arg, child in checked:
        if arg.family == Family.ANY:
            continue
        type_ = type_of(child)
        if not families(type_) & arg.family:
            raise QueryRejected(
                f"{context}{show(node)}: the {arg.what} of {display_name(node)} must be "
                f"{describe_family(arg.family)}, not {unwrap(type_)}", hint=_family_hint(entry, arg, type_))
    if entry.same_family:
        _check_same_family(node, [child for _, child in checked], type_of, context)


def _check_same_family(node: exp.Expr, operands: list[exp.Expr], type_of: TypeOf, context: str) -> None:
    typed = [(child, type_of(child)) for child in operands]
    for child, type_ in typed:
        if _string_constant(child):
            continue  # ClickHouse converts a constant string to the other side's type once, before the charge
        for other, other_type in typed:
            if other is child or _string_constant(other):
                continue
            if not families(type_) & families(other_type) & ~Family.INTEGER:
                raise QueryRejected(
                    f"{context}{show(node)} compares {unwrap(type_)} with {unwrap(other_type)}",
                    hint="compare values of one kind (numbers with numbers, strings with strings, dates with "
                         "dates); convert text with toDateOrNull / toInt64OrNull / toFloat64OrNull, and a "
                         "number of seconds with toDateTime(<number>) as a constant")


def _string_constant(node: exp.Expr) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal) and node.is_string


def _family_hint(entry: Function, arg: Arg, type_: str) -> str:
    if Family.STRING in families(type_) and arg.family & Family.DATE:
        return "it would parse the text as a date and fail on a row that is not one: read it with toDateOrNull(…)"
    if Family.STRING in families(type_) and arg.family & Family.NUMBER:
        return "convert the text with toInt64OrNull(…) or toFloat64OrNull(…)"
    return entry.hint or f"give {entry.name} {describe_family(arg.family)}"


def constant_kinds(node: exp.Expr) -> Iterator[tuple[str, exp.Expr]]:
    """The constant arguments of ``node`` that dpch checks by kind before the charge (time zones)."""
    entry = lookup(node)
    if entry is None:
        return
    for arg, child in arguments(node, entry):
        if arg.accepts is Accepts.CONSTANT and arg.kind:
            yield arg.kind, child


def value_rule(node: exp.Expr) -> ValueRule | None:
    """The interval rule of ``node`` inside an aggregate (None: not a value function)."""
    found = rule(node)
    return found.value if found is not None else None


def post_function(node: exp.Expr) -> tuple[post_functions.PostFunction, list[exp.Expr]] | None:
    """The post-processing function ``node`` calls and its arguments (None: not such a function)."""
    entry = lookup(node)
    if entry is None or entry.post is None or Use.POST not in entry.use:
        return None
    if isinstance(node, exp.Anonymous) and str(node.this) != entry.name:
        return None  # ClickHouse's conversions are case-sensitive: toint64 is not a function there
    return entry.post(node)


def result_type(node: exp.Expr) -> str | None:
    """The ClickHouse type of a result column that is a conversion (``CAST(avg(x) AS Int64)``,
    ``toFloat32(…)``), for a client's column types; None for anything else."""
    while isinstance(node, exp.Paren):
        node = node.this
    resolved = post_function(node)
    return post_functions.result_type_of(resolved[0]) if resolved is not None else None


def post_names() -> list[str]:
    """The functions post-processing takes, as the analyst writes them (for hints)."""
    names = {e.name for e in REGISTRY if Use.POST in e.use and e.post is not None} | {"log2", "log10"}
    return sorted(names, key=str.lower)


def allowed_in(node: exp.Expr, use: Use) -> bool:
    """Whether ``node``'s function may appear in ``use`` (time buckets, constants)."""
    return rule(node, use) is not None


def _typed_names() -> tuple[str, ...]:
    names = [e.name for e in REGISTRY if e.name[:1].isalpha() and e.use & (Use.ROW | Use.BUCKET | Use.CONSTANT)
             and not e.name.isupper() and e.keys[0] not in (exp.Column, exp.Identifier, exp.Literal, exp.Boolean,
                                                            exp.Null, exp.Paren, exp.DataType, exp.Var, exp.Tuple,
                                                            exp.Array)]
    extra = ("ifNull", "power", "log10", "substr", "ln", "toStartOfHour", "toStartOfMonth", "toStartOfQuarter",
             "toStartOfYear", "toStartOfMinute", "toStartOfSecond")
    return tuple(sorted(set(names) | set(extra), key=str.lower))


#: the registry's functions as an analyst types them (shell completion, system.functions, the docs)
TYPED_NAMES = _typed_names()


def arguments_text(entry: Function) -> str:
    """What each argument of ``entry`` accepts, in words: ``string: any string; offset: a whole number
    (guarded); time zone: constant only``."""
    parts = []
    for arg in entry.args:
        if arg.accepts is Accepts.CONSTANT:
            parts.append(f"{arg.what}: constant only")
            continue
        kind = describe_family(arg.family)
        parts.append(f"{arg.what}: {kind}" + (" (guarded)" if arg.accepts is Accepts.GUARDED else ""))
    return "; ".join(parts) + (" — the operands of one kind" if entry.same_family else "")


def uses_text(entry: Function) -> str:
    """Where ``entry`` may appear, in words."""
    words = {Use.ROW: "rows", Use.BUCKET: "time buckets", Use.CONSTANT: "date/time constants",
             Use.POST: "post-processing"}
    found = [w for u, w in words.items() if u in entry.use]
    if entry.value is not None:
        found.insert(1, "inside aggregates")
    return ", ".join(found)


def listing() -> list[tuple[str, str, str, str]]:
    """The registry as rows (name, where it may appear, what each argument accepts, why no row can make
    it raise): ``dpch functions`` and the gateway's ``system.functions``."""
    skip = (exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.DataType, exp.Var)
    return [(e.name, uses_text(e), arguments_text(e), e.why) for e in REGISTRY if e.keys[0] not in skip]


def entry_named(name: str) -> Function | None:
    """The entry of a function as the analyst writes it (``ifNull`` → coalesce, ``toStartOfHour`` → the
    truncation entry), built as the parser builds a call to it."""
    try:
        node = call(name, exp.Literal.number(1), exp.Literal.number(1))
    except (TypeError, ValueError):
        return None
    return lookup(node)


def counts() -> dict[str, int]:
    """Arguments by category over the row functions (the docs' table): any value, constant only, guarded;
    and the functions allowed only as time buckets, constants or in post-processing."""
    found = {a.value: 0 for a in Accepts}
    for entry in ENTRIES:
        if entry.row:
            for arg in entry.args:
                found[arg.accepts.value] += 1
    found["functions on a row"] = sum(1 for e in ENTRIES if e.row and e.args)
    found["not on a row (buckets, constants, post-processing)"] = sum(1 for e in REGISTRY if not e.row)
    return found


__all__ = ["ALTERNATIVES", "Accepts", "Arg", "ENTRIES", "Function", "Guard", "REGISTRY", "TYPED_NAMES", "TypeOf",
           "Use", "ZONE", "allowed_in", "arguments", "arguments_text", "check_families", "check_total",
           "constant_kinds", "counts", "display_name", "entry_named", "is_constant", "is_constant_argument",
           "listing", "lookup", "post_function", "post_names", "result_type", "rule", "uses_text", "value_rule"]

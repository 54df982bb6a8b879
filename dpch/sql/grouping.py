"""GROUP BY: which keys a query may release, and where their domain comes from.

A key's domain must not be learned from the private data, or the mere presence of a key
would reveal someone. dpch accepts four kinds of key:

- a public column with declared ``values``: exactly those keys are released (empty ones with
  a noisy 0);
- a bucket of a *bounded* column, whose domain follows from the bounds: the integer column
  itself (``GROUP BY age`` with bounds [18, 90] releases 18…90), ``intDiv(col, n)``, and
  ``toYear``/``toMonth``/``toStartOfMonth``/``toStartOfYear``/``toStartOfQuarter``/
  ``toDate`` of a date column with date bounds; values are clamped into the bounds first;
- a column of a joined public table: its domain is that table's distinct values (public data);
- anything else (a private column, an expression): released only through *partition
  selection* — a key appears only if its noisy count of distinct units clears a threshold
  calibrated to δ (:mod:`dpch.session`), with each unit limited to G keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.policy.model import base_type
from dpch.sql.bounds import ColumnRef, check_condition, check_zone, clamp, condition, function_name
from dpch.sql.expression_types import ExpressionTypes
from dpch.sql.functions import ZONE, constant_kinds
from dpch.sql.nodes import call, literal_node, number, show
from dpch.sql.parse import DIALECT
from dpch.sql.relation import Relation, SourceColumn
from dpch.sql.time_buckets import TimeRange, bucket_column, bucket_domain
from dpch.sql.time_constants import ConstantQuery
from dpch.sql.where_lists import Listed

#: the largest domain a GROUP BY may release (product of the keys' domains)
MAX_GROUPS = 100_000

PublicDomain = Callable[[str, str], tuple[Any, ...]]


@dataclass(frozen=True)
class GroupKey:
    """One GROUP BY key: its tree over the capped rows, and its domain (None: partition selection)."""

    label: str
    node: exp.Expr
    values: tuple[Any, ...] | None
    origin: str
    #: the condition keeping the declared domain's rows, over the source rows
    inner_filter: exp.Expr | None = None
    #: the ClickHouse type of the released key
    type: str = "String"

    @property
    def sql(self) -> str:
        """The key as dpch displays it."""
        return show(self.node)


class KeyBuilder:
    def __init__(self, relation: Relation, outer: Callable[[SourceColumn], exp.Expr],
                 public_domain: PublicDomain, constants: ConstantQuery | None = None,
                 ranges: dict[str, TimeRange] | None = None, types: ExpressionTypes | None = None,
                 lists: dict[str, tuple[Listed, ...]] | None = None) -> None:
        self.relation = relation
        self.outer = outer
        self.public_domain = public_domain
        #: evaluates time-bucket domains in ClickHouse (no table read); None: only the Python-listed forms
        self.constants = constants
        #: the constant limits WHERE puts on each column (by :attr:`SourceColumn.base_sql`)
        self.ranges = ranges or {}
        #: ClickHouse's types of expression keys (the registry's rules are checked against them)
        self.types = types
        #: the constant values WHERE limits each column to (:mod:`dpch.sql.where_lists`, by base_sql)
        self.lists = lists or {}

    def key(self, expr: exp.Expr) -> GroupKey:
        label = expr.sql(DIALECT)
        timed = self._time_key(expr, label)
        if timed is not None:
            return timed
        if isinstance(expr, exp.Column):
            return self._column_key(self.relation.resolve(expr), label)
        name = function_name(expr)
        if name == "intdiv":
            return self._intdiv(expr, label)
        date_unit = _date_bucket(expr, name)
        column = _bucket_argument(expr) if date_unit is not None else None
        if date_unit is not None and isinstance(column, exp.Column):
            source = self.relation.resolve(column)
            if source.date_bounds is not None:
                return self._date_key(source, date_unit, label)
        check_condition(expr, lambda c: self.relation.resolve(c).ref(exp.null()), self.types)
        # an expression key is released as text (its values come from the data, through selection)
        return GroupKey(label, call("toString", condition(expr, self._outer_ref, self.types)), None,
                        "partition selection")

    def _time_key(self, expr: exp.Expr, label: str) -> GroupKey | None:
        """A time bucket (:mod:`dpch.sql.time_buckets`) whose domain ClickHouse lists from the bounds and
        the WHERE range; None for other keys, and for the date keys listed in Python below when WHERE
        does not limit their column."""
        chain = bucket_column(expr)
        if chain is None:
            return None
        column = chain.column
        source = self.relation.resolve(column)
        if not base_type(source.type).startswith("Date"):
            return None  # a number or a string: the other key forms below
        for link in chain.links:  # a zone ClickHouse does not know is refused in words, before the charge
            for kind, constant in constant_kinds(link):
                if kind == ZONE and isinstance(constant, exp.Literal) and constant.is_string and self.types:
                    check_zone(constant.this, self.types)
        if source.date_bounds is None:  # partition selection, where the registry allows the expression
            try:
                check_condition(expr, lambda c: self.relation.resolve(c).ref(exp.null()), self.types)
            except QueryRejected:
                raise QueryRejected(f"GROUP BY {label}: this time bucket needs declared date bounds on "
                                    f"{column.name}", hint="ask the data owner to declare them, e.g. "
                                    "bounds=[\"2026-01-01\", \"2026-12-31\"]") from None
            return None
        limits = self.ranges.get(source.base_sql, TimeRange())
        listed_here = isinstance(expr, exp.Column) or (_date_bucket(expr, function_name(expr)) is not None
                                                        and isinstance(_bucket_argument(expr), exp.Column))
        if self.constants is None or (listed_here and not limits.lower and not limits.upper):
            if listed_here:
                return None
            raise QueryRejected(f"GROUP BY {label}: time buckets need the database to list their values")
        domain = bucket_domain(expr, chain, self.outer(source), source.type, source.date_bounds, limits,
                               self.constants, MAX_GROUPS)
        origin = "bounds and WHERE range" if limits.lower or limits.upper else "bounds"
        return GroupKey(label, domain.node, domain.values, origin, type=domain.type)

    def _outer_ref(self, col: exp.Column) -> ColumnRef:
        source = self.relation.resolve(col)
        return source.ref(self.outer(source))

    def _column_key(self, source: SourceColumn, label: str) -> GroupKey:
        node = self.outer(source)
        if source.is_unit:
            raise QueryRejected(f"GROUP BY {source.name}: grouping by the privacy unit releases one group per person",
                                hint="count distinct units instead: count(DISTINCT unit)")
        listed = self._listed(source)
        if source.public and source.values is not None:
            domain = _with_unmatched(source, self._narrowed(tuple(source.values), listed, label), label)
            return GroupKey(label, node, domain, "declared values", inner_filter=_within(source, domain),
                            type=source.type)
        if source.public_table is not None:
            domain = self.public_domain(source.public_table, source.name)
            if not domain:
                raise QueryRejected(f"GROUP BY {label}: the public table has no values in this column")
            domain = _with_unmatched(source, self._narrowed(tuple(domain), listed, label), label)
            return GroupKey(label, node, tuple(domain), f"public table {source.public_table}",
                            inner_filter=_within(source, domain), type=source.type)
        if source.bounds is not None and source.integer:
            lo, hi = int(source.bounds.lo), int(source.bounds.hi)
            if listed is not None:  # the listed values within the bounds: the clamp leaves them as they are
                domain = self._narrowed(tuple(v for v in listed if isinstance(v, int) and lo <= v <= hi), listed, label)
                return GroupKey(label, clamp(node, source.bounds), domain, "bounds and WHERE list",
                                type=base_type(source.type))
            _check_size(hi - lo + 1, label)
            return GroupKey(label, clamp(node, source.bounds), tuple(range(lo, hi + 1)), "bounds",
                            type=base_type(source.type))
        if source.date_bounds is not None and base_type(source.type) in ("Date", "Date32"):
            return self._date_key(source, "day", label)
        if listed is not None and not source.unmatched_default:
            # no public domain, but the query names the only values it keeps: they are the domain, and
            # the rows of any other value (NULL too) are filtered out here as by the WHERE
            return GroupKey(label, node, listed, "WHERE list", inner_filter=_within(source, listed),
                            type=source.type)
        return GroupKey(label, node, None, "partition selection", type=source.type)

    def _listed(self, source: SourceColumn) -> tuple[Listed, ...] | None:
        """The values WHERE limits ``source`` to, of the kind its type shows as written (strings of a String
        column, integers of an integer one); None when WHERE lists none of them."""
        listed = self.lists.get(source.base_sql)
        if listed is None:
            return None
        kind = base_type(source.type)
        if kind == "String":
            wanted: type = str
        elif kind.startswith(("Int", "UInt")):
            wanted = int
        else:
            return None  # a float, a date, …: ClickHouse would show the value converted, not as written
        return listed if all(type(v) is wanted for v in listed) else None

    @staticmethod
    def _narrowed(domain: tuple[Any, ...], listed: tuple[Listed, ...] | None, label: str) -> tuple[Any, ...]:
        """``domain``'s values that WHERE lists (all of them when it lists none), in the domain's order."""
        if listed is None:
            return domain
        kept = tuple(v for v in domain if v in listed)
        if not kept:
            raise QueryRejected(f"GROUP BY {label}: WHERE keeps none of the key's public values, so there is no "
                                "group to release", hint="list values of its domain (dpch tables shows them)")
        return kept

    def _intdiv(self, expr: exp.Expr, label: str) -> GroupKey:
        args = list(expr.expressions)
        if len(args) != 2 or not isinstance(args[0], exp.Column) or not (
                isinstance(args[1], exp.Literal) and not args[1].is_string and args[1].this.isdigit()
                and int(args[1].this) > 0):
            raise QueryRejected(f"GROUP BY {label}: write intDiv(column, positive whole number)")
        source = self.relation.resolve(args[0])
        step = int(args[1].this)
        if source.bounds is None or not source.integer or source.bounds.lo < 0:
            raise QueryRejected(f"GROUP BY {label}: intDiv buckets need an integer column with bounds ≥ 0",
                                hint="or group by a public column with declared values")
        lo, hi = int(source.bounds.lo) // step, int(source.bounds.hi) // step
        _check_size(hi - lo + 1, label)
        node = call("intDiv", clamp(self.outer(source), source.bounds), number(step))
        return GroupKey(label, node, tuple(range(lo, hi + 1)), "bounds", type="Int64")

    def _date_key(self, source: SourceColumn, unit: str, label: str) -> GroupKey:
        """A date bucket key; callers pass only a column with declared date bounds."""
        assert source.date_bounds is not None
        lo, hi = source.date_bounds
        is_time = base_type(source.type).startswith("DateTime")
        date32 = not is_time and base_type(source.type) == "Date32"
        if is_time:
            first, last = call("toDateTime", exp.Literal.string(f"{lo} 00:00:00")), \
                call("toDateTime", exp.Literal.string(f"{hi} 23:59:59"))
        else:
            cast = "toDate32" if date32 else "toDate"
            first, last = call(cast, exp.Literal.string(f"{lo}")), call(cast, exp.Literal.string(f"{hi}"))
        clamped = call("least", call("greatest", self.outer(source), first), last)
        fn = {"day": "toDate", "month": "toStartOfMonth", "quarter": "toStartOfQuarter",
              "year": "toStartOfYear", "toyear": "toYear", "tomonth": "toMonth"}[unit]
        domain = _date_domain(unit, lo, hi, label)
        key_type = {"toYear": "UInt16", "toMonth": "UInt8"}.get(fn, "Date32" if date32 else "Date")
        return GroupKey(label, call(fn, clamped), domain, "bounds", type=key_type)


def _within(source: SourceColumn, domain: tuple[Any, ...]) -> exp.Expr:
    """``column IN (domain…)`` over the source rows."""
    return exp.In(this=source.base.copy(), expressions=[literal_node(v) for v in domain])


def _with_unmatched(source: SourceColumn, domain: tuple[Any, ...], label: str) -> tuple[Any, ...]:
    """A LEFT-joined public column's domain plus the value an unmatched row reads (its type's
    default, public knowledge), so those rows form their group as in ClickHouse."""
    if not source.unmatched_default:
        return domain
    default = _type_default(source.type)
    if default is _NO_DEFAULT:
        raise QueryRejected(f"GROUP BY {label}: rows of the LEFT JOIN without a match would form a group of "
                            f"type {source.type} that dpch cannot list", hint="use JOIN, which keeps matched rows only")
    return domain if default in domain else (*domain, default)


_NO_DEFAULT = object()


def _type_default(ch_type: str) -> object:
    """ClickHouse's default value of a type (``defaultValueOfTypeName``), for the types dpch lists."""
    if ch_type.replace("LowCardinality(", "").startswith("Nullable("):
        return _NO_DEFAULT  # NULL: a key domain cannot select it (x IN (NULL) is never true)
    base = base_type(ch_type)
    if base == "Bool":
        return False
    if base.startswith(("Int", "UInt")):
        return 0
    if base.startswith(("Float", "Decimal")):
        return 0.0
    if base == "String":
        return ""
    if base == "Date":
        return date(1970, 1, 1)
    if base == "Date32":
        return date(1900, 1, 1)
    return _NO_DEFAULT


def _date_domain(unit: str, lo: date, hi: date, label: str) -> tuple[Any, ...]:
    """Every value ``unit`` takes on dates in [lo, hi], without listing the days one by one."""
    months = (hi.year - lo.year) * 12 + hi.month - lo.month + 1
    if unit == "day":
        _check_size((hi - lo).days + 1, label)
        return tuple(lo + timedelta(days=i) for i in range((hi - lo).days + 1))
    if unit == "toyear":
        return tuple(range(lo.year, hi.year + 1))
    if unit == "tomonth":
        return tuple(range(1, 13)) if months >= 12 else tuple(sorted({(lo.month - 1 + i) % 12 + 1
                                                                          for i in range(months)}))
    step = {"month": 1, "quarter": 3, "year": 12}[unit]
    first = (lo.year * 12 + lo.month - 1) // step * step  # months since year 0, aligned to the unit
    last = hi.year * 12 + hi.month - 1
    values = tuple(date(m // 12, m % 12 + 1, 1) for m in range(first, last + 1, step))
    _check_size(len(values), label)
    return values


def _bucket_argument(expr: exp.Expr) -> exp.Expr | None:
    """The argument a date bucket function applies to."""
    if isinstance(expr, exp.Anonymous):
        return expr.expressions[0] if expr.expressions else None
    found = expr.this
    return found if isinstance(found, exp.Expr) else None


def _date_bucket(expr: exp.Expr, name: str) -> str | None:
    """The unit of a date bucket listed in Python (:func:`_date_domain`), None for anything else. A bucket
    with a time zone is not: its boundaries are that zone's, which ClickHouse lists (:mod:`.time_buckets`)."""
    if expr.args.get("zone") is not None or (isinstance(expr, exp.Anonymous) and len(expr.expressions) > 1):
        return None
    if isinstance(expr, exp.TimestampTrunc | exp.DateTrunc):
        unit_node = expr.args.get("unit")
        unit = str(unit_node.name if unit_node is not None else "").lower()
        return unit if unit in ("day", "month", "quarter", "year") else None
    if name in ("toyear", "tomonth"):
        return name
    if name == "todate":
        return "day"
    return None


def _check_size(size: int, label: str) -> None:
    if size > MAX_GROUPS:
        raise QueryRejected(f"GROUP BY {label} would release {size} groups, more than the limit of {MAX_GROUPS}",
                            hint="use coarser buckets, e.g. intDiv(column, 10)")


def check_domain_size(keys: list[GroupKey]) -> int:
    size = 1
    for k in keys:
        if k.values is not None:
            size *= len(k.values)
    if size > MAX_GROUPS:
        raise QueryRejected(f"GROUP BY would release {size} groups, more than the limit of {MAX_GROUPS}",
                            hint="group by fewer columns or coarser buckets")
    return size


__all__ = ["GroupKey", "KeyBuilder", "MAX_GROUPS", "check_domain_size"]

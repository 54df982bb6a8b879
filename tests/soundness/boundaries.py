"""The boundary fuzzer's cases and runner (issue 24): every registry function × every argument it does not
require to be constant × the extremes of every type (:mod:`tests.soundness.vocabulary`), chosen per row.

A case is one query over a table that holds, in its column ``c``, the extremes of one vocabulary type
(one row each, so the row chooses the value): table ``v<i>`` for the i-th type, ``v`` (the unit only)
for cases that read no vocabulary column. It is sent through dpch's own path —
plan (registry, ClickHouse's types), the pre-charge probes, then the emitted SQL on the table — and has
one of three outcomes:

- ``refused``: dpch refused it before anything would be charged (a type the argument does not accept,
  a constant ClickHouse refuses): fine, whatever the data;
- ``ran``: the emitted SQL ran on every extreme without an error: fine;
- ``raised …``: the emitted SQL failed on the table after the pre-charge checks passed: an error
  oracle, the failure this fuzzer exists to find.

The cases come from the registry itself (:data:`dpch.sql.functions.ENTRIES`): a new function or
argument is fuzzed without anyone writing a case for it. Forms:

- ``column``: the argument is a column of the vocabulary type (every extreme, one per row);
- ``literal``: the argument is ``if(uid = 1, <extreme written in SQL dpch accepts>, <normal value>)``;
- ``constant``: a constant-only argument given a bogus value (time zones, modes, units, patterns,
  places): it must be refused before the charge or run;
- ``value``: a function with an interval rule, inside ``sum(…)`` over the bounded numeric columns.

Other arguments take normal values, non-constant (``if(uid = 0, v, v)``), and for comparisons and
arithmetic a partner of the argument's own family (a scale-9 DateTime64 constant beside a DateTime64
column, an INTERVAL beside a date), so that the case is admitted and reaches ClickHouse.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from dpch.errors import DpchError
from dpch.sql import functions
from dpch.sql.expression_types import Family, families
from dpch.sql.rewrite import emit_probe_sqls, emit_sql
from tests.helpers import query_keyed
from tests.soundness.vocabulary import BOGUS_ZONES, of_type, types

TABLE = "v"
UNIT = "uid"

#: the vocabulary's types in table column order: column c<i> holds the extremes of TYPES[i]
TYPES = types()
ROWS = max(len(of_type(t)) for t in TYPES)

#: extremes an analyst can write in SQL dpch accepts (no CAST on a row), by family
LITERALS: dict[Family, tuple[str, ...]] = {
    Family.NUMBER: ("-9223372036854775808", "-9223372036854775807 - 1", "9223372036854775807",
                    "18446744073709551615", "9223372036854775808", "-1", "0", "1e308", "-1e308", "5e-324",
                    "toFloat64OrNull('inf')", "toFloat64OrNull('-inf')", "toFloat64OrNull('nan')",
                    "toInt64OrNull('-9223372036854775808')", "-170141183460469231731687303715884105728",
                    "340282366920938463463374607431768211455", "-0.0", "NULL"),
    Family.STRING: ("''", "'%_\\\\([{*+?.^$|'", "'\\\\'", "'Bad/Zone'", "'2021-01-01'", "'-9223372036854775808'",
                    "'" + "x" * 65536 + "'", "'\\xFF\\xFE'", "NULL"),
    Family.DATE: ("toDate('2149-06-06')", "toDate('1970-01-01')", "toDate32('1900-01-01')",
                  "toDate32('2299-12-31')", "toDateTime(4294967295)", "toDateTime(0)",
                  "toDateTime64('2262-04-11 23:47:16', 9)", "toDateTime64('1900-01-01 00:00:00', 0)",
                  "fromUnixTimestamp64Nano(-9223372036854775808)", "fromUnixTimestamp64Nano(9223372036854775807)",
                  "today()", "NULL"),
}

#: the literals of a default run: the edges each kind of failure was found at (the full run writes all)
CORE_LITERALS = frozenset({
    "-9223372036854775808", "-9223372036854775807 - 1", "18446744073709551615", "1e308", "toFloat64OrNull('nan')",
    "toInt64OrNull('-9223372036854775808')", "NULL", "''", "'%_\\\\([{*+?.^$|'", "'Bad/Zone'", "'2021-01-01'",
    "toDateTime64('2262-04-11 23:47:16', 9)", "toDate32('1900-01-01')", "fromUnixTimestamp64Nano(9223372036854775807)",
    "toDateTime(4294967295)"})

#: normal values of each family, as partners of a compared or combined argument (constant and not)
PARTNERS: dict[Family, tuple[str, ...]] = {
    Family.NUMBER: ("1", "1.5", "-3"),
    Family.STRING: ("'abc'",),
    # the scale-9 DateTime64 first: the partner a default run uses, and the one a conversion overflows at
    Family.DATE: ("toDateTime64('2021-03-04 05:06:07', 9)", "toDate('2021-03-04')", "toDate32('2021-03-04')",
                  "toDateTime('2021-03-04 05:06:07')", "toDateTime64('2021-03-04 05:06:07.123', 3)"),
}
#: a value of each family that ClickHouse can also read as a number or a date
PARSES = {Family.NUMBER: "15", Family.STRING: "'2021-03-04'", Family.DATE: "toDate('2021-03-04')"}
#: what a date is shifted by in arithmetic
SHIFTS = ("INTERVAL 9000000000 SECOND", "INTERVAL 1 DAY", "INTERVAL -1 MILLISECOND", "INTERVAL 100 YEAR",
          "INTERVAL 1 NANOSECOND", "INTERVAL 3 MONTH", "1")

#: the bounded columns a function with an interval rule is tried on inside sum(…): every column there is
#: read as a clamped Float64, so a few widths stand for all
VALUE_TYPES = ("Int64", "UInt256", "Float64", "Float32", "Decimal(76, 0)", "Nullable(Int64)", "Bool")

#: bogus constants by the kind of a constant-only argument
BOGUS: dict[str, tuple[str, ...]] = {
    functions.ZONE: tuple(f"'{z}'" for z in BOGUS_ZONES),
    "mode": ("99", "-1", "18446744073709551615"),
    "unit": ("'fortnight'", "''"),
    "pattern": ("'('", "'\\\\'", "'[z-a]'", "'%\\\\'"),
    "": ("1000", "-1000", "18446744073709551615", "-9223372036854775808", "''", "NULL"),
}


@dataclass(frozen=True)
class Case:
    """One query of the fuzzer: which function, argument and value it tries."""

    function: str
    argument: str
    form: str
    value: str
    sql: str
    #: the table it reads (``v<i>``: the extremes of the i-th type in column ``c``)
    table: str = TABLE
    #: the registry entry's template: one entry's cases (two entries may share a name)
    entry: str = ""


def family_of(type_: str) -> Family:
    """The one family a vocabulary type is partnered by (dates before numbers: a DateTime64 is both)."""
    found = families(type_)
    for family in (Family.DATE, Family.STRING, Family.NUMBER):
        if found & family:
            return family
    return Family.OTHER


def table_of(type_: str) -> str:
    return f"{TABLE}{TYPES.index(type_)}"


COLUMN = "c"


def _nonconstant(value: str) -> str:
    return f"if({UNIT} = 0, {value}, {value})"


def _fill(entry: functions.Function, slot: int, value: str, partner: str | None) -> str:
    args = []
    for i, arg in enumerate(entry.args):
        if i == slot:
            args.append(value)
        elif arg.accepts is functions.Accepts.CONSTANT:
            args.append(arg.sample)
        elif partner is not None:
            # an interval's length is a constant by the registry: written as is
            args.append(partner if partner.startswith("INTERVAL") else _nonconstant(partner))
        else:
            args.append(_nonconstant(arg.sample))
    return entry.template.format(*args)


def _partners(entry: functions.Function, slot: int, family: Family) -> tuple[str | None, ...]:
    """What the other arguments are while ``slot`` takes a value of ``family``: the entry's samples,
    or, for comparisons and arithmetic, values of the same family (else the case is refused as a
    mismatch and tests nothing)."""
    arithmetic = entry.keys[0] in (exp.Add, exp.Sub)
    if arithmetic and family is Family.DATE:
        return SHIFTS
    if entry.same_family or arithmetic:
        return PARTNERS.get(family, (None,))
    return (None,)


def slots(entry: functions.Function) -> list[int]:
    used = {int(i) for i in re.findall(r"\{(\d+)\}", entry.template)}
    return [i for i in sorted(used) if i < len(entry.args)]


def where(call: str) -> str:
    return f"SELECT count() FROM {{t}} WHERE toString({call}) != '~' SETTINGS dp_epsilon = 1"


def cases(full: bool = True) -> Iterator[Case]:
    """Every case, generated from the registry. ``full=False`` (the default CI run) keeps every function,
    argument, vocabulary type and literal but pairs each with its first partner only."""
    for entry in functions.ENTRIES:
        if not entry.row or not entry.template:
            continue
        for slot in slots(entry):
            arg = entry.args[slot]
            if arg.accepts is functions.Accepts.CONSTANT:
                for bogus in BOGUS.get(arg.kind, BOGUS[""]):
                    yield Case(entry.name, arg.what, "constant", bogus, where(_fill(entry, slot, bogus, None)),
                               entry=entry.template)
                continue
            for type_ in TYPES:
                family = family_of(type_)
                for partner in _partners(entry, slot, family)[:None if full else 1]:
                    yield Case(entry.name, arg.what, "column", f"{type_} beside {partner}" if partner else type_,
                               where(_fill(entry, slot, COLUMN, partner)), table_of(type_), entry.template)
            for family, literals in LITERALS.items():
                for literal in (literals if full else [x for x in literals if x in CORE_LITERALS]):
                    for partner in _partners(entry, slot, family)[:2 if full else 1]:
                        # the row's other choice: the argument's own normal value, or one of the literal's
                        # family that parses (a date, a number), so that the literal is the only bad row
                        normal = partner or (arg.sample if family & arg.family else PARSES[family])
                        chosen = f"if({UNIT} = 1, {literal}, {normal})"
                        label = literal if len(literal) < 40 else literal[:20] + "…"
                        yield Case(entry.name, arg.what, "literal", label, where(_fill(entry, slot, chosen, partner)),
                                   entry=entry.template)
        if entry.value is not None:
            for slot in slots(entry):
                if entry.args[slot].accepts is functions.Accepts.CONSTANT:
                    continue
                for type_ in VALUE_TYPES:
                        call = _fill(entry, slot, COLUMN, None)
                        yield Case(entry.name, entry.args[slot].what, "value", type_,
                                   f"SELECT sum({call}) FROM {{t}} SETTINGS dp_epsilon = 1", table_of(type_),
                                   entry.template)


COMMENT = "dp: privacy_unit=uid, max_rows_per_unit=1"


def tables() -> dict[str, str]:
    """The fuzzer's tables and their columns: ``v`` (the unit only), and per vocabulary type ``v<i>``
    with the unit and ``c`` (numeric ones bounded, so they can be summed)."""
    found = {TABLE: f"{UNIT} UInt64"}
    for type_ in TYPES:
        bounds = _bounds(type_)
        comment = f" COMMENT 'dp: bounds=[{bounds[0]}, {bounds[1]}]'" if bounds else ""
        found[table_of(type_)] = f"{UNIT} UInt64, {COLUMN} {type_}{comment}"
    return found


def _bounds(type_: str) -> tuple[str, str] | None:
    base = type_.replace("Nullable(", "").rstrip(")") if type_.startswith("Nullable(") else type_
    if base.startswith(("Float", "Decimal")) or base in ("Int128", "Int256", "UInt128", "UInt256"):
        return "-1e30", "1e30"
    if base.startswith("UInt"):
        return "0", str(2 ** int(base[4:]) - 1)
    if base.startswith("Int"):
        bits = int(base[3:])
        return str(-(2 ** (bits - 1))), str(2 ** (bits - 1) - 1)
    if base == "Bool":
        return "0", "1"
    return None


def load_sql(database: str) -> list[str]:
    """Statements that fill the tables: one row per extreme (``v``: rows 1…:data:`ROWS`)."""
    statements = [f"INSERT INTO `{database}`.`{TABLE}` SELECT number + 1 FROM numbers({ROWS})"]
    for type_ in TYPES:
        rows = " UNION ALL ".join(f"SELECT {j + 1}, {e.literal}" for j, e in enumerate(of_type(type_)))
        statements.append(f"INSERT INTO `{database}`.`{table_of(type_)}` {rows}")
    return statements


@dataclass(frozen=True)
class Outcome:
    case: Case
    verdict: str  # refused, ran, raised
    detail: str = ""


_CODE = re.compile(r"\(([A-Z][A-Z0-9_]+)\)")


def run(session, case: Case) -> Outcome:
    """One case through dpch's path: plan, probes (before the charge), then the emitted SQL on the table."""
    sql = case.sql.replace("{t}", case.table)
    db = session.engine.database
    try:
        plan, _ = session.plan(sql)
        for probe in emit_probe_sqls(plan, db):
            session.engine.probe(probe)
    except DpchError as exc:
        return Outcome(case, "refused", str(exc)[:200])
    emitted = emit_sql(plan, db)
    try:
        query_keyed(session.engine, emitted)
    except Exception as exc:  # noqa: BLE001 — any failure after the checks is the verdict
        found = _CODE.search(str(exc))
        return Outcome(case, "raised", found.group(1) if found else str(exc)[:200])
    return Outcome(case, "ran")


__all__ = ["COMMENT", "Case", "LITERALS", "Outcome", "PARTNERS", "TABLE", "TYPES", "cases", "load_sql", "run", "tables"]

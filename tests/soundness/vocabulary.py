"""The boundary fuzzer's vocabulary: extreme values of every ClickHouse type an argument can take.

An attacker chooses, per row, what a function's argument is (``substring(s, 1, if(<row condition>,
-2^63, 1))``): the extremes of the argument's type are where a function raises (docs/design.md rule 5,
"a row may be garbage, never an error"). Each :class:`Extreme` is a ClickHouse expression whose value
has exactly the named type, so it can be put in a table column of that type (a value the row chose)
or written as a literal inside ``if(<row condition>, <extreme>, <normal>)``.

The list covers what issue 24 names: the minimum, maximum, 0 and −1 of every Int and UInt width;
±inf, NaN and ±1e308; empty, 1 MB and invalid UTF-8 strings with metacharacters; bogus time zones and
modes; Date, Date32, DateTime and DateTime64 at every scale at the type's edges (and DateTime64 ticks
at Int64's edges, which ClickHouse stores as they come); Decimal32 to Decimal256 at their maximum
scale and precision; NULL.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Extreme:
    """One value: its ClickHouse type, and an expression of exactly that type (constant, no table)."""

    type: str
    sql: str

    @property
    def literal(self) -> str:
        """The value as a cast literal, for ``if(<row condition>, <literal>, <normal>)``."""
        quoted = self.type.replace("'", "\\'")
        return f"CAST({self.sql}, '{quoted}')"


def _ints() -> list[Extreme]:
    found = []
    for bits in (8, 16, 32, 64, 128, 256):
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        found += [Extreme(f"Int{bits}", f"toInt{bits}('{v}')") for v in (lo, hi, 0, -1, lo + 1)]
        found += [Extreme(f"UInt{bits}", f"toUInt{bits}('{v}')") for v in (0, 2**bits - 1, 2 ** (bits - 1))]
    return found


def _floats() -> list[Extreme]:
    values = ("inf", "-inf", "nan", "1e308", "-1e308", "0", "-0", "5e-324", "9.2233720368547758e18",
              "-9.2233720368547758e18", "1.8446744073709552e19")
    return [Extreme(t, f"to{t}('{v}')") for t in ("Float64", "Float32") for v in values]


#: metacharacters of LIKE, regular expressions, format strings and SQL quoting
METACHARACTERS = "%_\\\\([{*+?.^$|\\'\""
BOGUS_ZONES = ("Bad/Zone", "", "UTC+99", "../../etc/passwd")


def _strings() -> list[Extreme]:
    texts = ["''", "repeat(repeat('x', 1024), 1024)", "unhex('FFFE80C0')", f"'{METACHARACTERS}'", "'\\\\'", "'%'",
             "'2021-01-01'", "'2021-01-01 00:00:00'", "'-9223372036854775808'", "'18446744073709551616'",
             "'1e309'", "'nan'", "'UTC'", "'Asia/Kolkata'"]
    texts += [f"'{z}'" for z in BOGUS_ZONES]
    strings = [Extreme("String", t) for t in texts]
    return strings + [Extreme("LowCardinality(String)", e.sql) for e in strings[:4]] + \
        [Extreme("FixedString(4)", f"toFixedString({t}, 4)") for t in ("'abcd'", "unhex('FFFE80C0')", "'\\0\\0\\0\\0'")]


def _dates() -> list[Extreme]:
    found = [Extreme("Date", f"toDate('{v}')") for v in ("1970-01-01", "2149-06-06")]
    found += [Extreme("Date32", f"toDate32('{v}')") for v in ("1900-01-01", "2299-12-31", "1970-01-01")]
    found += [Extreme("DateTime", f"toDateTime({v})") for v in (0, 4294967295)]
    found += [Extreme("DateTime('Asia/Kolkata')", f"toDateTime({v}, 'Asia/Kolkata')") for v in (0, 4294967295)]
    for scale in range(10):
        t = f"DateTime64({scale})"
        for ticks in (-(2**63), 2**63 - 1, 0):  # whatever a table stores: ClickHouse keeps the ticks as they come
            found.append(Extreme(t, f"reinterpret(toInt64('{ticks}'), '{t}')"))
        found += [Extreme(t, f"toDateTime64('{v}', {scale})") for v in ("1900-01-01 00:00:00", "2262-04-11 23:47:16")]
    return found


def _decimals() -> list[Extreme]:
    found = []
    for bits, precision in ((32, 9), (64, 18), (128, 38), (256, 76)):
        for scale in (0, precision):
            t = f"Decimal({precision}, {scale})"
            nines = "9" * (precision - scale)
            top = (nines or "0") + ("." + "9" * scale if scale else "")
            found += [Extreme(t, f"toDecimal{bits}('{v}', {scale})") for v in (top, "-" + top, "0")]
    return found


def _others() -> list[Extreme]:
    return [Extreme("Bool", "true"), Extreme("Bool", "false"),
            Extreme("UUID", "toUUID('00000000-0000-0000-0000-000000000000')"),
            Extreme("Nullable(Int64)", "CAST(NULL, 'Nullable(Int64)')"),
            Extreme("Nullable(String)", "CAST(NULL, 'Nullable(String)')"),
            Extreme("Nullable(Float64)", "CAST(NULL, 'Nullable(Float64)')"),
            Extreme("Nullable(Date)", "CAST(NULL, 'Nullable(Date)')"),
            Extreme("Nullable(DateTime64(3))", "CAST(NULL, 'Nullable(DateTime64(3))')"),
            Extreme("Nullable(Int64)", "CAST(toInt64('-9223372036854775808'), 'Nullable(Int64)')")]


EXTREMES: tuple[Extreme, ...] = tuple(_ints() + _floats() + _strings() + _dates() + _decimals() + _others())


def types() -> list[str]:
    """Every type of the vocabulary, in order of first appearance."""
    return list(dict.fromkeys(e.type for e in EXTREMES))


def of_type(type_: str) -> list[Extreme]:
    return [e for e in EXTREMES if e.type == type_]


__all__ = ["BOGUS_ZONES", "EXTREMES", "METACHARACTERS", "Extreme", "of_type", "types"]

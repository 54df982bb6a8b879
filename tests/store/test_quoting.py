"""The quoting module: literals rendered as SQL text round-trip exactly through chdb.

Every value is written with :func:`dpch.store.quoting.insert_values` into a real table of the
ledger's column types and read back; strings must come back byte for byte (quotes, backslashes,
control characters, NUL, non-ASCII), floats bit for bit (``float.hex``)."""

from __future__ import annotations

import math
import struct
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpch.store.engine import Engine
from dpch.store.quoting import insert_values, literal, quote_identifier, quote_string

COLUMNS = [
    ("release_id", "UUID"), ("seq", "UInt8"), ("time", "DateTime64(6, 'UTC')"), ("analyst", "String"),
    ("epsilon", "Float64"), ("rho", "Nullable(Float64)"), ("ex_post", "Bool"), ("datasets", "Array(String)"),
]

ADVERSARIAL = [
    "", "'", "\\", "\\'", "'\\", "a'b", "a\\'b", "\\\\'", "''", "\n", "\r\n", "\t", "\x00", "a\x00b", "\x1f\x7f",
    "\\x00", "\\0", "`", "$$", "é", "日本語", "😀", "\u2028", "'); DROP TABLE x; --", "\\N", "NULL", "[1]",
    "{a:String}", "?", "%s", " leading", "trailing ", "\x00'\\\n😀",
]

FLOATS = [0.0, -0.0, 1e-7, 0.1, 0.30000000000000004, 1 / 3, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
          -1.7976931348623157e308, 2.0 ** 53 + 2, 123456789.12345679, math.pi, 1e22, 1e23, 9007199254740993.0]


@pytest.fixture
def table(store_dsn: str, database: str):
    engine = Engine(store_dsn, database=database)
    name = engine.table("roundtrip")
    engine.command(f"CREATE TABLE {name} (i UInt32, " + ", ".join(f"{quote_identifier(c)} {t}" for c, t in COLUMNS)
                   + ") ENGINE = MergeTree ORDER BY i")
    yield engine, name
    engine.close()


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _write_read(engine: Engine, name: str, rows: list[list[object]]) -> list[tuple[object, ...]]:
    engine.command(f"TRUNCATE TABLE {name}")
    engine.command(insert_values(name, [("i", "UInt8"), *COLUMNS], [[i, *row] for i, row in enumerate(rows)]))
    return [r[1:] for r in engine.query_rows(
        f"SELECT i, toString(release_id), seq, time, analyst, epsilon, rho, ex_post, datasets FROM {name} ORDER BY i")]


def _row(text: str, eps: float, rho: float | None = None) -> list[object]:
    return [uuid.uuid4(), 3, datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), text, eps, rho, True, [text, "x"]]


def test_adversarial_strings_round_trip_byte_for_byte(table):
    engine, name = table
    rows = [_row(text, 0.5) for text in ADVERSARIAL]
    back = _write_read(engine, name, rows)
    assert len(back) == len(ADVERSARIAL)
    for text, got in zip(ADVERSARIAL, back, strict=True):
        assert got[3] == text, f"String column: wrote {text!r}, read {got[3]!r}"
        assert list(got[7]) == [text, "x"], f"Array(String): wrote {text!r}, read {got[7]!r}"


def test_floats_round_trip_bit_exact(table):
    engine, name = table
    rows = [_row("f", x, None if i % 3 == 0 else -x) for i, x in enumerate(FLOATS)]
    back = _write_read(engine, name, rows)
    for (x, got), i in zip(zip(FLOATS, back, strict=True), range(len(FLOATS)), strict=True):
        assert _bits(got[4]) == _bits(x), f"Float64 {x!r} read back as {got[4]!r}"
        if i % 3 == 0:
            assert got[5] is None
        else:
            assert _bits(got[5]) == _bits(-x), f"Nullable(Float64) {-x!r} read back as {got[5]!r}"


@given(st.lists(st.tuples(st.text(), st.floats(allow_nan=False, allow_infinity=False)), min_size=1, max_size=20))
def test_generated_rows_round_trip(keeper, rows):
    """Any text (every code point hypothesis draws, surrogates excluded by st.text) and any finite double."""
    name = keeper.table("quoting_generated")
    keeper.command(f"CREATE TABLE IF NOT EXISTS {name} (i UInt32, s String, a Array(String), x Float64) "
                   "ENGINE = MergeTree ORDER BY i")
    keeper.command(f"TRUNCATE TABLE {name}")
    keeper.command(insert_values(name, [("i", "UInt8"), ("s", "String"), ("a", "Array(String)"), ("x", "Float64")],
                                 [[i, s, [s, s], x] for i, (s, x) in enumerate(rows)]))
    back = keeper.query_rows(f"SELECT s, a, x FROM {name} ORDER BY i")
    assert [r[0] for r in back] == [s for s, _ in rows]
    assert [list(r[1]) for r in back] == [[s, s] for s, _ in rows]
    assert [_bits(r[2]) for r in back] == [_bits(x) for _, x in rows]


def test_other_types_round_trip(table):
    engine, name = table
    rid = uuid.uuid4()
    aware = datetime(2026, 5, 6, 9, 8, 7, 123456, tzinfo=timezone(timedelta(hours=2)))
    rows = [[rid, 255, aware, "a", 1.0, 2.0, False, []],
            [str(rid), 0, datetime(2026, 5, 6, 7, 8, 7, 123456), "b", 1.0, None, True, ("p", "q")]]
    back = _write_read(engine, name, rows)
    assert back[0][0] == back[1][0] == str(rid)
    assert (back[0][1], back[1][1]) == (255, 0)
    # the aware time is converted to UTC; a naive one is read as UTC: both the same instant
    assert back[0][2] == back[1][2] == datetime(2026, 5, 6, 7, 8, 7, 123456)
    assert (back[0][6], back[1][6]) == (False, True)
    assert (list(back[0][7]), list(back[1][7])) == ([], ["p", "q"])


@pytest.mark.parametrize("value, type_name", [
    (math.nan, "Float64"), (math.inf, "Float64"), (-math.inf, "Float64"), (math.nan, "Nullable(Float64)"),
    (True, "Float64"), ("1.0", "Float64"), (2 ** 53 + 1, "Float64"), (10 ** 400, "Float64"),
    (256, "UInt8"), (-1, "UInt8"), (True, "UInt8"), (2 ** 64, "UInt64"), (-1, "UInt64"), (1.0, "UInt64"),
    (1, "Bool"), ("true", "Bool"),
    ("not-a-uuid", "UUID"), ("x", "Array(String)"), ([1], "Array(String)"), (b"x", "String"),
    ("\ud800", "String"), ("2026-01-01", "DateTime64(6, 'UTC')"), (1, "Int128"),
])
def test_refused_values(value, type_name):
    """What cannot be written exactly is refused, not approximated (NaN/inf, inexact ints, wrong types)."""
    with pytest.raises((ValueError, TypeError)):
        literal(value, type_name)


def test_literals_are_one_printable_line():
    """Control characters are escaped, so a rendered statement is plain text whatever a string holds."""
    text = quote_string("a\x00b\nc\r\t\x7f'\\")
    assert text == "'a\\x00b\\x0Ac\\x0D\\x09\\x7F\\'\\\\'"
    assert text.isprintable()


def test_uint64_round_trips_at_its_extremes(keeper):
    name = "`default`.`quoting_uint64`"
    keeper.command(f"CREATE TABLE IF NOT EXISTS {name} (v UInt64) ENGINE = Memory")
    keeper.command(f"TRUNCATE TABLE {name}")
    keeper.command(insert_values(name, [("v", "UInt64")], [[0], [2 ** 64 - 1]]))
    assert sorted(r[0] for r in keeper.query_rows(f"SELECT v FROM {name}")) == [0, 2 ** 64 - 1]
    keeper.command(f"DROP TABLE {name}")

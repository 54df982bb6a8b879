"""clickhouse-client's formats written by the CLI are byte for byte what ClickHouse writes for the
same rows: each case is also sent through chdb (``SELECT * FROM values(...)`` of the same literal
rows, then ``FORMAT X``) and the bytes are compared."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpch.cli import ch_formats
from dpch.cli.ch_formats import clickhouse_type, float_text, write
from dpch.store.quoting import quote_identifier, quote_string

FORMATS = ["PrettyCompact", "TSV", "TabSeparated", "TSVWithNames", "TabSeparatedWithNames", "CSV",
           "CSVWithNames", "JSONEachRow"]


def _literal(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, dt.datetime):
        return quote_string(v.strftime("%Y-%m-%d %H:%M:%S"))
    if isinstance(v, dt.date):
        return quote_string(v.isoformat())
    return quote_string(str(v))


def clickhouse_output(engine, fmt: str, columns: list[str], rows: list[tuple]) -> str:
    """What ClickHouse itself writes for ``rows`` (typed as the CLI infers them) in ``fmt``."""
    types = [clickhouse_type([r[j] for r in rows]) for j in range(len(columns))]
    structure = ", ".join(f"{quote_identifier(c)} {t}" for c, t in zip(columns, types, strict=True))
    if not rows:
        sql = f"SELECT * FROM values({quote_string(structure)}, ({', '.join(_default(t) for t in types)})) WHERE 0"
    else:
        values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
        sql = f"SELECT * FROM values({quote_string(structure)}, {values})"
    return engine.raw_query(sql, ch_formats.ALIASES[fmt]).decode()


def _default(t: str) -> str:
    return "NULL" if t.startswith("Nullable") else "0" if ("Int" in t or "Float" in t) else "''"


ROWS = [
    ("north", 12, 1.5, dt.date(2026, 1, 1), True),
    ("a\tb\"c'd\\e/f", -3, 100.25, dt.date(2026, 1, 2), False),
    ("ü日本", 1234567, 1e-7, dt.date(2026, 1, 3), False),
    ("", -9223372036854775808, 1e20, dt.date(2026, 1, 4), True),
    ("x,y", 0, -0.0, dt.date(2026, 1, 5), True),
    ("1e21", 5, 1e21, dt.date(2026, 1, 6), True),
    ("third", 7, 1 / 3, dt.date(2026, 1, 7), False),
    ("inf", 8, float("inf"), dt.date(2026, 1, 8), False),
    ("nan", 9, float("nan"), dt.date(2026, 1, 9), False),
]
COLUMNS = ["region", "n", "avg(spend)", "day", "flag"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_mixed_rows_are_byte_identical(keeper, fmt):
    rows = ROWS
    if fmt == "PrettyCompact":  # a tab: ClickHouse pads it to its tab stops there (a documented difference)
        rows = [(r[0].replace("\t", " "), *r[1:]) for r in ROWS]
    assert write(fmt, COLUMNS, rows) == clickhouse_output(keeper, fmt, COLUMNS, rows)


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "PrettyCompact"])
def test_nulls_control_characters_and_datetimes(keeper, fmt):
    columns = ["k", "t", "x"]
    rows = [(None, dt.datetime(2026, 1, 1, 10, 0, 0), None), ("a\nb\r\0\b\f\x01\u2028", dt.datetime(2026, 2, 1), 2.0)]
    assert write(fmt, columns, rows) == clickhouse_output(keeper, fmt, columns, rows)


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_results(keeper, fmt):
    assert write(fmt, ["x"], []) == clickhouse_output(keeper, fmt, ["x"], [])


@pytest.mark.parametrize("n", [1, 9, 12, 49, 50, 120])
def test_pretty_compact_row_numbers_and_footer_names(keeper, n):
    columns = ["key", "n_lo"]
    rows = [(f"k{i}", i * 1.25) for i in range(n)]
    assert write("PrettyCompact", columns, rows) == clickhouse_output(keeper, "PrettyCompact", columns, rows)


@pytest.mark.parametrize("value", [999_999, 1_000_000, 1_000_001, 1_234_567.5, -1_000_001, 10**15, 1e20, 1e33,
                                   1.5e40, -0.004, float("nan"), float("inf"), None])
def test_pretty_compact_large_number_tip(keeper, value):
    rows = [(value,)]
    assert write("PrettyCompact", ["x"], rows) == clickhouse_output(keeper, "PrettyCompact", ["x"], rows)


def test_a_release_like_result_with_interval_columns(keeper):
    columns = ["region", "n", "n_lo", "n_hi", "avg(spend)", "avg(spend)_lo", "avg(spend)_hi"]
    rows = [("east", 24987.0, 24980.62, 24993.38, 250.21, 249.0, 251.5),
            ("north", 25012.0, 25005.62, 25018.38, 249.8, 248.6, 251.1)]
    for fmt in FORMATS:
        assert write(fmt, columns, rows) == clickhouse_output(keeper, fmt, columns, rows), fmt


finite_or_not = st.floats(allow_nan=True, allow_infinity=True)


@given(st.lists(finite_or_not, min_size=1, max_size=30))
def test_any_float_is_written_as_clickhouse_writes_it(keeper, values):
    rows = [(v,) for v in values]
    for fmt in ("TSV", "JSONEachRow", "CSV"):
        assert write(fmt, ["x"], rows) == clickhouse_output(keeper, fmt, ["x"], rows)


@given(st.lists(st.text(max_size=12), min_size=1, max_size=10))
def test_any_string_is_escaped_as_clickhouse_escapes_it(keeper, values):
    rows = [(v, i) for i, v in enumerate(values)]
    for fmt in ("TSVWithNames", "JSONEachRow", "CSVWithNames"):
        assert write(fmt, ["s", "i"], rows) == clickhouse_output(keeper, fmt, ["s", "i"], rows)


@given(st.lists(st.text(alphabet="abcXYZ _-.,;:'\"\\/üé日本語", max_size=10), min_size=1, max_size=5))
def test_pretty_strings_align_as_clickhouse_aligns_them(keeper, values):
    rows = [(v, len(v)) for v in values]
    assert write("PrettyCompact", ["s", "n"], rows) == clickhouse_output(keeper, "PrettyCompact", ["s", "n"], rows)


def test_float_text_examples_and_a_negative_control():
    assert [float_text(x) for x in (1e-6, 1e-7, 1.5e-7, 1e20, 1e21, 1234567.0, -0.0, 5e-324)] == [
        "0.000001", "1e-7", "1.5e-7", "100000000000000000000", "1e21", "1234567", "-0", "5e-324"]
    # Python's own spellings differ from ClickHouse's, so the comparisons above can fail
    assert repr(1e-7) != float_text(1e-7) and repr(1234567.0) != float_text(1234567.0)


def test_the_comparison_has_power(keeper):
    """Negative control: Python's csv module (what `--format csv` writes) is not ClickHouse's CSV."""
    import csv
    import io

    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(ROWS[:3])
    assert out.getvalue() != clickhouse_output(keeper, "CSV", COLUMNS, ROWS[:3])

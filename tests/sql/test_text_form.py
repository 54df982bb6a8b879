"""ClickHouse's text of a value (:mod:`dpch.sql.text_form`), checked against ClickHouse itself: thousands of
doubles, drawn by their bits (every exponent, subnormals, both signs) and around the layout's thresholds,
are sent to ClickHouse as their exact bits (``reinterpretAsFloat64``) and its ``toString`` compared."""

from __future__ import annotations

import struct
from datetime import date, datetime

import numpy as np
import pytest

from dpch.sql.text_form import clickhouse_text, float_text


def _bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def _doubles() -> list[float]:
    rng = np.random.default_rng(20261207)
    drawn = rng.integers(0, 2**64, size=3000, dtype=np.uint64).view(np.float64).tolist()
    # the layout's thresholds: exponents −7…22, integers, and values one ulp either side
    edges = [s * m * 10.0**e for e in range(-9, 24) for m in (1.0, 1.5, 9.999999999999998, 123456789.0)
             for s in (1.0, -1.0)]
    edges += [float(np.nextafter(x, direction)) for x in edges[:60] for direction in (np.inf, -np.inf)]
    special = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 5e-324, 1.7976931348623157e308, 0.1, 1 / 3,
               2.0**53, 2.0**53 + 2, 1e21, 1e-7, 123456789012345680000.0, 102.0, -2.5]
    return drawn + edges + special


def test_float_text_is_clickhouses(keeper):
    values = _doubles()
    bits = ", ".join(str(_bits(x)) for x in values)
    (texts,) = keeper.query_rows(f"SELECT arrayMap(b -> toString(reinterpretAsFloat64(toUInt64(b))), [{bits}])")[0]
    wrong = [(x, float_text(x), theirs) for x, theirs in zip(values, texts, strict=True) if float_text(x) != theirs]
    assert not wrong, wrong[:10]


def test_a_broken_layout_is_caught(keeper):
    """Negative control: Python's repr (1e+21, 3.0, 1e-07) is not ClickHouse's text."""
    values = [1e21, 3.0, 1e-7]
    bits = ", ".join(str(_bits(x)) for x in values)
    (texts,) = keeper.query_rows(f"SELECT arrayMap(b -> toString(reinterpretAsFloat64(toUInt64(b))), [{bits}])")[0]
    assert [repr(x) for x in values] != list(texts) and [float_text(x) for x in values] == list(texts)


@pytest.mark.parametrize(("value", "sql"), [
    ("nurse", "toString('nurse')"), (42, "toString(toUInt8(42))"), (-7, "toString(toInt64(-7))"),
    (True, "toString(true)"), (date(2026, 3, 1), "toString(toDate('2026-03-01'))"),
    (datetime(2026, 3, 1, 4, 5, 6), "toString(toDateTime('2026-03-01 04:05:06', 'UTC'))"),
    (102.0, "toString(toFloat64(102))"), (0.1, "toString(0.1)"),
])
def test_every_kind_of_value_is_clickhouses(keeper, value, sql):
    assert clickhouse_text(value) == keeper.query_rows(f"SELECT {sql}")[0][0]

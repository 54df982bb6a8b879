"""ClickHouse's text of a value, as ``toString`` and ``CAST(x AS String)`` give it (issue 28, part 2).

Post-processing may sort or filter released rows by the text of a key or a noisy value (tools write
``ORDER BY CAST(x AS String)``, ``HAVING toString(k) = '…'``). The text must be ClickHouse's, or a sort
or a filter means something else than it would there:

- a String is itself; an integer its decimal digits; a Bool ``true``/``false``;
- a Date ``YYYY-MM-DD``, a DateTime ``YYYY-MM-DD hh:mm:ss``;
- a Float64 the shortest digits that read back as the same double (as Python's ``repr``), laid out as
  ECMAScript's Number::toString lays them out: plain digits while the decimal exponent n (value =
  0.d₁d₂… × 10ⁿ) is in (−6, 21], else ``d.ddde±x`` — but with no ``+`` (``1e21``, ``1e-7``), and ``nan``,
  ``inf``, ``-inf``, ``-0``. Measured on chdb (tests/sql/test_text_form.py compares thousands of
  random doubles, by their bits, with ClickHouse's own ``toString``).
"""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any


def float_text(x: float) -> str:
    """ClickHouse's ``toString`` of the Float64 ``x``."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    written = (whole + fraction).lstrip("0")
    digits = written.rstrip("0")
    # value = int(digits) × 10^(e − len(fraction) + trailing zeros) = 0.digits × 10^n
    n = len(digits) + (int(exponent) if exponent else 0) - len(fraction) + (len(written) - len(digits))
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    rest = "." + digits[1:] if k > 1 else ""
    return f"{sign}{digits[0]}{rest}e{n - 1}"


def clickhouse_text(value: Any) -> str:
    """ClickHouse's text of a released key or value (see the module)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, int):
        return str(value)
    return float_text(float(value))


__all__ = ["clickhouse_text", "float_text"]

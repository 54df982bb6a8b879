"""The standard normal's special functions, loaded from scipy.special on first use.

scipy.special takes about 0.15 s to import, and a Laplace release never needs it: these thin
wrappers keep it out of start-up (a one-query ``dpch query``, docs/benchmarks.md "Start-up")
while every caller still gets scipy's implementations, arrays included.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _special() -> Any:
    # start-up: scipy.special takes ~0.15 s to import; a Laplace release never needs it
    import scipy.special

    return scipy.special


def ndtr(x: Any) -> Any:
    """Φ(x), the standard normal CDF (scipy.special.ndtr)."""
    return _special().ndtr(x)


def ndtri(p: Any) -> Any:
    """Φ⁻¹(p), the standard normal quantile (scipy.special.ndtri)."""
    return _special().ndtri(p)


def log_ndtr(x: Any) -> Any:
    """log Φ(x), accurate far into the lower tail (scipy.special.log_ndtr)."""
    return _special().log_ndtr(x)


def log_ndtr_excess(x: Any) -> Any:
    """log Φ(x) + x²/2, accurate for every x: log Φ(x) without its Gaussian tail's −x²/2, which is what
    swamps it (log Φ(−10⁶) ≈ −5·10¹¹, while this is ≈ −14.7). Below 0 it is log(erfcx(−x/√2)/2)
    (Φ(x) = e^(−x²/2)·erfcx(−x/√2)/2); from 0 up, log Φ(x) is near 0 and x²/2 is exact."""
    special = _special()
    x = np.asarray(x, dtype=float)
    below, above = np.minimum(x, 0.0), np.maximum(x, 0.0)  # each branch sees only its own half
    out = np.where(x < 0, np.log(special.erfcx(-below / math.sqrt(2.0)) / 2.0),
                   special.log_ndtr(above) + 0.5 * above * above)
    return out if out.ndim else float(out)


def logsumexp(a: Any) -> Any:
    """log Σ exp(a), without overflow (scipy.special.logsumexp)."""
    return _special().logsumexp(a)


__all__ = ["log_ndtr", "log_ndtr_excess", "logsumexp", "ndtr", "ndtri"]

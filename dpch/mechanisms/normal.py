"""The standard normal's special functions, loaded from scipy.special on first use.

scipy.special takes about 0.15 s to import, and a Laplace release never needs it: these thin
wrappers keep it out of start-up (a one-query ``dpch query``, docs/benchmarks.md "Start-up")
while every caller still gets scipy's implementations, arrays included.
"""

from __future__ import annotations

from typing import Any


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


def logsumexp(a: Any) -> Any:
    """log Σ exp(a), without overflow (scipy.special.logsumexp)."""
    return _special().logsumexp(a)


__all__ = ["log_ndtr", "logsumexp", "ndtr", "ndtri"]

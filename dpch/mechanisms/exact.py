"""Exact samplers for the discrete Laplace and discrete Gaussian distributions.

Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020),
Algorithms 1–3, vectorised over numpy ``int64`` arrays. Every random decision is a comparison
of a uniform *integer* (``Generator.integers``, which is unbiased) with an integer, so the
output distribution is exactly the stated one: no floating-point number is ever involved
in a sampling decision. Parameters are rationals ``num/den`` of Python integers.

- :func:`bernoulli_exp` — Bernoulli(exp(−γ)) for rational γ ≥ 0 (CKS Algorithm 1).
- :func:`discrete_laplace` — P(Z = z) ∝ exp(−|z|·s/t) (CKS Algorithm 2), scale t/s.
- :func:`discrete_gaussian` — P(Z = z) ∝ exp(−z²/(2σ²)), σ² = n/d (CKS Algorithm 3, with the
  rejection centre chosen as an integer m ≈ σ; see the function's docstring for why any
  centre is exact).

Vectorisation: each step works on the still-undecided coordinates only, and rejected
coordinates are redrawn in the next round, so the expected number of numpy calls per batch is
a small constant (independent of the batch size) plus O(log batch) for the geometric tails.

Overflow: all integer products are bounded below 2^62 by the callers' choice of rationals
(:func:`rational_at_least`); the rare discrete-Gaussian coordinate whose acceptance exponent
would not fit (|Y| beyond ~2^30) is decided with Python integers instead, still exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

_INT64_SAFE = 1 << 62


def rational_at_least(value: float) -> Fraction:
    """The fraction ⌈value·D⌉/D ≥ ``value``, D = 2^max(0, 21 − exponent(value)).

    Noise parameters are rounded *up* to a rational (more noise, never less privacy), with a
    relative change below 2^-20 and a numerator below 2^51, so the samplers' int64 products
    cannot overflow. ``value·D`` is exact in floating point (D is a power of two), so the
    rounding is exact too.
    """
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"parameter must be positive and finite, got {value!r}")
    if value >= 2.0**50:
        raise ValueError(f"noise parameter {value!r} is too large to sample exactly")
    den = 1 << max(0, 21 - math.frexp(value)[1])
    return Fraction(math.ceil(value * den), den)


def _bernoulli_exp_fraction(rng: np.random.Generator, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for integers 0 ≤ num ≤ den (CKS Algorithm 1, γ ∈ [0, 1]).

    K = 1; while Bernoulli(γ/K): K += 1; return K odd.  Bernoulli(γ/K) = [U < num] with U
    uniform on {0, …, den·K − 1} (one scalar-bounded numpy draw per K for all undecided
    coordinates; the expected number of rounds is below e).
    """
    num = np.asarray(num, dtype=np.int64)
    flat = num.ravel()
    out = np.empty(flat.size, dtype=bool)
    idx = np.arange(flat.size)
    cur = flat
    k = 1
    while idx.size:
        success = rng.integers(0, den * k, size=idx.size) < cur
        out[idx[~success]] = k % 2 == 1
        idx = idx[success]
        cur = cur[success]
        k += 1
    return out.reshape(num.shape)


@lru_cache(maxsize=8)
def exp_neg1_word(index: int) -> int:
    """Bits [64·index, 64·index + 64) of the binary expansion of e^{−1}, exactly.

    floor(e^{−1}·2^{64(index+1)}) from the alternating series Σ(−1)^k/k!, whose consecutive
    partial sums bracket e^{−1}; terms are added until both brackets have the same floor
    (e^{−1}·2^n is irrational, so this terminates).
    """
    bits = 64 * (index + 1)
    partial, term, k = Fraction(1), Fraction(1), 0
    previous = Fraction(0)
    while True:
        k += 1
        term /= -k
        previous, partial = partial, partial + term
        lo, hi = sorted((previous, partial))
        if math.floor(lo * 2**bits) == math.floor(hi * 2**bits):
            return int(math.floor(lo * 2**bits)) & ((1 << 64) - 1)


def bernoulli_exp_minus_one(rng: np.random.Generator, size: int) -> np.ndarray:
    """Bernoulli(exp(−1)) exactly, by lazily comparing a uniform bit string with e^{−1}.

    A uniform real W ∈ [0, 1) is revealed 64 bits at a time; W < e^{−1} is decided at the
    first 64-bit word where W and e^{−1} differ (a tie continues with the next word, which
    happens with probability 2^-64 per word). This is exactly Bernoulli(e^{−1}) (no
    rounding: e^{−1}'s words come from :func:`exp_neg1_word`), and it costs one draw.
    """
    out = np.empty(size, dtype=bool)
    idx = np.arange(size)
    word = 0
    while idx.size:
        target = np.uint64(exp_neg1_word(word))
        draws = rng.integers(0, np.iinfo(np.uint64).max, size=idx.size, dtype=np.uint64, endpoint=True)
        tie = draws == target
        decided = ~tie
        out[idx[decided]] = draws[decided] < target
        idx = idx[tie]
        word += 1
    return out


def bernoulli_exp(rng: np.random.Generator, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for integer arrays num ≥ 0 (CKS Algorithm 1, any γ ≥ 0).

    For γ > 1: ⌊γ⌋ independent Bernoulli(exp(−1)) must all succeed, then Bernoulli(exp(−frac)).
    """
    num = np.asarray(num, dtype=np.int64)
    whole, frac = np.divmod(num, den)
    result = np.ones(num.shape, dtype=bool)
    pending = np.flatnonzero(whole > 0)
    j = 0
    while pending.size:
        ok = bernoulli_exp_minus_one(rng, pending.size)
        result.flat[pending[~ok]] = False
        pending = pending[ok]
        j += 1
        pending = pending[whole.flat[pending] > j]
    alive = np.flatnonzero(result)
    if alive.size:
        result.flat[alive] = _bernoulli_exp_fraction(rng, frac.flat[alive], den)
    return result


def _geometric_exp_minus_one(rng: np.random.Generator, size: int) -> np.ndarray:
    """V with P(V = v) = (1 − e^{−1})·e^{−v}: the number of Bernoulli(e^{−1}) successes
    before the first failure. Trials are drawn in blocks of 2 per coordinate (one numpy call
    for the whole batch); a coordinate whose 2 trials both succeed (prob. e^{−2}) continues."""
    v = np.zeros(size, dtype=np.int64)
    idx = np.arange(size)
    while idx.size:
        failed = ~bernoulli_exp_minus_one(rng, idx.size * 2).reshape(idx.size, 2)
        stopped = failed.any(axis=1)
        v[idx] += np.where(stopped, np.argmax(failed, axis=1), 2)
        idx = idx[~stopped]
    return v


def _discrete_laplace_round(rng: np.random.Generator, n: int, s: int, t: int) -> np.ndarray:
    """One round of CKS Algorithm 2 for n candidates; rejected ones are returned as None-mask."""
    u = rng.integers(0, t, size=n)
    keep = _bernoulli_exp_fraction(rng, u, t)
    u = u[keep]
    v = _geometric_exp_minus_one(rng, u.size)
    x = u + t * v
    y = x // s
    b = rng.integers(0, 2, size=y.size).astype(bool)
    ok = ~(b & (y == 0))
    signed: np.ndarray = np.where(b, -y, y)[ok]
    return signed


def discrete_laplace(rng: np.random.Generator, scale: Fraction, size: int | tuple[int, ...]) -> np.ndarray:
    """Exact samples with P(Z = z) ∝ exp(−|z|/scale), scale = t/s rational (CKS Algorithm 2).

    Returns an int64 array of the requested shape.
    """
    scale = Fraction(scale)
    t, s = scale.numerator, scale.denominator
    if t <= 0:
        raise ValueError("scale must be positive")
    if t >= _INT64_SAFE >> 10:
        raise ValueError("scale numerator too large for exact int64 sampling")
    shape = (size,) if isinstance(size, int) else tuple(size)
    total = int(np.prod(shape, dtype=np.int64))
    out = np.empty(total, dtype=np.int64)
    filled = 0
    # acceptance per candidate: E[e^{−U/t}] ≥ 1 − e^{−1}, times P(not the rejected −0)
    rate = (1.0 - math.exp(-1.0)) * (1.0 - 0.5 * (1.0 - math.exp(-s / t)))
    while filled < total:
        need = total - filled
        got = _discrete_laplace_round(rng, int(need / rate * 1.05) + 32, s, t)[:need]
        out[filled : filled + got.size] = got
        filled += got.size
    return out.reshape(shape)


def _gaussian_parameters(sigma2: Fraction) -> tuple[int, int, int]:
    n, d = sigma2.numerator, sigma2.denominator
    m = max(1, math.isqrt(n // d))
    return n, d, m


def discrete_gaussian(rng: np.random.Generator, sigma2: Fraction, size: int | tuple[int, ...]) -> np.ndarray:
    """Exact samples with P(Z = z) ∝ exp(−z²/(2σ²)), σ² = n/d rational (CKS Algorithm 3).

    Y ~ discrete Laplace with scale τ, accepted with probability exp(−(|Y| − σ²/τ)²/(2σ²)).
    The product exp(−|y|/τ)·exp(−(|y| − σ²/τ)²/(2σ²)) = exp(−y²/(2σ²) − σ²/(2τ²)) is ∝ the
    target for *any* τ > 0 (CKS Theorem 6's proof). CKS take τ = ⌊σ⌋ + 1; we take the
    rational τ = σ²/m with the integer centre m = max(1, ⌊σ⌋), so the exponent is the
    rational (|Y| − m)²·d/(2n) with no τ² in the denominator — this keeps every product in
    int64 for σ up to 2^24 without changing the distribution or, to first order, the
    acceptance rate.
    """
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError("sigma² must be positive")
    n, d, m = _gaussian_parameters(sigma2)
    if 2 * n >= _INT64_SAFE >> 10:
        raise ValueError("sigma² too large for exact int64 sampling")
    tau = Fraction(n, d * m)
    shape = (size,) if isinstance(size, int) else tuple(size)
    total = int(np.prod(shape, dtype=np.int64))
    out = np.empty(total, dtype=np.int64)
    filled = 0
    den = 2 * n
    limit = math.isqrt((_INT64_SAFE >> 1) // d)
    lap_rate = (1.0 - math.exp(-1.0)) * (1.0 - 0.5 * (1.0 - math.exp(-1.0 / float(tau))))
    # acceptance of the Gaussian step (≈ 0.73–0.76 measured for σ ≥ 1); re-estimated per round
    rate = 0.7 if n >= d else 0.3
    while filled < total:
        need = total - filled
        y = _discrete_laplace_round(rng, int(need / (rate * lap_rate) * 1.05) + 32, tau.denominator, tau.numerator)
        dist = np.abs(np.abs(y) - m)
        small = dist < limit
        accept = np.zeros(y.size, dtype=bool)
        sidx = np.flatnonzero(small)
        accept[sidx] = bernoulli_exp(rng, dist[sidx] * dist[sidx] * d, den)
        for i in np.flatnonzero(~small):  # |Y| beyond ~2^30: exact with Python integers
            accept[i] = bernoulli_exp_exact(rng, int(dist[i]) ** 2 * d, den)
        if y.size:
            rate = max(0.05, float(accept.mean()))
        got = y[accept][:need]
        out[filled : filled + got.size] = got
        filled += got.size
    return out.reshape(shape)


def bernoulli_exp_exact(rng: np.random.Generator, num: int, den: int) -> bool:
    """One Bernoulli(exp(−num/den)) draw for Python integers num ≥ 0, den > 0 of any size (CKS 2020,
    Algorithm 1: ⌊γ⌋ Bernoulli(e^−1) successes, then Bernoulli(e^−frac) by the alternating series).

    :func:`discrete_gaussian` uses it for the rare |Y| whose exponent would overflow int64."""
    whole, frac = divmod(num, den)
    for _ in range(whole):
        if not bool(bernoulli_exp_minus_one(rng, 1)[0]):
            return False
    k = 1
    while True:
        # Bernoulli(frac/(den·k)) with an exact big-integer uniform draw
        if uniform_below(rng, den * k) >= frac:
            return k % 2 == 1
        k += 1


def uniform_below(rng: np.random.Generator, bound: int) -> int:
    """An exact uniform integer on {0, …, bound − 1} for a Python-int ``bound`` ≥ 1 of any size
    (``bound.bit_length()`` random bits, rejected until below ``bound``)."""
    bits = bound.bit_length()
    while True:
        words = rng.integers(0, 1 << 32, size=(bits + 31) // 32, dtype=np.uint64)
        value = 0
        for w in words:
            value = (value << 32) | int(w)
        value >>= 32 * len(words) - bits
        if value < bound:
            return value

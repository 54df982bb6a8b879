"""zCDP conversions: docs/algorithms.md A4/A6 [derived] numbers."""

from __future__ import annotations

import pytest

from dpch.mechanisms.zcdp import (
    dp_to_zcdp_rho,
    exponential_mechanism_rho,
    rho_max,
    zcdp_to_dp_epsilon,
)


def test_rho_max_a6_numbers():
    """docs/algorithms.md A6: ρ_max(10, 1e-6) = 1.353015 (2ρ = 2.706029 ≈ 000's Σε² ≈ 2.705),
    ρ_max(1, 1e-6) = 0.0174689 — the form ρ + 2√(ρ log(1/δ'')) of Rogers et al. 2023, Thm 2/Lemma 2.3."""
    assert rho_max(10.0, 1e-6) == pytest.approx(1.353015, abs=5e-7)
    assert 2 * rho_max(10.0, 1e-6) == pytest.approx(2.706029, abs=1e-6)
    assert rho_max(1.0, 1e-6) == pytest.approx(0.0174689, abs=5e-8)


def test_rho_max_inverts_conversion():
    for eps, d in [(10.0, 1e-6), (1.0, 1e-6), (0.3, 1e-9)]:
        for printed in (False, True):
            r = rho_max(eps, d, printed_theorem_6=printed)
            assert zcdp_to_dp_epsilon(r, d, printed_theorem_6=printed) == pytest.approx(eps)


def test_printed_theorem_6_is_more_conservative():
    """Rogers et al. 2023, Thm 6's printed 2√(2ρ log) admits less ρ than the proof's 2√(ρ log)."""
    assert rho_max(10.0, 1e-6, printed_theorem_6=True) < rho_max(10.0, 1e-6)


def test_simple_conversions():
    assert dp_to_zcdp_rho(0.5) == pytest.approx(0.125)
    assert exponential_mechanism_rho(0.1) == pytest.approx(0.00125)

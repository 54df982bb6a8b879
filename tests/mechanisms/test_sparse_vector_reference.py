"""The in-memory fully adaptive Gaussian sparse vector (``dpch.mechanisms.svt.GaussianSparseVector``) is the
reference the durable watches (``dpch/accounting/watches.py``) implement; these tests pin its accounting
(issue 31: its ``close()`` and ``cost`` were unpinned, three mutants survived).

Lebensold et al. 2024, Alg 2/4, Thm 17/19 and the B9 correction (docs/algorithms.md): a ⊤ at position t
costs ε_post(t); an instance still open when the session ends is charged its ex-ante ε_max; δ is Σ δ_j over
the instances opened; the filter halts before an instance that could overspend ε.
"""

from __future__ import annotations

import pytest

from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.svt import BudgetExhausted, GaussianSparseVector


def _svt() -> GaussianSparseVector:
    return GaussianSparseVector(epsilon=1.0, delta=1e-3, delta_per_instance=1e-5, sigma_x=0.15,
                                sensitivity=0.001, threshold=0.5)


def test_an_open_instance_is_charged_its_ex_ante_epsilon_max_in_cost_and_at_close():
    source = NoiseSource(seed=7)
    svt = _svt()
    eps_max = svt.instance.epsilon_max
    assert not svt.test(-1e6, source)  # far below the threshold: ⊥, the instance stays open
    assert svt.spent == 0.0
    cost = svt.cost
    assert cost.epsilon == pytest.approx(eps_max, rel=1e-12)
    assert cost.delta == pytest.approx(1e-5, rel=1e-12)
    assert cost.ex_post and cost.worst_epsilon == 1.0
    svt.close()
    assert svt.spent == pytest.approx(eps_max, rel=1e-12), "close() charges the open instance ε_max"
    assert svt.cost.epsilon == pytest.approx(eps_max, rel=1e-12), "and charges it once, not twice"
    with pytest.raises(BudgetExhausted):
        svt.test(1e6, source)


def test_a_top_costs_epsilon_post_of_its_position_and_closes_the_instance():
    source = NoiseSource(seed=8)
    svt = _svt()
    for _ in range(3):
        assert not svt.test(-1e6, source)
    assert svt.test(1e6, source)  # far above: ⊤ at position 4 of the instance
    expected = svt.instance.epsilon_post(4)
    assert svt.spent == pytest.approx(expected, rel=1e-12)
    assert svt.cost.epsilon == pytest.approx(expected, rel=1e-12), "no open instance after a ⊤"
    svt.close()
    assert svt.spent == pytest.approx(expected, rel=1e-12), "closing with no open instance charges nothing"
    assert svt.instances == 1 and svt.halted


def test_a_fresh_filter_costs_nothing():
    svt = _svt()
    assert svt.cost.epsilon == 0.0 and svt.cost.delta == 0.0


def test_the_answers_range_defaults_to_zero_one():
    """Without ``lower`` and ``upper`` the answers are taken in [0, 1] (Thm 17's ε_post depends on the
    range's width): the instance's range and its ex-post cost are those of [0, 1] given explicitly, and a
    wider range costs more."""
    default = _svt()
    explicit = GaussianSparseVector(epsilon=1.0, delta=1e-3, delta_per_instance=1e-5, sigma_x=0.15,
                                    sensitivity=0.001, threshold=0.5, lower=0.0, upper=1.0)
    wider = GaussianSparseVector(epsilon=1.0, delta=1e-3, delta_per_instance=1e-5, sigma_x=0.15,
                                 sensitivity=0.001, threshold=0.5, lower=0.0, upper=2.0)
    assert (default.instance.lower, default.instance.upper) == (0.0, 1.0)
    for t in (2, 5, 50):  # (at t = 1 no earlier answer was below the threshold: the range plays no part)
        assert default.instance.epsilon_post(t) == explicit.instance.epsilon_post(t)
        assert wider.instance.epsilon_post(t) > default.instance.epsilon_post(t)

"""Infinite terms in the filters' running sums (issue 31: lines of ``accounting/tally.py`` and
``odometers.py`` no accounting test reached).

Lemma 3.3's δ term of a round is 2δ/(ε e^ε) (Rogers et al. 2016, B5): a round with ε = 0 < δ contributes
an *infinite* term (it can never fit a finite δg'), 0 if δ = 0. :class:`ExactSum` counts infinite terms
apart from its partials, so that adding one makes the total infinite *and* removing it again (a voided
reservation) gives back exactly the finite total — whether the term came through :meth:`ExactSum.add` or
through :meth:`ExactSum.extend` (the rebuild from a history). A tally written by :meth:`Tally.to_data` is
read back only into a tally of the same width.
"""

from __future__ import annotations

import math

import pytest

from dpch.accounting.odometers import lemma_3_3_term
from dpch.accounting.tally import ExactSum, Tally
from dpch.privacy.cost import PrivacyCost


def test_a_round_with_zero_epsilon_and_positive_delta_has_an_infinite_lemma_3_3_term():
    assert lemma_3_3_term(0.0, 1e-9) == math.inf
    assert lemma_3_3_term(0.5, 0.0) == 0.0
    assert lemma_3_3_term(0.5, 1e-6) == pytest.approx(2e-6 / (0.5 * math.exp(0.5)), rel=1e-15)


@pytest.mark.parametrize("through", ["add", "extend"])
def test_an_infinite_term_makes_the_sum_infinite_and_its_removal_restores_it_exactly(through):
    s = ExactSum()
    s.extend([0.1, 0.2, 1e-17])
    finite = s.value()
    assert finite == math.fsum([0.1, 0.2, 1e-17])
    if through == "add":
        s.add(math.inf)
    else:
        s.extend([math.inf, 0.3])
        s.add(0.3, sign=-1)
    assert s.value() == math.inf
    s.add(math.inf, sign=-1)
    assert s.value() == finite
    # the state written and read back keeps the count of infinite terms
    s.add(math.inf)
    assert ExactSum.from_data(s.to_data()).value() == math.inf


def test_a_tally_is_read_back_only_at_its_own_width():
    def features(cost: PrivacyCost) -> tuple[float, float]:
        return (cost.epsilon, cost.delta)

    t = Tally(features, 2)
    t.add(PrivacyCost(0.5, 1e-7))
    again = Tally(features, 2).load(t.to_data())
    assert (again.total(0), again.total(1), again.count) == (0.5, 1e-7, 1)
    with pytest.raises(ValueError, match="a tally of 2 sums cannot be read as one of 3"):
        Tally(lambda c: (c.epsilon, c.delta, 0.0), 3).load(t.to_data())

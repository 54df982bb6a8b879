"""A data owner's filter options reach the filter that admits the analyst's queries (issue 31,
"Privacy-relevant survivors": ``accountant.py``, ``top.options or {}`` → ``top.options and {}``
dropped every option the owner set with ``dpch budget set --filter … --filter-option …``).

Each test sets the budget row through a session's accountant (the data owner's action), then
asks a query on real chdb whose admission *only the option explains*, with a control analyst
whose row has the same budget and filter but no option, and who gets the other answer:

- ``zcdp`` with ``conversion_delta_share`` = 0.001: the ρ budget is ρ_max(ε, 0.001·δ)
  (Rogers et al. 2023, Thm 2; docs/algorithms.md A4), smaller than the default share's
  ρ_max(ε, 0.5·δ); a Laplace query whose ε²/2 lies between the two is refused, words and all,
  and nothing is charged — the control admits it.
- ``advanced`` with ``approx_delta_share`` = 0.5: (ε, δ) releases are admitted by Lemma 3.3;
  a Gaussian query is charged its (ε, δ) — the control refuses it as a pure-ε filter.

ρ_max is computed here from its closed form (√ρ = √(L + ε) − √L, L = log(1/δ'')), not by the code
under test.
"""

from __future__ import annotations

import math
import re

import pytest

from dpch.accounting.budget import Budget
from dpch.errors import BudgetExceeded
from tests.helpers import ledger_rows, make_table

EPSILON, DELTA = 1.0, 1e-6
SMALL_SHARE = 0.001
DEFAULT_SHARE = 0.5  # ZCDPFilter's default conversion_delta_share
SQL = "SELECT count() FROM t"


def _rho_max(epsilon: float, delta_conv: float) -> float:
    """Largest ρ with ρ + 2√(ρ log(1/δ'')) ≤ ε (Bun & Steinke 2016, Prop 1.3, solved for √ρ)."""
    big_l = math.log(1.0 / delta_conv)
    return (math.sqrt(big_l + epsilon) - math.sqrt(big_l)) ** 2


def _owner_sets(connect, analyst: str, budget: Budget, filter_name: str, options: dict | None):
    session = connect(analyst=analyst, default_budget=None)
    session.accountant.set_budget(budget, filter=filter_name, filter_options=options)
    return session


@pytest.fixture
def table(connect):
    """The private table (one session creates it; the others read it from the same database)."""
    s = connect(analyst="loader")
    make_table(s, "uid UInt64", [(u,) for u in range(1, 21)], ["uid"], comment="dp: privacy_unit=uid, "
               "max_rows_per_unit=1")
    return "t"


def test_the_cases_discriminate():
    """Negative control on the numbers: the two shares give ρ budgets far enough apart for a query between."""
    small, default = _rho_max(EPSILON, SMALL_SHARE * DELTA), _rho_max(EPSILON, DEFAULT_SHARE * DELTA)
    assert small < 0.9 * default
    eps_q = math.sqrt(small + default)  # ρ = ε_q²/2 is the midpoint
    assert small < eps_q**2 / 2 < default


def test_the_owners_conversion_delta_share_sets_the_rho_budget(connect, table):
    small, default = _rho_max(EPSILON, SMALL_SHARE * DELTA), _rho_max(EPSILON, DEFAULT_SHARE * DELTA)
    eps_q = math.sqrt(small + default)
    owned = _owner_sets(connect, "zcdp_share", Budget(EPSILON, DELTA), "zcdp",
                        {"conversion_delta_share": SMALL_SHARE})
    status = owned.budget()
    assert status.filter == "zcdp"
    assert status.remaining.rho == pytest.approx(small, rel=1e-12)
    before = ledger_rows(owned)
    with pytest.raises(BudgetExceeded, match="the query needs ρ") as info:
        owned.query(SQL, epsilon=eps_q)
    words = re.search(r"the query needs ρ (\S+) \(zCDP\) but only ρ (\S+) of (\S+) is left", str(info.value))
    assert words is not None, str(info.value)
    need, left, total = (float(v) for v in words.groups())
    assert need == pytest.approx(eps_q**2 / 2, rel=1e-5)
    assert left == pytest.approx(small, rel=1e-5) and total == pytest.approx(small, rel=1e-5)
    assert ledger_rows(owned) == before, "a refused query is not charged"

    control = _owner_sets(connect, "zcdp_default", Budget(EPSILON, DELTA), "zcdp", None)
    assert control.budget().remaining.rho == pytest.approx(default, rel=1e-12)
    release = control.query(SQL, epsilon=eps_q)
    assert release.cost.epsilon == pytest.approx(eps_q)
    assert control.budget().remaining.rho == pytest.approx(default - eps_q**2 / 2, rel=1e-9)


def test_the_owners_approx_delta_share_admits_approximate_releases(connect, table):
    budget, eps_q, delta_q = Budget(10.0, DELTA), 0.1, 1e-8
    # Lemma 3.3 (B5) on the δ left for (ε, δ) rounds: 2δ/(ε e^ε) ≤ δg' = 0.5·δ
    assert 2 * delta_q / (eps_q * math.exp(eps_q)) <= DEFAULT_SHARE * DELTA
    owned = _owner_sets(connect, "adv_share", budget, "advanced", {"approx_delta_share": 0.5})
    before = ledger_rows(owned)
    release = owned.query(SQL, epsilon=eps_q, delta=delta_q)
    assert (release.cost.epsilon, release.cost.delta) == (pytest.approx(eps_q), pytest.approx(delta_q))
    assert ledger_rows(owned) == before + 1
    assert owned.budget().remaining.delta == pytest.approx(
        DEFAULT_SHARE * DELTA - 2 * delta_q / (eps_q * math.exp(eps_q)), rel=1e-9)

    control = _owner_sets(connect, "adv_default", budget, "advanced", None)
    before = ledger_rows(control)
    with pytest.raises(BudgetExceeded, match=r"configured for pure ε releases \(δ = 0\); this one needs δ 1e-08"):
        control.query(SQL, epsilon=eps_q, delta=delta_q)
    assert ledger_rows(control) == before

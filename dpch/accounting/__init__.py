"""Accounting: privacy filters, per-analyst budgets, and the ledger persisted in ClickHouse.

- :mod:`.budget` — budgets (ε, δ) per analyst, stored in ``dpch_budgets``, and how they renew; an
  analyst without one is refused (``NoBudgetSet``).
- :mod:`.periods` — the UTC calendar periods a renewing budget restarts in (daily, weekly, monthly).
- :mod:`.filters` — filters decide, from requested costs and past charges only, whether the next
  release may run (basic, pure, advanced, zcdp, zcdp_bm, ex_post, pure_ex_post, mixed).
- :mod:`.odometers` — 001's advanced-composition filter bound and odometers.
- :mod:`.tally` — running, fsum-exact sums of a history, so admission and status cost the same at
  any number of past releases.
- :mod:`.ledger` — the append-only ``dpch_ledger`` table; the filter state is a function of it.
- :mod:`.accountant` — admission: one lock per analyst in the process, charge durable before
  any noise is drawn.
"""

from dpch.accounting.accountant import Accountant, BudgetStatus, Reservation
from dpch.accounting.budget import Budget, NoBudgetSet, Renewal
from dpch.accounting.filters import FILTERS, BasicCompositionFilter, Decision, PrivacyFilter, make_filter

__all__ = ["FILTERS", "Accountant", "BasicCompositionFilter", "Budget", "BudgetStatus", "Decision",
           "NoBudgetSet", "PrivacyFilter", "Renewal", "Reservation", "make_filter"]

"""Accounting: privacy filters, per-analyst budgets, and the ledger persisted in ClickHouse.

- :mod:`.budget` — budgets (ε, δ) per analyst, stored in ``dpch_budgets``.
- :mod:`.filters` — filters decide, from requested costs and past charges only, whether the next
  release may run.
- :mod:`.ledger` — the append-only ``dpch_ledger`` table; the filter state is a function of it.
- :mod:`.accountant` — admission: one lock per analyst in the process, charge durable before
  any noise is drawn.
"""

from dpch.accounting.accountant import Accountant, BudgetStatus
from dpch.accounting.budget import Budget
from dpch.accounting.filters import BasicCompositionFilter, Decision, PrivacyFilter

__all__ = ["Accountant", "BasicCompositionFilter", "Budget", "BudgetStatus", "Decision", "PrivacyFilter"]

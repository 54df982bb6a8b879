"""Stage 4, admit: the filter decides from the requested cost and past charges only (docs/design.md
rule 1), and the charge is durable in the ledger before any noise is drawn and before anything the
query did is acted on (rule 2). Every private table the plan reads is its own dataset scope (rule 8).

:func:`begin_charge` decides and starts the ledger write, so the aggregate (stage 5) runs while the
row is written; the release waits for it (:meth:`PendingCharge.wait`) before stage 6 draws noise.
:func:`charge` decides and returns once the row is durable."""

from __future__ import annotations

from dpch.accounting.accountant import Accountant, PendingCharge, Reservation, qualified_datasets
from dpch.accounting.ledger import LedgerEntry
from dpch.errors import BudgetExceeded
from dpch.privacy.cost import PrivacyCost
from dpch.sql.analyze import QueryPlan


def datasets(database: str, plan: QueryPlan) -> tuple[str, ...]:
    """The dataset scopes (``db.table``) ``plan`` is admitted by and charged to: each private
    table it reads, once."""
    return qualified_datasets(database, plan.relation.datasets)


def admissible(accountant: Accountant, cost: PrivacyCost, scopes: tuple[str, ...]) -> tuple[bool, str]:
    """Whether ``cost`` would be admitted now, and why not (spends nothing; for EXPLAIN)."""
    try:
        accountant.check(cost, datasets=scopes)
    except BudgetExceeded as exc:
        return False, exc.message
    return True, "within budget"


def charge(accountant: Accountant, cost: PrivacyCost, scopes: tuple[str, ...], plan: QueryPlan,
           mechanism: str) -> LedgerEntry:
    """Admits and durably charges a fixed-cost release, or raises :class:`BudgetExceeded`."""
    return accountant.charge(cost, datasets=scopes, query_hash=plan.query.fingerprint, mechanism=mechanism)


def begin_charge(accountant: Accountant, cost: PrivacyCost, scopes: tuple[str, ...], plan: QueryPlan,
                 mechanism: str) -> PendingCharge:
    """Admits a fixed-cost release (or raises :class:`BudgetExceeded`, nothing written) and starts
    its durable ledger write; wait on the result before drawing noise."""
    return accountant.begin_charge(cost, datasets=scopes, query_hash=plan.query.fingerprint, mechanism=mechanism)


def reserve(accountant: Accountant, worst: PrivacyCost, scopes: tuple[str, ...], query_hash: str,
            mechanism: str) -> Reservation:
    """Admits a release on its worst case and durably reserves it (settled with its realized cost)."""
    return accountant.reserve(worst, datasets=scopes, query_hash=query_hash, mechanism=mechanism)

"""The ledger: an append-only table ``dpch_ledger`` with one row per release (or per step).

Every admitted release writes its charge here *before* any noise is drawn, so a crash loses
budget, never privacy (docs/design.md rule 2). Protocol:

- a fixed-cost release writes ONE row, status ``charged`` (reserve and charge in one row:
  its cost is known in advance);
- a release whose cost is known only afterwards (ex post: noise reduction, Above Threshold)
  writes ``reserved`` at its worst case (seq 1) before it runs, then ``charged`` at the realized
  cost or ``voided`` (seq 2) under the same ``release_id``;
- a release that fails after its charge (the tripwire, docs/design.md rule 5) gets a ``failed`` row
  (seq 3, always the latest) that still counts what the release counted: its charge, or a
  reservation's worst case. A failed release may have read data, so it is never refunded.

A release's ``datasets`` are every private table it read (``db.table``; a join names each, a
self-join one): each one's dataset budget admits and counts it (docs/design.md rule 8). ``dataset``
is their display form. Rows written before ``datasets`` existed count for ``[dataset]``.

The filter state is a pure function of these rows: a release counts at its latest row, and a
reservation never settled (the process died between reserve and charge) counts at its worst
case forever.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine

LEDGER_TABLE = "dpch_ledger"
#: the seq of a ``failed`` row: above ``charged``/``voided`` (2), so it is always the latest word
FAILED_SEQ = 3


@dataclass(frozen=True)
class LedgerEntry:
    """One release as the ledger records it (its latest row)."""

    release_id: str
    time: datetime
    analyst: str
    dataset: str
    query_hash: str
    mechanism: str
    status: str
    cost: PrivacyCost
    worst: PrivacyCost
    filter: str = ""
    datasets: tuple[str, ...] = ()

    @property
    def scopes(self) -> tuple[str, ...]:
        """The dataset scopes this release counts in (``[dataset]`` for rows older than ``datasets``)."""
        if self.datasets:
            return self.datasets
        return (self.dataset,) if self.dataset else ()

    @property
    def counted(self) -> PrivacyCost:
        """What this release counts for in the filter: a reservation at its worst case."""
        if self.status == "voided":
            return PrivacyCost.zero()
        if self.status == "reserved":
            w = self.worst
            return PrivacyCost(w.epsilon, w.delta, w.rho, ex_post=self.cost.ex_post,
                               worst_epsilon=w.epsilon, worst_rho=w.rho, rho_delta=w.rho_delta)
        return self.cost


def worst_of(cost: PrivacyCost) -> PrivacyCost:
    """The worst case a request can cost, as stored in the ``worst_*`` columns."""
    if not cost.ex_post:
        return PrivacyCost(cost.epsilon, cost.delta, cost.rho, rho_delta=cost.rho_delta)
    eps = cost.worst_epsilon if cost.worst_epsilon is not None else cost.epsilon
    rho = cost.worst_rho if cost.worst_rho is not None else cost.rho
    return PrivacyCost(eps, cost.delta, rho, rho_delta=cost.rho_delta if rho is not None else 0.0)


class Ledger:
    """Reads and appends ``dpch_ledger`` rows in the engine's database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.table = engine.table(LEDGER_TABLE)
        engine.command(
            f"CREATE TABLE IF NOT EXISTS {self.table} ("
            " release_id UUID, seq UInt8, time DateTime64(6, 'UTC'),"
            " analyst String, dataset String, query_hash String,"
            " mechanism LowCardinality(String), filter LowCardinality(String),"
            " status LowCardinality(String),"
            " epsilon Float64, delta Float64, rho Nullable(Float64),"
            " worst_epsilon Float64, worst_delta Float64,"
            " worst_rho Nullable(Float64), ex_post Bool DEFAULT false"
            ") ENGINE = MergeTree ORDER BY (analyst, time, release_id, seq)"
            " COMMENT 'dpch: privacy ledger (append-only; never edit by hand)'"
        )
        # ledgers created before ex-post releases, and before joins counted per dataset
        engine.command(
            f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS worst_rho Nullable(Float64),"
            " ADD COLUMN IF NOT EXISTS ex_post Bool DEFAULT false,"
            " ADD COLUMN IF NOT EXISTS datasets Array(String) DEFAULT [],"
            # the δ of a release's zCDP view (δ-approximate ρ-zCDP; PrivacyCost.rho_delta): 0 for rows
            # written before it existed, which is right for them (only ρ-zCDP mechanisms had a ρ)
            " ADD COLUMN IF NOT EXISTS rho_delta Float64 DEFAULT 0"
        )

    def _new(self, status: str, *, analyst: str, datasets: tuple[str, ...], query_hash: str, mechanism: str,
             filter_name: str, cost: PrivacyCost) -> LedgerEntry:
        return LedgerEntry(
            release_id=str(uuid.uuid4()), time=datetime.now(UTC), analyst=analyst, dataset="+".join(datasets),
            query_hash=query_hash, mechanism=mechanism, status=status, cost=cost, worst=worst_of(cost),
            filter=filter_name, datasets=datasets,
        )

    def charge(self, *, analyst: str, datasets: tuple[str, ...], query_hash: str, mechanism: str,
               filter_name: str, cost: PrivacyCost) -> LedgerEntry:
        """Appends one durable ``charged`` row for a fixed-cost release (one INSERT) and returns it."""
        entry = self._new("charged", analyst=analyst, datasets=datasets, query_hash=query_hash,
                          mechanism=mechanism, filter_name=filter_name, cost=cost)
        self.engine.insert_row(LEDGER_TABLE, self._row(entry, 1))
        return entry

    def reserve(self, *, analyst: str, datasets: tuple[str, ...], query_hash: str, mechanism: str,
                filter_name: str, worst: PrivacyCost) -> LedgerEntry:
        """Appends one durable ``reserved`` row at the worst case (seq 1)."""
        entry = self._new("reserved", analyst=analyst, datasets=datasets, query_hash=query_hash,
                          mechanism=mechanism, filter_name=filter_name, cost=worst)
        self.engine.insert_row(LEDGER_TABLE, self._row(entry, 1))
        return entry

    def settle(self, reserved: LedgerEntry, realized: PrivacyCost | None) -> LedgerEntry:
        """Appends the ``charged`` (``realized`` given) or ``voided`` row (seq 2) of a reservation."""
        if realized is None:
            entry = replace(reserved, status="voided", time=datetime.now(UTC))
        else:
            # as the ledger will read it back: the reservation's kind and worst case, the realized cost
            ex_post = reserved.cost.ex_post
            cost = PrivacyCost(realized.epsilon, realized.delta, realized.rho, ex_post=ex_post,
                               worst_epsilon=reserved.worst.epsilon if ex_post else None,
                               worst_rho=reserved.worst.rho if ex_post else None, rho_delta=realized.rho_delta)
            entry = replace(reserved, status="charged", cost=cost, time=datetime.now(UTC))
        self.engine.insert_row(LEDGER_TABLE, self._row(entry, 2))
        return replace(entry, time=reserved.time)

    def fail(self, entry: LedgerEntry) -> LedgerEntry:
        """Appends the ``failed`` row (seq 3) of a release that failed after its charge.

        It counts what the release counted (a reservation: its worst case): the release may
        have read data before it failed, so failing refunds nothing.
        """
        failed = replace(entry, status="failed", cost=entry.counted, time=datetime.now(UTC))
        self.engine.insert_row(LEDGER_TABLE, self._row(failed, FAILED_SEQ))
        return replace(failed, time=entry.time)

    @staticmethod
    def _row(entry: LedgerEntry, seq: int) -> dict[str, tuple[str, object]]:
        return {
            "release_id": ("UUID", entry.release_id),
            "seq": ("UInt8", seq),
            "time": ("DateTime64(6, 'UTC')", entry.time.strftime("%Y-%m-%d %H:%M:%S.%f")),
            "analyst": ("String", entry.analyst),
            "dataset": ("String", entry.dataset),
            "query_hash": ("String", entry.query_hash),
            "mechanism": ("String", entry.mechanism),
            "filter": ("String", entry.filter),
            "status": ("String", entry.status),
            "epsilon": ("Float64", entry.cost.epsilon),
            "delta": ("Float64", entry.cost.delta),
            "rho": ("Nullable(Float64)", entry.cost.rho),
            "worst_epsilon": ("Float64", entry.worst.epsilon),
            "worst_delta": ("Float64", entry.worst.delta),
            "worst_rho": ("Nullable(Float64)", entry.worst.rho),
            "ex_post": ("Bool", entry.cost.ex_post),
            "datasets": ("Array(String)", list(entry.datasets)),
            "rho_delta": ("Float64", entry.cost.rho_delta),
        }

    def entries(self, analyst: str) -> list[LedgerEntry]:
        """Every release of ``analyst`` at its latest row, oldest first."""
        rows = self.engine.query_rows(
            "SELECT toString(release_id), min(time), any(analyst), argMax(dataset, seq),"
            " argMax(query_hash, seq), argMax(mechanism, seq), argMax(status, seq),"
            # argMax skips NULL arguments: a latest row with rho NULL would read back the reservation
            # row's rho; wrapped in a tuple, NULL is a value and the latest row wins as in memory
            " argMax(epsilon, seq), argMax(delta, seq), argMax(tuple(rho), seq).1,"
            " argMax(worst_epsilon, seq), argMax(worst_delta, seq), argMax(tuple(worst_rho), seq).1,"
            " max(ex_post), argMax(filter, seq), argMax(datasets, seq), argMax(rho_delta, seq)"
            f" FROM {self.table} WHERE analyst = {{a:String}}"
            " GROUP BY release_id ORDER BY min(time), release_id",
            {"a": analyst},
        )
        result = []
        for r in rows:
            ex_post = bool(r[13])
            rho_delta = float(r[16]) if r[9] is not None else 0.0
            worst = PrivacyCost(r[10], r[11], r[12], rho_delta=rho_delta if r[12] is not None else 0.0)
            cost = PrivacyCost(r[7], r[8], r[9], ex_post=ex_post,
                               worst_epsilon=r[10] if ex_post else None, worst_rho=r[12] if ex_post else None,
                               rho_delta=rho_delta)
            result.append(LedgerEntry(
                release_id=r[0], time=r[1], analyst=r[2], dataset=r[3], query_hash=r[4],
                mechanism=r[5], status=r[6], cost=cost, worst=worst, filter=r[14], datasets=tuple(r[15]),
            ))
        return result

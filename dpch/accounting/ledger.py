"""The ledger: an append-only table ``dpch_ledger`` with one row per release (or per step).

Every admitted release writes its charge here *before* any noise is drawn, so a crash loses
budget, never privacy (DESIGN.md rule 2). A fixed-cost release writes one row with status
``charged``; mechanisms whose cost is known only afterwards write ``reserved`` (at the worst
case) first and ``charged`` or ``voided`` later under the same ``release_id`` (``seq`` orders
them). The filter state is a pure function of these rows: a release counts at its latest row,
and a reservation never settled counts at its worst case.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from dpch.engine import Engine
from dpch.mechanisms.cost import PrivacyCost

LEDGER_TABLE = "dpch_ledger"


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

    @property
    def counted(self) -> PrivacyCost:
        """What this release counts for in the filter."""
        if self.status == "voided":
            return PrivacyCost.zero()
        if self.status == "reserved":
            return self.worst
        return self.cost


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
            " worst_epsilon Float64, worst_delta Float64"
            ") ENGINE = MergeTree ORDER BY (analyst, time, release_id, seq)"
            " COMMENT 'dpch: privacy ledger (append-only; never edit by hand)'"
        )

    def charge(
        self,
        *,
        analyst: str,
        dataset: str,
        query_hash: str,
        mechanism: str,
        filter_name: str,
        cost: PrivacyCost,
    ) -> LedgerEntry:
        """Appends one durable ``charged`` row for a fixed-cost release and returns it."""
        entry = LedgerEntry(
            release_id=str(uuid.uuid4()),
            time=datetime.now(UTC),
            analyst=analyst,
            dataset=dataset,
            query_hash=query_hash,
            mechanism=mechanism,
            status="charged",
            cost=cost,
            worst=cost,
        )
        self.engine.insert_row(LEDGER_TABLE, self._row(entry, 1, filter_name))
        return entry

    @staticmethod
    def _row(entry: LedgerEntry, seq: int, filter_name: str) -> dict[str, tuple[str, object]]:
        return {
            "release_id": ("UUID", entry.release_id),
            "seq": ("UInt8", seq),
            "time": ("DateTime64(6, 'UTC')", entry.time.strftime("%Y-%m-%d %H:%M:%S.%f")),
            "analyst": ("String", entry.analyst),
            "dataset": ("String", entry.dataset),
            "query_hash": ("String", entry.query_hash),
            "mechanism": ("String", entry.mechanism),
            "filter": ("String", filter_name),
            "status": ("String", entry.status),
            "epsilon": ("Float64", entry.cost.epsilon),
            "delta": ("Float64", entry.cost.delta),
            "rho": ("Nullable(Float64)", entry.cost.rho),
            "worst_epsilon": ("Float64", entry.worst.epsilon),
            "worst_delta": ("Float64", entry.worst.delta),
        }

    def entries(self, analyst: str) -> list[LedgerEntry]:
        """Every release of ``analyst`` at its latest row, oldest first."""
        rows = self.engine.query_rows(
            "SELECT toString(release_id), min(time), any(analyst), argMax(dataset, seq),"
            " argMax(query_hash, seq), argMax(mechanism, seq), argMax(status, seq),"
            " argMax(epsilon, seq), argMax(delta, seq), argMax(rho, seq),"
            " argMax(worst_epsilon, seq), argMax(worst_delta, seq)"
            f" FROM {self.table} WHERE analyst = {{a:String}}"
            " GROUP BY release_id ORDER BY min(time), release_id",
            {"a": analyst},
        )
        return [
            LedgerEntry(
                release_id=r[0], time=r[1], analyst=r[2], dataset=r[3], query_hash=r[4],
                mechanism=r[5], status=r[6], cost=PrivacyCost(r[7], r[8], r[9]),
                worst=PrivacyCost(r[10], r[11]),
            )
            for r in rows
        ]

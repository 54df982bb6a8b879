"""The ledger: an append-only table ``dpch_ledger`` with one row per release (or per step).

Every admitted release writes its charge here *before* any noise is drawn, so a crash loses
budget, never privacy (docs/design.md rule 2). Durable means ClickHouse has the row (the INSERT
returned): it survives a crash of the dpch process; with ``ledger_fsync`` the table fsyncs every
INSERT, and the row also survives power loss. Rows are literal ``INSERT … VALUES`` text
(:mod:`dpch.store.quoting`), and rows of releases admitted close together share one INSERT
(:mod:`.commit`, group commit). Protocol:

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

A release's ``time`` is its admission time (the time of its first row): under a renewing budget
(:mod:`.periods`) it counts in the period that time falls in, whenever it is settled. Each row
also records that period's label (``period``, "" when the analyst's budget does not renew), so the
ledger keeps every period's rows, each knowing its period.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from dpch.accounting.commit import GroupCommit, PendingWrite
from dpch.accounting.periods import as_utc
from dpch.errors import ConfigError
from dpch.privacy.cost import ZCDP, ApproxDP, PrivacyCost
from dpch.store.engine import Engine
from dpch.store.quoting import quote_string

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
    #: the label of the renewal period it was admitted in ("" when the budget does not renew)
    period: str = ""

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
            # the worst case, as the release's kind, and its own worst case for the next admission
            return PrivacyCost.of_release(self.worst, ex_post=self.cost.ex_post, worst=self.worst)
        return self.cost


#: the ledger's columns as written, (name, ClickHouse type), in :meth:`Ledger.row` order
COLUMNS: tuple[tuple[str, str], ...] = (
    ("release_id", "UUID"), ("seq", "UInt8"), ("time", "DateTime64(6, 'UTC')"), ("analyst", "String"),
    ("dataset", "String"), ("query_hash", "String"), ("mechanism", "String"), ("filter", "String"),
    ("status", "String"), ("epsilon", "Float64"), ("delta", "Float64"), ("rho", "Nullable(Float64)"),
    ("worst_epsilon", "Float64"), ("worst_delta", "Float64"), ("worst_rho", "Nullable(Float64)"),
    ("ex_post", "Bool"), ("datasets", "Array(String)"), ("rho_delta", "Float64"), ("period", "String"),
)

FSYNC_ENV = "DPCH_LEDGER_FSYNC"
#: the MergeTree settings that make an INSERT return only after its part's files and directory are
#: fsynced: the row then survives power loss, not only a crash of the process
FSYNC_SETTINGS = ("fsync_after_insert", "fsync_part_directory")
_FSYNC_SETTING = re.compile(r"\b(fsync_after_insert|fsync_part_directory)\s*=\s*'?(\d)")
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def fsync_from_env() -> bool | None:
    """``$DPCH_LEDGER_FSYNC``: 1/true/yes/on, 0/false/no/off, or None when unset."""
    value = os.environ.get(FSYNC_ENV, "").strip().lower()
    if not value:
        return None
    if value in _TRUE | _FALSE:
        return value in _TRUE
    raise ConfigError(f"${FSYNC_ENV} must be 1 or 0 (true/false), not {value!r}",
                      hint=f"set {FSYNC_ENV}=1 for a ledger that survives power loss")


class Ledger:
    """Reads and appends ``dpch_ledger`` rows in the engine's database.

    Rows are written as literal ``INSERT … VALUES`` by the store's :class:`GroupCommit` (``writer``):
    :meth:`write` queues a row and returns a :class:`PendingWrite` to wait for; :meth:`charge` and
    :meth:`settle` write and wait in one call.

    ``fsync``: True sets the table's ``fsync_after_insert`` and ``fsync_part_directory`` (durable
    against power loss, at a cost per INSERT; docs/filters-and-ledger.md), False clears them, None
    (the default, or ``$DPCH_LEDGER_FSYNC``) leaves the table as it is: the choice is the table's,
    so every process writing the ledger keeps it.
    """

    def __init__(self, engine: Engine, *, fsync: bool | None = None, writer: GroupCommit | None = None) -> None:
        self.engine = engine
        self.table = engine.table(LEDGER_TABLE)
        #: the store's group-commit writer (a test may put a delaying subclass here)
        self.writer = writer if writer is not None else engine.shared.get(GroupCommit)
        engine.create_table(
            LEDGER_TABLE,
            "release_id UUID, seq UInt8, time DateTime64(6, 'UTC'),"
            " analyst String, dataset String, query_hash String,"
            " mechanism LowCardinality(String), filter LowCardinality(String),"
            " status LowCardinality(String),"
            " epsilon Float64, delta Float64, rho Nullable(Float64),"
            " worst_epsilon Float64, worst_delta Float64,"
            " worst_rho Nullable(Float64), ex_post Bool DEFAULT false",
            "ORDER BY (analyst, time, release_id, seq)"
            " COMMENT 'dpch: privacy ledger (append-only; never edit by hand)'")
        # ledgers created before ex-post releases, and before joins counted per dataset
        engine.add_missing_columns(LEDGER_TABLE, [
            ("worst_rho", "Nullable(Float64)"), ("ex_post", "Bool DEFAULT false"),
            ("datasets", "Array(String) DEFAULT []"),
            # the δ of a release's zCDP view (δ-approximate ρ-zCDP; PrivacyCost.rho_delta): 0 for rows
            # written before it existed, which is right for them (only ρ-zCDP mechanisms had a ρ)
            ("rho_delta", "Float64 DEFAULT 0"),
            # the renewal period a release was admitted in ("" for rows written before renewal existed)
            ("period", "String DEFAULT ''")])
        if fsync is None:
            fsync = fsync_from_env()
        if fsync is not None and self.fsync != fsync:
            # altered only when it differs: MODIFY SETTING rewrites the table's metadata (~20 ms)
            flag = int(fsync)
            engine.command(f"ALTER TABLE {self.table}{engine.on_cluster()} MODIFY SETTING "
                           + ", ".join(f"{name} = {flag}" for name in FSYNC_SETTINGS))

    @property
    def fsync(self) -> bool:
        """Whether the ledger table fsyncs every INSERT (both settings on)."""
        rows = self.engine.query_rows(
            "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {t:String}",
            {"db": self.engine.database, "t": LEDGER_TABLE})
        found = dict(_FSYNC_SETTING.findall(rows[0][0] if rows else ""))
        return all(found.get(name) == "1" for name in FSYNC_SETTINGS)

    # -- entries (built in memory; written by write) ----------------------------------------------

    def new_entry(self, status: str, *, analyst: str, datasets: tuple[str, ...], query_hash: str, mechanism: str,
                  filter_name: str, cost: PrivacyCost, time: datetime | None = None, period: str = "") -> LedgerEntry:
        """A new release's first entry (``charged``, or ``reserved`` with ``cost`` its worst case),
        admitted at ``time`` (default now) in renewal period ``period``."""
        return LedgerEntry(
            release_id=str(uuid.uuid4()), time=time or datetime.now(UTC), analyst=analyst,
            dataset="+".join(datasets), query_hash=query_hash, mechanism=mechanism, status=status, cost=cost,
            worst=cost.at_worst(), filter=filter_name, datasets=datasets, period=period,
        )

    @staticmethod
    def settled(reserved: LedgerEntry, realized: PrivacyCost | None, time: datetime | None = None) -> LedgerEntry:
        """The ``charged`` (``realized`` given) or ``voided`` entry (seq 2) closing a reservation,
        its row written at ``time`` (default now)."""
        time = time or datetime.now(UTC)
        if realized is None:
            return replace(reserved, status="voided", time=time)
        # as the ledger will read it back: the reservation's kind and worst case, the realized cost
        ex_post = reserved.cost.ex_post
        cost = PrivacyCost.of_release(realized, ex_post=ex_post, worst=reserved.worst if ex_post else None)
        return replace(reserved, status="charged", cost=cost, time=time)

    @staticmethod
    def failed(entry: LedgerEntry, time: datetime | None = None) -> LedgerEntry:
        """The ``failed`` entry (seq 3) of a release that failed after its charge.

        It counts what the release counted (a reservation: its worst case): the release may
        have read data before it failed, so failing refunds nothing.
        """
        return replace(entry, status="failed", cost=entry.counted, time=time or datetime.now(UTC))

    def write(self, entry: LedgerEntry, seq: int, *, background: bool = False) -> PendingWrite:
        """Queues ``entry``'s row (``seq`` 1 first row, 2 settled, :data:`FAILED_SEQ` failed) for the
        store's next group INSERT; wait on the result before drawing noise. ``background``: start the
        write and return at once (the caller does other work meanwhile), else this thread may write."""
        pending = PendingWrite(self.engine, self.table, COLUMNS, self.row(entry, seq))
        return self.writer.submit(pending, background=background)

    # -- write and wait ------------------------------------------------------------------------------

    def charge(self, *, analyst: str, datasets: tuple[str, ...], query_hash: str, mechanism: str,
               filter_name: str, cost: PrivacyCost) -> LedgerEntry:
        """Appends one durable ``charged`` row for a fixed-cost release and returns it."""
        entry = self.new_entry("charged", analyst=analyst, datasets=datasets, query_hash=query_hash,
                               mechanism=mechanism, filter_name=filter_name, cost=cost)
        self.write(entry, 1).wait()
        return entry

    def settle(self, reserved: LedgerEntry, realized: PrivacyCost | None, time: datetime | None = None) -> LedgerEntry:
        """Appends the durable ``charged`` (``realized`` given) or ``voided`` row (seq 2) of a reservation;
        the entry returned keeps the release's admission time."""
        entry = self.settled(reserved, realized, time)
        self.write(entry, 2).wait()
        return replace(entry, time=reserved.time)

    @staticmethod
    def row(entry: LedgerEntry, seq: int) -> tuple[object, ...]:
        """``entry`` as the values of one ledger row, in :data:`COLUMNS` order."""
        c, w = entry.cost, entry.worst
        return (entry.release_id, seq, entry.time, entry.analyst, entry.dataset, entry.query_hash, entry.mechanism,
                entry.filter, entry.status, c.epsilon, c.delta, c.rho, w.epsilon, w.delta, w.rho, c.ex_post,
                list(entry.datasets), c.rho_delta, entry.period)

    def present(self, keys: list[tuple[str, int]]) -> set[tuple[str, int]]:
        """Which of the rows ``keys`` (release id, seq) the ledger holds."""
        if not keys:
            return set()
        ids = ", ".join(f"toUUID({quote_string(rid)})" for rid in {rid for rid, _ in keys})
        rows = self.engine.query_rows(f"SELECT DISTINCT toString(release_id), seq FROM {self.table}"
                                      f" WHERE release_id IN ({ids})")
        found = {(r[0], int(r[1])) for r in rows}
        return {key for key in keys if key in found}

    def entries(self, analyst: str, limit: int | None = None, *, consistent: bool = False) -> list[LedgerEntry]:
        """Every release of ``analyst`` at its latest row (or its latest ``limit``), oldest first; ``time``
        is its admission time (its first row's: a settle may be written later, in another period).
        ``consistent``: on a cluster, read every row a quorum INSERT wrote, whichever replica answers
        (``select_sequential_consistency``: what a rebuild of the shared admission state needs)."""
        order = " ORDER BY argMin(time, seq), release_id"
        if limit is not None:
            order = f" ORDER BY argMin(time, seq) DESC, release_id DESC LIMIT {int(limit)}"
        settings = " SETTINGS select_sequential_consistency = 1" if consistent and self.engine.cluster else ""
        rows = self.engine.query_rows(
            "SELECT toString(release_id), argMin(time, seq), any(analyst), argMax(dataset, seq),"
            " argMax(query_hash, seq), argMax(mechanism, seq), argMax(status, seq),"
            # argMax skips NULL arguments: a latest row with rho NULL would read back the reservation
            # row's rho; wrapped in a tuple, NULL is a value and the latest row wins as in memory
            " argMax(epsilon, seq), argMax(delta, seq), argMax(tuple(rho), seq).1,"
            " argMax(worst_epsilon, seq), argMax(worst_delta, seq), argMax(tuple(worst_rho), seq).1,"
            " max(ex_post), argMax(filter, seq), argMax(datasets, seq), argMax(rho_delta, seq), argMin(period, seq)"
            f" FROM {self.table} WHERE analyst = {{a:String}}"
            f" GROUP BY release_id{order}{settings}",
            {"a": analyst},
        )
        if limit is not None:
            rows.reverse()
        result = []
        for r in rows:
            ex_post = bool(r[13])
            # one rho_delta column, the cost's: the δ of its ρ, and of the worst case's where both have a ρ
            rho_delta = float(r[16]) if r[9] is not None else 0.0
            worst = PrivacyCost.of(ApproxDP(r[10], r[11]), None if r[12] is None else ZCDP(r[12], rho_delta))
            cost = PrivacyCost.of_release(
                PrivacyCost.of(ApproxDP(r[7], r[8]), None if r[9] is None else ZCDP(r[9], rho_delta)),
                ex_post=ex_post, worst=worst if ex_post else None)
            result.append(LedgerEntry(
                release_id=r[0], time=as_utc(r[1]), analyst=r[2], dataset=r[3], query_hash=r[4],
                mechanism=r[5], status=r[6], cost=cost, worst=worst, filter=r[14], datasets=tuple(r[15]),
                period=r[17],
            ))
        return result

"""Where admission is decided: one analyst's state, changed for every process that shares the budget.

docs/design.md rule 11: admission is decided against state that every dpch process sees. One
interface, :class:`AdmissionStore` — :meth:`~AdmissionStore.run` applies a change (admit and count a
release, settle one, lock, unlock, set a budget) to the analyst's current state, serialised with every
other change to it; :meth:`~AdmissionStore.read` answers from the current state — and three stores:

- :class:`InProcessAdmission` — an embedded store: the process that holds the store (ClickHouse locks
  its directory) is the single admission owner; the state lives in its memory, loaded from the ledger
  once, changed under one lock per analyst (what dpch always did).
- :class:`KeeperAdmission` — a ClickHouse server with Keeper (the default there): the state
  (:class:`~dpch.accounting.chain.ChainState`) is one versioned value per analyst in a KeeperMap table
  (:class:`~dpch.store.keeper.VersionedMap`), and a change is a compare-and-set from the version it
  read. A process that loses the race re-reads and decides again; one that paused (SIGSTOP, a long
  GC) past any timeout cannot commit, since its version is stale. Changes queued in one process
  while a write is in flight are decided together and written as one value (group admission: a
  20-panel dashboard costs about one Keeper write, not 20 retries). Keeper unreachable: the change
  fails with :class:`~dpch.errors.AdmissionUnavailable` — nothing admitted (fail closed).
- :class:`OwnerAdmission` — a server without Keeper: one admission owner per ledger, as the in-process
  store, claimed in the database at first use; a second process finds the claim alive and is refused
  loudly (:class:`~dpch.errors.StoreLocked`). Without Keeper this is best effort (a claim is a lease,
  and a lease alone cannot fence a process that pauses past it): docs/serving.md says so.

``$DPCH_ADMISSION`` (``auto``, ``keeper``, ``owner``) or ``dpch serve``'s ``admission`` chooses on a
server; ``auto`` uses Keeper when the server has it, and once a database's admission table exists in
Keeper, ``auto`` never falls back to ``owner`` for it.
"""

from __future__ import annotations

import contextvars
import os
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from dpch.accounting.chain import ChainState
from dpch.accounting.commit import PendingWrite
from dpch.accounting.locks import AnalystLock
from dpch.accounting.periods import as_utc
from dpch.accounting.state import AnalystState, AnalystStates
from dpch.errors import AdmissionUnavailable, ConfigError, StoreLocked
from dpch.store.engine import Engine
from dpch.store.keeper import MODE_ENV, MODES, WRITERS, KeeperNotConfigured, Versioned, VersionedMap, new_token
from dpch.store.quoting import insert_values

if TYPE_CHECKING:
    from dpch.accounting.accountant import Accountant

T = TypeVar("T")

#: the KeeperMap table of the analysts' shared admission states (one key per analyst)
ADMISSION_TABLE = "dpch_admission"
#: how many changes one shared-state write may carry (a bound on one value's growth per write)
MAX_BATCH = 256
#: compare-and-set attempts before a change gives up (each lost attempt means another process wrote)
MAX_ATTEMPTS = 200


class AdmissionStore(ABC):
    """Where an analyst's admission state lives and how a change to it is serialised."""

    #: a settle's ledger row is written before it is counted (the in-process owner, under its lock),
    #: or counted first and written after (the shared state: it records the row until it is durable)
    write_before_count: ClassVar[bool] = True
    #: whether every process sharing the database sees this state (Keeper)
    shared: ClassVar[bool] = False

    @abstractmethod
    def run(self, accountant: Accountant, change: Callable[[AnalystState], T], *, decides: bool = True) -> T:
        """Applies ``change`` to the analyst's current state, serialised with every other change to it
        (in every process that shares the store), and returns its result; its exception is raised and
        nothing it did counts. ``change`` may run more than once (the shared store re-runs it on a fresh
        state after losing a race): it must act on the state only. ``decides=False``: the data owner's
        change (a budget, an unlock), which any process may make, not an admission."""

    @abstractmethod
    def read(self, accountant: Accountant, view: Callable[[AnalystState], T], *, fresh: bool = True) -> T:
        """``view`` of the analyst's current state (nothing it does to the state is kept). ``fresh=False``
        may answer from the state as this process last wrote or read it (a release's own budget, right
        after its admission), never for a decision."""

    def track(self, accountant: Accountant, key: tuple[str, int], write: PendingWrite) -> None:
        """Ledger row ``key`` (release id, seq) of a change is being written by ``write``."""
        return None  # the in-process owner has nothing to do here

    def note_trip(self, accountant: Accountant, lock: AnalystLock) -> None:
        """The tripwire locked the analyst in this process (held here even if the store cannot be written)."""
        return None  # the in-process owner has nothing to do here

    def forget(self, database: str | None = None) -> None:
        """Drops what this process cached: the next use reads the durable state."""
        return None  # the in-process owner has nothing to do here


class InProcessAdmission(AdmissionStore):
    """The embedded store's admission owner: the analysts' states in this process's memory
    (``engine.shared``'s :class:`~dpch.accounting.state.AnalystStates`), one lock per analyst."""

    def _state(self, accountant: Accountant) -> AnalystState:
        acc = accountant
        return acc.engine.shared.get(AnalystStates).get(acc.engine.database, acc.analyst, lambda: AnalystState(
            acc.ledger.entries(acc.analyst), acc.budgets.settings(acc.analyst), acc.locks.get(acc.analyst)))

    def run(self, accountant: Accountant, change: Callable[[AnalystState], T], *, decides: bool = True) -> T:
        state = self._state(accountant)
        with state.lock:
            return change(state)

    def read(self, accountant: Accountant, view: Callable[[AnalystState], T], *, fresh: bool = True) -> T:
        state = self._state(accountant)
        with state.lock:
            return view(state)

    def forget(self, database: str | None = None) -> None:
        """Nothing of its own: the states live in the store's shared state (cleared by the caller)."""


# -- the shared state in Keeper -------------------------------------------------------------------------


class _Job:
    """One change waiting for its analyst's next shared-state write (in the caller's context: a
    query's cancellation token is checked where the change runs, whichever thread writes)."""

    def __init__(self, change: Callable[[AnalystState], Any]) -> None:
        self.change = change
        self.context = contextvars.copy_context()
        self.event = threading.Event()
        #: this job's thread must lead (take a batch and write it)
        self.lead = False
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None

    def apply(self, state: AnalystState) -> tuple[bool, Any]:
        try:
            return True, self.context.run(self.change, state)
        except Exception as exc:  # a refusal (BudgetExceeded, …) is this job's answer, not the batch's
            return False, exc

    def finish(self, ok: bool, value: Any) -> None:
        if ok:
            self.value = value
        else:
            self.error = value
        self.done = True
        self.event.set()

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class _Slot:
    """One analyst's queue and cached head in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: list[_Job] = []
        self.leading = False
        #: the latest value this process read or wrote (a write from it needs no read when it is current)
        self.head: Versioned | None = None
        #: ledger rows of this process known to be durable, to drop from the state at the next write
        self.confirmed: set[tuple[str, int]] = set()
        #: tripwire locks not yet in the shared state (held here meanwhile)
        self.trips: dict[str, AnalystLock] = {}
        #: write from :attr:`head` without reading first: right while this process is the analyst's only
        #: writer (one gateway); after a write lost to another process, read first (several gateways behind
        #: a load balancer, where the cached head is usually stale) until a read shows this process wrote last
        self.optimistic = True
        #: the token of this process's latest write that won
        self.last_token = ""


def analyst_key(analyst: str) -> str:
    """The admission table's key of ``analyst``."""
    return f"analyst/{analyst}"


class KeeperAdmission(AdmissionStore):
    """Every process's admission state for one database, in ClickHouse Keeper (module docstring).

    Counters for the benchmark and the tests: ``writes`` (shared-state writes attempted), ``committed``
    (writes that won: each is one version of an analyst's state, so over every process they add up to
    the versions written), ``retries`` (writes lost to another process), ``reads``, ``batches`` and
    ``changes`` (changes per batch = group admission)."""

    write_before_count = False
    shared = True

    def __init__(self, engine: Engine) -> None:
        self.map = VersionedMap(engine, ADMISSION_TABLE)  # KeeperNotConfigured without Keeper
        self.database = engine.database
        self._slots: dict[str, _Slot] = {}
        self._lock = threading.Lock()
        self.writes = 0
        self.committed = 0
        self.reads = 0
        self.retries = 0
        self.batches = 0
        self.changes = 0

    def _count(self, counter: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + n)

    def _slot(self, analyst: str) -> _Slot:
        with self._lock:
            slot = self._slots.get(analyst)
            if slot is None:
                slot = self._slots[analyst] = _Slot()
            return slot

    # -- reads ----------------------------------------------------------------------------------------

    def _read(self, accountant: Accountant) -> Versioned:
        self._count("reads")
        found = self.map.on(accountant.engine).read(analyst_key(accountant.analyst))
        return found if found is not None else Versioned(0, "", ())

    def _state(self, head: Versioned, accountant: Accountant) -> ChainState:
        acc = accountant
        ledger, analyst = acc.ledger, acc.analyst

        def history() -> list[Any]:
            return ledger.entries(analyst, consistent=True)

        def recent(limit: int) -> list[Any]:
            return ledger.entries(analyst, limit)

        if head.version == 0:  # the analyst's first shared use: its clock, filters and reservations from the ledger
            return ChainState.bootstrap(history(), acc.budgets.settings(analyst), acc.locks.get(analyst),
                                        acc.budgets.latest(analyst), history=history, recent=recent)
        return ChainState.loads(head.value, history=history, recent=recent)

    def read(self, accountant: Accountant, view: Callable[[AnalystState], T], *, fresh: bool = True) -> T:
        slot = self._slot(accountant.analyst)
        with slot.lock:
            cached = slot.head
        if fresh or cached is None:
            head = self._read(accountant)
            with slot.lock:
                if slot.head is None or head.version >= slot.head.version:
                    slot.head = head
        else:
            head = cached
        with slot.lock:
            trips = list(slot.trips.values())
        state = self._state(head, accountant)
        for lock in trips:
            state.locked = state.locked or lock
        return view(state)

    # -- changes --------------------------------------------------------------------------------------

    def run(self, accountant: Accountant, change: Callable[[AnalystState], T], *, decides: bool = True) -> T:
        slot = self._slot(accountant.analyst)
        job = _Job(change)
        with slot.lock:
            slot.queue.append(job)
            if not slot.leading:  # the queue was empty: this job leads its own batch
                slot.leading = job.lead = True
        if not job.lead:
            job.event.wait()  # done by another thread's write, or handed the lead
        if not job.done:
            self._lead(slot, accountant)
        return job.result()  # type: ignore[no-any-return]

    #: most changes one write carries (a class attribute: a test or benchmark may set it to 1)
    max_batch = MAX_BATCH

    def _lead(self, slot: _Slot, accountant: Accountant) -> None:
        with slot.lock:
            batch = slot.queue[:self.max_batch]
            del slot.queue[:len(batch)]
        try:
            self._commit(slot, accountant, batch)
        except BaseException as exc:
            for job in batch:
                if not job.done:
                    job.finish(False, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            with slot.lock:  # the next waiting job leads the next batch (its thread wakes to write it)
                if slot.queue:
                    slot.queue[0].lead = True
                    slot.queue[0].event.set()
                else:
                    slot.leading = False

    def _commit(self, slot: _Slot, accountant: Accountant, batch: list[_Job]) -> None:
        key = analyst_key(accountant.analyst)
        vmap = self.map.on(accountant.engine)
        with slot.lock:
            head, fresh = (slot.head, False) if slot.optimistic else (None, False)
        if head is None:
            head, fresh = self._read(accountant), True
            with slot.lock:  # nobody else wrote since this process did: next time, write without reading first
                slot.optimistic = bool(head.writers) and head.writers[-1] == slot.last_token
        attempts: dict[str, list[tuple[bool, Any]]] = {}
        for _ in range(MAX_ATTEMPTS):
            won = next((t for t in head.writers if t in attempts), None) if fresh else None
            if won is not None:  # an earlier write whose statement failed in transit did land
                self._done(slot, head, batch, attempts[won], set(), {})
                return
            state = self._state(head, accountant)
            with slot.lock:
                trips = dict(slot.trips)
                durable = slot.confirmed & set(state.rows)
            for lock in trips.values():
                state.locked = state.locked or lock
            outcomes = [job.apply(state) for job in batch]
            state.confirm(durable)
            text = state.dumps()
            if head.version and text == head.value:  # nothing to write: every change was refused or read
                if fresh:
                    self._done(slot, head, batch, outcomes, set(), trips)
                    return
                head, fresh = self._read(accountant), True  # a refusal stands only on the current state
                continue
            token = new_token()
            attempts[token] = outcomes
            self._count("writes")
            ok = (vmap.create(key, text, token) if head.version == 0
                  else vmap.advance(key, head.version, text, token))
            if ok is None:  # unknown outcome: read, and see whether one of this batch's writes landed
                head, fresh = self._read(accountant), True
                continue
            if ok:
                self._count("committed")
                with slot.lock:
                    slot.last_token = token
                written = Versioned(head.version + 1, text, (*head.writers[-(WRITERS - 1):], token))
                self._done(slot, written, batch, outcomes, durable, trips)
                return
            self._count("retries")
            if not fresh:
                with slot.lock:
                    slot.optimistic = False  # another process writes this analyst too: read first from now on
            head, fresh = self._read(accountant), True
        raise AdmissionUnavailable(
            f"analyst {accountant.analyst}'s admission lost {MAX_ATTEMPTS} races in a row to other processes; "
            "nothing was admitted", hint="retry; if it persists, the data owner should check the gateways")

    def _done(self, slot: _Slot, head: Versioned, batch: list[_Job], outcomes: list[tuple[bool, Any]],
              durable: set[tuple[str, int]], trips: dict[str, AnalystLock]) -> None:
        with slot.lock:
            if slot.head is None or head.version >= slot.head.version:
                slot.head = head
            slot.confirmed -= durable
            for release_id in trips:
                slot.trips.pop(release_id, None)
        self._count("batches")
        self._count("changes", len(batch))
        for job, (ok, value) in zip(batch, outcomes, strict=True):
            job.finish(ok, value)

    def queued(self, analyst: str) -> int:
        """Changes of ``analyst`` waiting in this process for the next shared-state write."""
        slot = self._slot(analyst)
        with slot.lock:
            return len(slot.queue)

    def track(self, accountant: Accountant, key: tuple[str, int], write: PendingWrite) -> None:
        slot = self._slot(accountant.analyst)

        def durable(ok: bool) -> None:
            if ok:
                with slot.lock:
                    slot.confirmed.add(key)

        write.add_done_callback(durable)

    def note_trip(self, accountant: Accountant, lock: AnalystLock) -> None:
        slot = self._slot(accountant.analyst)
        with slot.lock:
            slot.trips[lock.release_id] = lock

    def forget(self, database: str | None = None) -> None:
        with self._lock:
            slots = list(self._slots.values())
        for slot in slots:
            with slot.lock:
                slot.head = None

    def analysts(self, accountant_engine: Engine) -> list[str]:
        """Every analyst with a shared state (the reconciler's list; a scan of the table)."""
        prefix = analyst_key("")
        return [k[len(prefix):] for k in self.map.on(accountant_engine).keys(prefix)]


# -- one owner per ledger, without Keeper ----------------------------------------------------------------

#: the table of admission claims on a server without Keeper
OWNERS_TABLE = "dpch_admission_owner"
_OWNER_COLUMNS = (("owner", "String"), ("host", "String"), ("pid", "UInt64"), ("started", "DateTime64(6, 'UTC')"),
                  ("heartbeat", "DateTime64(6, 'UTC')"))


class OwnerAdmission(InProcessAdmission):
    """A server without Keeper: this process is the ledger's single admission owner, as an embedded
    store's. It claims the database at first use (a row in ``dpch_admission_owner``) and renews the
    claim every ``ttl``/3 seconds; a process that finds another's claim renewed within ``ttl`` seconds
    is refused with :class:`~dpch.errors.StoreLocked`. Two processes starting together both write a
    claim and read both: the earlier (``started``, ``owner``) wins. Best effort — see the module
    docstring."""

    ttl = 30.0

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.owner = uuid.uuid4().hex
        self.started = datetime.now(UTC)
        self.table = engine.table(OWNERS_TABLE)
        engine.create_table(OWNERS_TABLE, ", ".join(f"{n} {t}" for n, t in _OWNER_COLUMNS),
                            "ORDER BY (owner, heartbeat) COMMENT 'dpch: admission owners of this ledger (no Keeper)'")
        self._claimed = False
        self._lock = threading.Lock()
        #: (database, analyst) → the budget and lock marks this process last saw (:meth:`_refresh`)
        self._seen: dict[tuple[str, str], tuple[str, str]] = {}
        self._stop = threading.Event()
        self._renewed = 0.0

    def _beat(self) -> None:
        now = datetime.now(UTC)
        self.engine.command(insert_values(self.table, _OWNER_COLUMNS,
                                          [(self.owner, socket.gethostname(), os.getpid(), self.started, now)]))
        self._renewed = time.monotonic()

    def _others(self) -> list[tuple[Any, ...]]:
        since = datetime.now(UTC) - timedelta(seconds=self.ttl)
        return [r for r in self.engine.query_rows(
            f"SELECT owner, any(host), any(pid), min(started), max(heartbeat) FROM {self.table}"
            " WHERE heartbeat >= {since:DateTime64(6, 'UTC')} GROUP BY owner ORDER BY min(started), owner",
            {"since": since}) if r[0] != self.owner]

    def claim(self) -> None:
        """Claims the ledger (once), or raises :class:`~dpch.errors.StoreLocked` naming the live owner."""
        with self._lock:
            if self._claimed:
                if time.monotonic() - self._renewed > self.ttl:  # this process was paused past its claim
                    raise StoreLocked(
                        f"this process's claim on the ledger of {self.engine.database} lapsed (it was not renewed "
                        f"for {self.ttl:g} s), so it stopped admitting", hint="restart it")
                return
            self._beat()
            for owner, host, pid, started, _ in self._others():
                if (as_utc(started), owner) < (self.started, self.owner):
                    raise StoreLocked(
                        f"the ledger of database {self.engine.database} is admitted by another dpch process "
                        f"({host} pid {pid}, since {started:%Y-%m-%d %H:%M:%S} UTC); without ClickHouse Keeper only "
                        "one process may admit releases for a ledger",
                        hint="configure Keeper on the ClickHouse server (docs/serving.md), or send the queries "
                             "through that process's gateway (--dsn dpch://HOST:PORT)")
            self._claimed = True
            threading.Thread(target=self._renew, name="dpch-admission-claim", daemon=True).start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self._beat()
            except Exception:  # noqa: S112 — the next admission refuses once the claim has lapsed
                continue

    def run(self, accountant: Accountant, change: Callable[[AnalystState], T], *, decides: bool = True) -> T:
        if not decides:  # the owner's change is in its table already; the owning process picks it up
            return super().run(accountant, change)
        self.claim()
        self._refresh(accountant)
        return super().run(accountant, change)

    def _marks(self, accountant: Accountant) -> tuple[str, str]:
        """When the analyst's budget and lock rows last changed (one query)."""
        acc = accountant
        rows = acc.engine.query_rows(
            f"SELECT (SELECT toString(max(set_at)) FROM {acc.budgets.table} WHERE analyst = {{a:String}}),"
            f" (SELECT toString(max(time)) FROM {acc.locks.table} WHERE analyst = {{a:String}})", {"a": acc.analyst})
        return str(rows[0][0]), str(rows[0][1])

    def _refresh(self, accountant: Accountant) -> None:
        """Picks up the data owner's changes made by another process (a budget cut or raise, an unlock:
        ``dpch budget set|unlock`` beside a running gateway) before this admission."""
        marks = self._marks(accountant)
        key = (accountant.engine.database, accountant.analyst)
        with self._lock:
            seen = self._seen.get(key)
            self._seen[key] = marks
        if seen == marks:
            return
        acc = accountant

        def reload(state: AnalystState) -> None:  # the first admission too: the state may have been read earlier
            if seen is None or marks[0] != seen[0]:
                state.settings, state.settings_at = acc.budgets.settings(acc.analyst), marks[0]
                state.drop_totals()
            if seen is None or marks[1] != seen[1]:  # a lock or unlock row newer than what this process knew
                state.locked = acc.locks.get(acc.analyst)

        super().run(accountant, reload)




def admission_for(engine: Engine, mode: str | None = None) -> AdmissionStore:
    """The admission store of ``engine``'s database in this process: the in-process owner on an embedded
    store; on a server, Keeper (``mode`` "keeper"), one claimed owner ("owner"), or "auto" (default
    ``$DPCH_ADMISSION``, else auto): Keeper if the server has it, else one owner."""
    if engine.embedded:
        return engine.shared.get(InProcessAdmission)
    chosen = mode or os.environ.get(MODE_ENV) or "auto"
    if chosen not in MODES:
        raise ConfigError(f"unknown admission mode {chosen!r}", hint=f"choose one of {', '.join(MODES)}")

    def make() -> AdmissionStore:
        # once a database's admission is in Keeper, no process may decide it anywhere else
        in_keeper = engine.table_exists(ADMISSION_TABLE)
        if chosen == "owner":
            if in_keeper:
                raise ConfigError(f"the admission of database {engine.database} is in ClickHouse Keeper "
                                  f"({ADMISSION_TABLE} exists): a single owner beside it would be a second budget",
                                  hint="use admission = auto or keeper")
            return OwnerAdmission(engine)
        try:
            return KeeperAdmission(engine)
        except KeeperNotConfigured:
            if chosen == "keeper" or in_keeper:
                raise
            return OwnerAdmission(engine)

    return engine.shared.setdefault(("admission", engine.database), make)

"""Threshold watches: the durable state of a fully adaptive Gaussian sparse vector (``dpch_watches``).

A watch is one fully adaptive Gaussian sparse vector (Lebensold et al. 2024, Alg 2/4, Thm 19;
docs/algorithms.md B8, B9) that an analyst asks ⊤/⊥ threshold questions of, one at a time and
across sessions. Its parameters are fixed at registration: the threshold ρ ≥ 0, the public range
[lower, upper] every answer is clamped to (default lower 0), the sensitivity Δ a
question may have, the threshold noise σ_X (σ_Z = √3·σ_X, as in the paper's experiments), the
watch's (ε, δ) and the number n of instances its δ is split over (δ_j = δ/n each). Queries are
normalised to [0, 1] with w = upper − lower: (q − lower)/w, Δ/w, (ρ − lower)/w, σ_X/w — non-negative, as
Thm 7 needs. The clamp is public and data-independent; a tight range pays: ε_max grows with (ρ − lower)/σ_X
(Thm 7's log term) and ε_post(t) with (upper − ρ)/σ_X (Thm 17), so a value far from ρ only needs to be clamped
to a point still clearly on its side.

The filter of B9, per instance j (a fresh noisy threshold ρ̂_j = ρ + N(0, σ_X²) each):

- before opening instance j: refuse (the watch is *exhausted*) unless
  spent + ε_max(δ_j) < ε and Σ_{i≤j} δ_i ≤ δ (Thm 7 at δ_j; B9's per-instance δ fix: Thm 11's single
  δ is not valid, because the number of instances depends on the outputs);
- each ⊤ at position t of its instance (counting the ⊥s before it): spent += ε_post(t) (Thm 17);
- an instance still open when the watch is closed counts ε_max(δ_j).

**Why settling the analyst's reservation to the realized cost is sound.** At registration the watch
reserves its whole (ε, δ) as one ex-post release (worst ε = the watch's ε) in the analyst's filter
(:meth:`~dpch.accounting.accountant.Accountant.reserve`), before any noise is drawn; at close it settles
it to E = :meth:`WatchState.realized_epsilon`, δ = the watch's δ (never less: the number of instances run
is random, so only the δ fixed in advance is a valid ex-post δ). Argument:

1. Each instance's privacy loss L_j obeys two bounds: L_j ≤ ε_post(t_j) surely if it halted at t_j
   (Thm 17, pure ex post), and L_j ≤ ε_max(δ_j) with probability ≥ 1 − δ_j whatever it output, ⊤ at t
   or ⊥^t when the watch closed (Thm 7's RDP, converted to a probabilistic bound, B8; RDP holds for
   the truncated output ⊥^t as a post-processing of the whole run). Queries may be chosen adaptively,
   from anything released, other releases included: the bounds hold for any Δ-sensitive query values
   in [0, 1], and the watch's noise is independent of every other mechanism's, so the density of the
   whole transcript factorises and the watch's loss is the sum of its instances' (Lebensold et al.
   2024, Thm 19; Rogers et al. 2023, Lemma 5.1 for the adaptive ex-post composition).
2. With T the last instance opened, by the union bound, with probability ≥ 1 − Σ_{j≤T} δ_j ≥ 1 − δ:
   L ≤ Σ_{j<T} ε_post(t_j) + min(ε_post(t_T) if it halted, ε_max(δ_T)) = E, and the check before
   opening T gives Σ_{j<T} ε_post(t_j) + ε_max(δ_T) < ε. So E < ε *in every outcome*: the watch is an
   (E, δ)-ex-post private release whose E never exceeds the worst case it was admitted on — exactly
   the condition of the ex-post filter (Rogers et al. 2023, Lemma 5.2), and of the mixed filter's
   ex-post side (Thm 3). The accountant charges that realized E only under the filters that read
   realized ex-post ε (``ex_post``, ``pure_ex_post``, ``mixed``: ``PrivacyCost.realized_ex_post``); every
   other filter (``basic``, ``advanced``, the zCDP ones: a release without a ρ of its own) counts it at its
   worst case (ε, δ), which the watch never exceeds (an (E ≤ ε, δ)-ex-post release is (ε, δ)-DP). Either way the
   analyst's filter is never overspent: the reservation counted (ε, δ) from before the first noise
   draw until the settle, and the settle never raises it.

Note that the B9 bookkeeping ``spent`` (Σ ε_post over halted instances) may end above ε after a late
⊤ (ε_post can exceed ε_max, B9): it only decides whether another instance may open; the valid bound is E.

State is an append-only table: every change writes a full snapshot row (``seq`` + 1), the latest
row of (analyst, name) is the state, and every row names the event that made it (``create``,
``open``, ``below``, ``above``, ``exhausted``, ``close``) and the ε it charged, so the rows explain
every charge (:func:`watch_violations` replays them). A row is written, and has returned, before the
answer it records is returned; the noisy threshold of an open instance is written before any query
is compared with it and is never redrawn (a new session on the same store continues it). The noisy
threshold is secret: it is a column of the table, readable by the data owner only (tables named
``dpch_*`` are not served to analysts), and never shown by :meth:`WatchState.as_dict` or any view.
Changes to one watch are serialised by a per-watch lock (:meth:`WatchStore.locked`) held from the
read of the latest row to the write of the next, in the single process that owns the store
(docs/design.md "One process per store"), as the accountant serialises one analyst's charges.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from dpch.errors import QueryRejected
from dpch.mechanisms.selection import GaussianAboveThreshold
from dpch.mechanisms.selection_bounds import at_epsilon_max
from dpch.store.engine import Engine
from dpch.store.keeper import VersionedMap, new_token
from dpch.store.quoting import insert_values

WATCHES_TABLE = "dpch_watches"
#: σ_Z / σ_X: Thm 7 needs σ_Z ≥ √3·σ_X; the paper's experiments use equality
SIGMA_RATIO = math.sqrt(3.0)
#: without ``sigma``, σ_X is the smallest with which this many instances each fit ε/n at their ε_max
DEFAULT_INSTANCES = 10
#: the most instances a derived δ split may use (δ_j = δ/n; ε_max grows only like √log n)
MAX_INSTANCES = 1_000_000
STATES = ("active", "exhausted", "closed")

_COLUMNS: tuple[tuple[str, str], ...] = (
    ("analyst", "String"), ("name", "String"), ("seq", "UInt64"), ("time", "DateTime64(6, 'UTC')"),
    ("event", "String"), ("state", "String"), ("answer", "String"),
    ("threshold", "Float64"), ("upper", "Float64"), ("sensitivity", "Float64"), ("sigma", "Float64"),
    ("epsilon", "Float64"), ("delta", "Float64"), ("instances_max", "UInt64"), ("datasets", "Array(String)"),
    ("release_id", "String"), ("instances", "UInt64"), ("position", "UInt64"),
    ("noisy_threshold", "Nullable(Float64)"), ("spent", "Float64"), ("base", "Float64"), ("charged", "Float64"),
    ("lower", "Float64"),
)
_NAMES = ", ".join(name for name, _ in _COLUMNS)


@dataclass(frozen=True)
class WatchParams:
    """What a watch fixes at registration (public: shown by ``dpch watch list`` and ``dpch budget``).

    ``threshold``, ``lower``, ``upper``, ``sensitivity`` and ``sigma`` (σ_X) are in the query's own units;
    ``instances`` is n, the δ split (δ_j = δ/n); ``datasets`` the private tables (``db.table``) the
    watch's questions may read, each charged the reservation (docs/design.md rule 8)."""

    name: str
    threshold: float
    upper: float
    sensitivity: float
    sigma: float
    epsilon: float
    delta: float
    instances: int
    datasets: tuple[str, ...]
    lower: float = 0.0

    @property
    def width(self) -> float:
        """upper − lower: the scale queries are normalised by."""
        return self.upper - self.lower

    @property
    def instance_delta(self) -> float:
        """δ_j, the failure probability of each instance's ex-ante bound."""
        return self.delta / self.instances

    @property
    def mechanism(self) -> GaussianAboveThreshold:
        """One instance, normalised to [0, 1] (Lebensold et al. 2024, Alg 1/3; B8)."""
        return at_instance(self.threshold, self.upper, self.sensitivity, self.sigma, self.instance_delta, self.lower)

    @property
    def epsilon_max(self) -> float:
        """ε_max(δ_j) of one instance (Thm 7 → pDP; B8)."""
        return self.mechanism.epsilon_max

    def epsilon_post(self, t: int) -> float:
        """ε_post(t): the ex-post ε of a ⊤ at position t (Thm 17; B8)."""
        return self.mechanism.epsilon_post(t)


def at_instance(threshold: float, upper: float, sensitivity: float, sigma: float, delta: float,
                lower: float = 0.0) -> GaussianAboveThreshold:
    """A Gaussian Above Threshold instance on the watch's normalised scale [0, 1]."""
    w = upper - lower
    sx = sigma / w
    return GaussianAboveThreshold(sigma_x=sx, sigma_z=SIGMA_RATIO * sx, threshold=(threshold - lower) / w,
                                  sensitivity=sensitivity / w, lower=0.0, upper=1.0, delta=delta)


@dataclass(frozen=True)
class WatchState:
    """A watch at its latest row. ``noisy_threshold`` is secret (never in :meth:`as_dict`, never in
    ``repr``): tests and the data owner may read it to check it is never redrawn."""

    params: WatchParams
    seq: int
    state: str
    release_id: str
    #: instances opened so far (Σ δ_j = instances · δ_j)
    instances: int
    #: questions answered by the open instance (0: no instance open)
    position: int
    spent: float
    #: ``spent`` when the last instance was opened
    base: float
    time: datetime
    noisy_threshold: float | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.params.name

    @property
    def open(self) -> bool:
        """Whether an instance is open (it has a noisy threshold)."""
        return self.noisy_threshold is not None

    @property
    def delta_used(self) -> float:
        """Σ δ_j over the instances opened."""
        return self.instances * self.params.instance_delta

    def can_open(self) -> bool:
        """B9's check before an instance: spent + ε_max(δ_j) < ε and Σ δ_j (with it) ≤ δ."""
        p = self.params
        fits_delta = (self.instances + 1) * p.instance_delta <= p.delta * (1 + 1e-12)
        return fits_delta and self.spent + p.epsilon_max < p.epsilon

    @property
    def charged_epsilon(self) -> float:
        """B9's count: Σ ε_post over halted instances, plus ε_max for an open one (what ``dpch budget`` shows)."""
        return self.spent + (self.params.epsilon_max if self.open else 0.0)

    def realized_epsilon(self) -> float:
        """E, the ex-post ε of everything the watch released (module docstring, step 2): < ε always.
        ``charged_epsilon`` bounds it too (every halted instance at ε_post, an open or closed-open one
        at ε_max); the smaller of the two holds, both failing only with probability ≤ Σδ_j."""
        if self.instances == 0:
            return 0.0
        last = self.params.epsilon_max  # the last instance at its ex-ante bound (probability 1 − Σδ_j)
        return min(self.charged_epsilon, self.base + last)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for views (``--json``): everything but the noisy threshold."""
        p = self.params
        return {
            "name": p.name, "state": self.state, "threshold": p.threshold, "lower": p.lower, "upper": p.upper,
            "sensitivity": p.sensitivity, "sigma": p.sigma, "epsilon": p.epsilon, "delta": p.delta,
            "instances_max": p.instances, "datasets": list(p.datasets), "epsilon_max": p.epsilon_max,
            "spent": self.charged_epsilon, "delta_used": self.delta_used, "instances": self.instances,
            "position": self.position if self.open else None, "release_id": self.release_id,
        }


@dataclass(frozen=True)
class WatchEvent:
    """One row of a watch's history: the state after ``event`` and the ε it charged."""

    event: str
    answer: str
    charged: float
    state: WatchState


# -- choosing σ and n ------------------------------------------------------------------------------


def epsilon_max_at(threshold: float, upper: float, sensitivity: float, sigma: float, delta: float,
                   lower: float = 0.0) -> float:
    """ε_max of one instance with these parameters (query units)."""
    w = upper - lower
    sx = sigma / w
    return at_epsilon_max(sensitivity / w, sx, SIGMA_RATIO * sx, (threshold - lower) / w, delta)


def sigma_for(epsilon: float, delta: float, instances: int, threshold: float, upper: float,
              sensitivity: float, lower: float = 0.0) -> float:
    """The smallest σ_X (to 1e-6 relative) with ``instances`` · ε_max(δ/instances) ≤ ε: each of n
    instances fits, at its ex-ante bound, in an even share of ε (ε_max falls as σ grows)."""
    share, dj = epsilon / instances, delta / instances

    def fits(sigma: float) -> bool:
        return epsilon_max_at(threshold, upper, sensitivity, sigma, dj, lower) <= share

    # the search's starting guess only: the loops below move it until it does not fit, whatever it is
    lo = sensitivity * 1e-3  # pragma: no mutate (equivalent: a different start finds the same σ to 1e-6)
    hi = upper - lower
    while not fits(hi):
        hi *= 2.0
    while fits(lo):
        lo /= 2.0
    while hi / lo > 1 + 1e-6:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def instances_for(epsilon: float, delta: float, threshold: float, upper: float, sensitivity: float,
                  sigma: float, lower: float = 0.0) -> int:
    """The most instances B9's ε check can ever open (≤ :data:`MAX_INSTANCES`; 0 if not even one fits):
    splitting δ over that many, δ never halts the watch before ε does.

    Every halted instance costs at least ε_post(1) (ε_post grows with t, B8), and instance k + 1 opens
    only if spent_k + ε_max(δ_j) < ε with spent_k ≥ k·ε_post(1); δ_j ≤ δ gives ε_max(δ_j) ≥ ε_max(δ), so
    k < (ε − ε_max(δ)) / ε_post(1) and at most n = ⌈(ε − ε_max(δ)) / ε_post(1)⌉ instances ever open."""
    first = epsilon_max_at(threshold, upper, sensitivity, sigma, delta, lower)
    if first >= epsilon:
        return 0
    cheapest = at_instance(threshold, upper, sensitivity, sigma, delta, lower).epsilon_post(1)
    return max(1, min(MAX_INSTANCES, math.ceil((epsilon - first) / cheapest)))


# -- the table ------------------------------------------------------------------------------------------


class _WatchLocks:
    """One lock per (database, analyst, watch) on one opening of a store (``engine.shared``)."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


class WatchMoved(QueryRejected):
    """Another process changed the watch between this process's read and its write (the shared state
    refused the stale write): the question is asked again from the watch's new state. Nothing was
    released from the attempt that lost."""


#: the KeeperMap table of the watches' latest rows, shared by every process (one key per watch)
WATCH_STATE_TABLE = "dpch_watch_state"
#: rows a watch's shared value keeps (the latest, and the ones before it a crash may have left unwritten)
KEEP_ROWS = 8


class WatchStore:
    """Reads and appends ``dpch_watches`` rows in the engine's database (created on first use).

    With a shared admission state (a ClickHouse server with Keeper: :mod:`dpch.accounting.admission`)
    every change of a watch is first a compare-and-set of its latest rows in ``dpch_watch_state``
    (``seq`` is the value's version), so two processes asking one watch never both write row n + 1:
    the one that loses gets :class:`WatchMoved` and asks again from the new state. The row is then
    appended to ``dpch_watches`` (the history); a row a crash left only in Keeper is written by the
    reconciler (:meth:`reconcile`). ``shared`` (default: whether the engine's admission is shared)."""

    def __init__(self, engine: Engine, *, shared: bool | None = None) -> None:
        self.engine = engine
        self.table = engine.table(WATCHES_TABLE)
        self._created = False
        if shared is None:
            from dpch.accounting.admission import admission_for  # the store's choice of admission

            shared = not engine.embedded and admission_for(engine).shared
        self.shared = shared
        self._map: VersionedMap | None = None

    def _ensure(self) -> None:
        if self._created:
            return
        self.engine.create_table(
            WATCHES_TABLE,
            "analyst String, name String, seq UInt64, time DateTime64(6, 'UTC'),"
            " event LowCardinality(String), state LowCardinality(String), answer LowCardinality(String),"
            " threshold Float64, upper Float64, sensitivity Float64, sigma Float64,"
            " epsilon Float64, delta Float64, instances_max UInt64, datasets Array(String),"
            " release_id String, instances UInt64, position UInt64, noisy_threshold Nullable(Float64),"
            " spent Float64, base Float64, charged Float64, lower Float64",
            "ORDER BY (analyst, name, seq)"
            " COMMENT 'dpch: threshold watches (append-only; the latest row is the state; holds secret noise)'")
        if self.shared:
            self._map = VersionedMap(self.engine, WATCH_STATE_TABLE)
        self._created = True

    @contextmanager
    def locked(self, analyst: str, name: str) -> Iterator[None]:
        """Serialises every change of one watch in this process (read latest → write next); with a
        shared state, the compare-and-set serialises processes."""
        with self.engine.shared.get(_WatchLocks).get((self.engine.database, analyst, name)):
            yield

    def _shared_rows(self, analyst: str, name: str) -> tuple[int, list[tuple[Any, ...]]] | None:
        """(version, rows) of the watch's shared value, or None if it has none."""
        assert self._map is not None
        found = self._map.read(_key(analyst, name))
        if found is None:
            return None
        return found.version, [_row_from_data(d) for d in json.loads(found.value)]

    def latest(self, analyst: str, name: str) -> WatchState | None:
        """The watch's current state, or None if it was never created."""
        self._ensure()
        if self._map is not None:
            shared = self._shared_rows(analyst, name)
            if shared is not None:
                return _state(shared[1][-1])
        rows = self.engine.query_rows(
            f"SELECT {_NAMES} FROM {self.table} WHERE analyst = {{a:String}} AND name = {{n:String}}"
            " ORDER BY seq DESC LIMIT 1", {"a": analyst, "n": name})
        if not rows:
            return None
        if self._map is not None:  # a watch from before the shared state: its value starts at its latest row
            self._map.create(_key(analyst, name), json.dumps([_row_data(rows[0])]), new_token(), int(rows[0][2]))
        return _state(rows[0])

    def all(self, analyst: str) -> list[WatchState]:
        """Every watch of ``analyst`` at its latest row, by name."""
        self._ensure()
        rows = self.engine.query_rows(
            f"SELECT {_NAMES} FROM {self.table} WHERE analyst = {{a:String}}"
            " ORDER BY name, seq DESC LIMIT 1 BY name", {"a": analyst})
        states = {r[1]: _state(r) for r in rows}
        for name in self._shared_names(analyst):
            latest = self.latest(analyst, name)
            if latest is not None and (name not in states or latest.seq > states[name].seq):
                states[name] = latest
        return [states[n] for n in sorted(states)]

    def _shared_names(self, analyst: str) -> list[str]:
        if self._map is None:
            return []
        prefix = _key(analyst, "")[:-2]  # '["ana",'
        return [json.loads(k)[1] for k in self._map.keys(prefix)]

    def history(self, analyst: str, name: str) -> list[WatchEvent]:
        """Every row of the watch, oldest first (its events and what each charged): the ledger table's,
        with the shared value's rows not yet written there."""
        self._ensure()
        rows = self.engine.query_rows(
            f"SELECT {_NAMES} FROM {self.table} WHERE analyst = {{a:String}} AND name = {{n:String}}"
            " ORDER BY seq", {"a": analyst, "n": name})
        if self._map is not None:
            shared = self._shared_rows(analyst, name)
            seqs = {int(r[2]) for r in rows}
            rows = sorted([*rows, *(r for r in (shared[1] if shared else []) if int(r[2]) not in seqs)],
                          key=lambda r: int(r[2]))
        return [WatchEvent(r[4], r[6], float(r[21]), _state(r)) for r in rows]

    def append(self, analyst: str, state: WatchState, event: str, *, answer: str = "",
               charged: float = 0.0) -> WatchState:
        """Durably writes ``state`` as the watch's next row (one INSERT that has returned) and returns
        it with its new ``seq``; callers hold :meth:`locked`. With a shared state, raises
        :class:`WatchMoved` if another process wrote the watch since ``state`` was read."""
        self._ensure()
        now = datetime.now(UTC)
        new = replace(state, seq=state.seq + 1, time=now)
        p = new.params
        row = (analyst, p.name, new.seq, now, event, new.state, answer, p.threshold, p.upper, p.sensitivity,
               p.sigma, p.epsilon, p.delta, p.instances, list(p.datasets), new.release_id, new.instances,
               new.position, new.noisy_threshold, new.spent, new.base, charged, p.lower)
        if self._map is not None:
            self._advance(analyst, p.name, state.seq, row)
        self.engine.command(insert_values(self.table, _COLUMNS, [row], self.engine.write_settings()))
        return new

    def _advance(self, analyst: str, name: str, seq: int, row: tuple[Any, ...]) -> None:
        """Compare-and-set of the watch's shared value from version ``seq`` to ``seq`` + 1 with ``row``."""
        assert self._map is not None
        key, token = _key(analyst, name), new_token()
        shared = self._shared_rows(analyst, name)
        if shared is not None and shared[0] != seq:
            raise _moved(name)
        kept = [*(shared[1] if shared is not None else [])[-(KEEP_ROWS - 1):], row]
        value = json.dumps([_row_data(r) for r in kept])
        ok = (self._map.create(key, value, token, seq + 1) if shared is None
              else self._map.advance(key, seq, value, token))
        if ok is None:  # the statement failed in transit: whether it landed decides
            ok = self._map.outcome(key, {token}) == token
        if not ok:
            raise _moved(name)

    def reconcile(self, analyst: str, grace: float = 60.0) -> int:
        """Writes the rows of ``analyst``'s watches that only the shared state holds (a process died
        between its compare-and-set and its INSERT), older than ``grace`` seconds; returns how many."""
        self._ensure()
        if self._map is None:
            return 0
        cutoff = datetime.now(UTC).timestamp() - grace
        written = 0
        for name in self._shared_names(analyst):
            shared = self._shared_rows(analyst, name)
            if shared is None:
                continue
            have = {int(r[0]) for r in self.engine.query_rows(
                f"SELECT seq FROM {self.table} WHERE analyst = {{a:String}} AND name = {{n:String}}",
                {"a": analyst, "n": name})}
            missing = [r for r in shared[1] if int(r[2]) not in have and r[3].timestamp() <= cutoff]
            if missing:
                self.engine.command(insert_values(self.table, _COLUMNS, missing, self.engine.write_settings()))
                written += len(missing)
        return written


def _moved(name: str) -> WatchMoved:
    return WatchMoved(f"watch {name} changed in another process while this question was asked",
                      hint="ask again: nothing was released from the attempt")


def _key(analyst: str, name: str) -> str:
    """A watch's key in the shared table (JSON: any analyst or watch name)."""
    return json.dumps([analyst, name], separators=(",", ":"))


def _row_data(r: tuple[Any, ...]) -> list[Any]:
    time = r[3] if r[3].tzinfo is not None else r[3].replace(tzinfo=UTC)
    return [*r[:3], time.isoformat(), *r[4:14], list(r[14]), *r[15:]]


def _row_from_data(d: list[Any]) -> tuple[Any, ...]:
    return (*d[:3], datetime.fromisoformat(d[3]), *d[4:14], tuple(d[14]), *d[15:])


def _state(r: tuple[Any, ...]) -> WatchState:
    params = WatchParams(name=r[1], threshold=float(r[7]), upper=float(r[8]), sensitivity=float(r[9]),
                         sigma=float(r[10]), epsilon=float(r[11]), delta=float(r[12]), instances=int(r[13]),
                         datasets=tuple(r[14]), lower=float(r[22]))
    time = r[3] if r[3].tzinfo is not None else r[3].replace(tzinfo=UTC)
    return WatchState(params=params, seq=int(r[2]), state=r[5], release_id=r[15], instances=int(r[16]),
                      position=int(r[17]), spent=float(r[19]), base=float(r[20]), time=time,
                      noisy_threshold=None if r[18] is None else float(r[18]))


def new_watch(params: WatchParams, release_id: str) -> WatchState:
    """The state of a watch just registered (its ``create`` row is seq 1)."""
    return WatchState(params=params, seq=0, state="active", release_id=release_id, instances=0, position=0,
                      spent=0.0, base=0.0, time=datetime.now(UTC))


def validate_params(params: WatchParams) -> None:
    """Refuses parameters no watch can run with (before anything is reserved); data-independent."""
    p = params

    def bad(what: str, hint: str) -> QueryRejected:
        return QueryRejected(f"watch {p.name}: {what}", hint=hint)

    if not p.name or not (p.name.replace("_", "").isalnum() and p.name.isascii()):
        raise QueryRejected(f"watch name {p.name!r} must be letters, digits and _",
                            hint="e.g. dpch watch create daily_signups ...")
    if not (isinstance(p.lower, int | float) and isinstance(p.upper, int | float) and math.isfinite(p.lower)
            and p.lower < p.upper):
        raise bad(f"the range [lower, upper] = [{p.lower!r}, {p.upper!r}] is empty", "give --lower < --upper")
    for label, value in (("epsilon", p.epsilon), ("upper", p.width), ("sensitivity", p.sensitivity),
                         ("sigma", p.sigma)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise bad(f"{label} must be a positive number, got {value!r}", f"give a positive --{label}")
    if not (isinstance(p.delta, int | float) and 0 < p.delta < 1):
        raise bad(f"delta must be in (0, 1), got {p.delta!r}",
                  "Thm 7's ex-ante bound needs δ > 0; e.g. --delta 1e-7")
    if not (isinstance(p.threshold, int | float) and p.lower <= p.threshold <= p.upper):
        raise bad(f"the threshold must be in [lower, upper] = [{p.lower:g}, {p.upper:g}], got {p.threshold!r}",
                  "Thm 7 needs a threshold at or above the range's lower end; widen --lower/--upper to cover it")
    if p.instances < 1:
        raise bad("σ is too small for this ε: not even one instance fits",
                  f"raise --sigma or --epsilon (ε_max of one instance at δ is "
                  f"{epsilon_max_at(p.threshold, p.upper, p.sensitivity, p.sigma, p.delta, p.lower):.4g})")
    if not p.datasets:
        raise bad("name the private tables its questions read", "e.g. --table signups")


def watch_violations(events: list[WatchEvent]) -> list[str]:
    """Replays a watch's rows and lists every way they break the B9 filter (empty: none):
    an instance opened without room (spent + ε_max ≥ ε, or Σδ_j > δ), opened while another was
    open, a noisy threshold changed inside an instance, a ⊤ not charged ε_post(t), an open instance
    not charged ε_max at close, a question on a closed or exhausted watch, ``spent`` not the sum of
    the charges, rows not numbered 1, 2, … (two writers from the same state), or a history that does
    not begin with its ``create`` row."""
    out: list[str] = []
    spent = 0.0
    instances = 0
    rho: float | None = None
    position = 0
    state = "active"
    for i, ev in enumerate(events):
        s, p = ev.state, ev.state.params
        where = f"row {i + 1} ({ev.event})"
        if s.seq != i + 1:  # two writers read the same state: a lost update
            out.append(f"{where}: seq {s.seq}, expected {i + 1}")
        if i == 0 and ev.event != "create":  # the replay's counts start from the watch's registration
            out.append(f"{where}: the history does not begin with the watch's create row")
        if ev.event in ("open", "below", "above") and state != "active":
            out.append(f"{where}: a question on a {state} watch")
        if ev.event == "create":  # a new watch (a name may be reused once the old watch is closed)
            if state not in ("active", "closed") or (i and state != "closed"):
                out.append(f"{where}: created over a watch that was {state}")
            spent, instances, rho = 0.0, 0, None
        elif ev.event == "open":
            if rho is not None:
                out.append(f"{where}: instance {instances + 1} opened while instance {instances} was open")
            if spent + p.epsilon_max >= p.epsilon:
                out.append(f"{where}: opened with spent {spent:.6g} + ε_max {p.epsilon_max:.6g} ≥ ε {p.epsilon:g}")
            instances += 1
            if instances * p.instance_delta > p.delta * (1 + 1e-12):
                out.append(f"{where}: Σ δ_j = {instances * p.instance_delta:.3g} > δ {p.delta:g}")
            rho, position = s.noisy_threshold, 0
        elif ev.event in ("below", "above"):
            expected = None if ev.event == "above" else rho
            if rho is None or s.noisy_threshold != expected:
                out.append(f"{where}: the noisy threshold changed inside instance {instances}")
            position += 1
            if ev.event == "above":
                want = p.epsilon_post(position)
                if not math.isclose(ev.charged, want, rel_tol=1e-9):
                    out.append(f"{where}: ⊤ at position {position} charged {ev.charged:.6g}, ε_post is {want:.6g}")
                spent += ev.charged
                rho = None
            elif ev.charged:
                out.append(f"{where}: ⊥ charged {ev.charged:g}")
        elif ev.event == "close":
            want = p.epsilon_max if rho is not None else 0.0
            if not math.isclose(ev.charged, want, rel_tol=1e-9, abs_tol=1e-15):
                out.append(f"{where}: closing charged {ev.charged:.6g}, the open instance's ε_max is {want:.6g}")
            spent += ev.charged
            rho = None
        if not math.isclose(s.spent, spent, rel_tol=1e-9, abs_tol=1e-12) or s.instances != instances:
            out.append(f"{where}: the row says spent {s.spent:.6g} over {s.instances} instances, "
                       f"the events {spent:.6g} over {instances}")
        state = s.state
    return out

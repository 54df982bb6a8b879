"""The release store: a query over time buckets answered bucket by bucket, each bucket released once
(issue 28, part 1; docs/serving.md "The release store", docs/filters-and-ledger.md for the argument).

A dashboard panel re-asks one question with a moving range ("last 24 hours", refreshed every 30 s). On a
table whose owner declared when a bucket's data is complete (``final_after``, seconds after the bucket's
end), such a query (:func:`dpch.sql.bucketed.find`) is answered so:

1. Its buckets are the key domain of its time bucket over its range (the plan's, from the declared bounds
   and the WHERE range: no data read). A bucket the range covers only in part is answered **whole**: the
   range is widened to whole buckets, so each bucket is one piece of data, whatever range asks for it.
2. A bucket is *final* once ``final_after`` seconds have passed since its end, by the session's clock
   (``f(now − final_after) > v`` for a bucket v of the floor f). The store (:mod:`dpch.store.release_store`,
   per analyst and *shape*: the query without its range, ORDER BY and LIMIT, with its options and the
   tables' policies) holds each final bucket's release, and each open bucket's latest release, re-served
   until another bucket becomes final; ``dp_open_buckets = 'omit'`` leaves open buckets out instead.
3. The buckets it does not hold are released now, in **one** release of the shape restricted to their rows
   (``t >= first AND t < <start of the bucket after the last>`` for each run of them, the runs OR-ed:
   :func:`dpch.sql.bucketed.for_buckets`): planned, calibrated, admitted and charged as any query (its cost
   does not depend on how many buckets it covers), and stored.
4. The answer is the buckets' rows, re-sorted by the query's ORDER BY and cut by its LIMIT and OFFSET:
   post-processing of the releases, free. Its cost is the new release's, or nothing.

A query that is not of this shape, asks for a kind of release whose cost is settled afterwards, or sets
``dp_store = 'off'`` is released as written.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sqlglot import exp

from dpch.pipeline.kinds import Ordinary, release_kind
from dpch.pipeline.report import Explanation, Release
from dpch.privacy.cost import PrivacyCost
from dpch.sql.bucketed import Bucketed, at, end_probe, find, for_buckets
from dpch.sql.nodes import cast_to, render, show
from dpch.sql.parse import DIALECT
from dpch.sql.settings import option_overrides
from dpch.store import release_store
from dpch.store.release_store import StoredBucket, bucket_text

if TYPE_CHECKING:
    from dpch.accounting.accountant import BudgetStatus
    from dpch.sql.analyze import QueryPlan
    from dpch.sql.settings import QueryOptions
    from dpch.store.engine import Engine


class Session(Protocol):
    """What the release store uses of the connection that asks (a :class:`dpch.session.Session`)."""

    @property
    def analyst(self) -> str: ...

    @property
    def engine(self) -> Engine: ...

    #: seconds since the epoch (injectable: a test moves time without sleeping)
    clock: Callable[[], float]

    def plan(self, sql: str, **options: Any) -> tuple[QueryPlan, QueryOptions]: ...

    def explain_plan(self, plan: QueryPlan, opts: QueryOptions) -> Explanation: ...

    def release_plan(self, plan: QueryPlan, opts: QueryOptions, started: float) -> Release: ...

    def budget(self) -> BudgetStatus: ...


@dataclass(frozen=True)
class StorePlan:
    """What answering a bucketed query takes: its buckets, which the store holds, which to release now."""

    bucketed: Bucketed
    #: the store's key of the query's shape (:func:`shape_key`)
    shape: str
    #: the buckets the answer shows, ascending (open ones left out under ``dp_open_buckets = 'omit'``)
    buckets: tuple[Any, ...]
    #: the first bucket that is not final now (every bucket before it is), as the store writes it
    boundary: str
    stored: dict[str, StoredBucket]
    #: the buckets released now (none: the answer is all re-served)
    missing: tuple[Any, ...]
    #: the restricted query releasing :attr:`missing`, planned (None when nothing is missing)
    release: tuple[QueryPlan, QueryOptions] | None
    #: the open buckets among :attr:`buckets`
    open: tuple[Any, ...]
    #: the query's buckets left out because they are open (``dp_open_buckets = 'omit'``)
    omitted: int
    #: the open buckets left out because they were not released yet (they come with the next release)
    waiting: int
    final_after: int


def _final_after(plan: QueryPlan) -> int | None:
    private = [t for t in plan.relation.tables if t.private]
    values = {t.final_after for t in private}
    if len(values) != 1:
        return None
    return values.pop()


def eligible(plan: QueryPlan, opts: QueryOptions) -> Bucketed | None:
    """The query split into shape and range when the store answers it (see the module), else None."""
    if opts.store == "off" or opts.report_dropped:
        return None
    if _final_after(plan) is None or not isinstance(release_kind(plan, opts), Ordinary):
        return None
    bucketed = find(plan.query.select, [c.name for c in plan.relation.columns])
    if bucketed is None:
        return None
    key_index = plan.outputs[bucketed.output].key_index
    if key_index is None or plan.keys[key_index].values is None:
        return None
    return bucketed


def shape_key(session: Session, plan: QueryPlan, opts: QueryOptions, bucketed: Bucketed) -> str:
    """The store's key of a query's shape: the database, the shape's normalised SQL and bucket, the options
    that decide what is released, and the policies of the tables it reads (a changed bound or cap is another
    question, never answered from the old releases)."""
    released = dataclasses.asdict(dataclasses.replace(opts, intervals="none", open_buckets="release"))
    policies = []
    for table in plan.relation.tables:
        policy = table.as_dict()
        policy.pop("rows_verified", None)  # whether the data changed since a verification: not the question
        policies.append(policy)
    # sqlglot's rendering already evens out spacing and keyword case; identifiers keep theirs (ClickHouse's
    # names are case-sensitive: ``Ts`` and ``ts`` may be two columns)
    text = json.dumps({"database": session.engine.database,
                       "shape": bucketed.shape.sql(dialect=DIALECT),
                       "bucket": bucketed.bucket.sql(dialect=DIALECT),
                       "options": released, "policies": policies}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _column_type(plan: QueryPlan, name: str) -> str:
    for col in plan.relation.columns:
        if col.name == name:
            return col.type
    raise LookupError(name)  # find() took the column from the query, whose columns the plan resolved


def first_open(session: Session, plan: QueryPlan, bucketed: Bucketed, final_after: int) -> Any:
    """The bucket holding the instant ``final_after`` seconds before now: every bucket before it is final
    (its end is at least ``final_after`` seconds ago), it and every later one is not. The query's own bucket
    expression, evaluated by ClickHouse on that instant of the column's type (no table read)."""
    micros = cast_to(exp.Literal.number(int((session.clock() - final_after) * 1_000_000)), "Int64")
    # the instant as the column's type: a bucket of a column with its own zone is that zone's bucket
    instant = cast_to(exp.Anonymous(this="fromUnixTimestamp64Micro", expressions=[micros]),
                      _column_type(plan, bucketed.column))
    return session.engine.query_rows(render(exp.Select(expressions=[at(bucketed, instant)])))[0][0]


def bucket_end(session: Session, plan: QueryPlan, bucketed: Bucketed, value: Any) -> Any | None:
    """The start of the bucket after the bucket ``value`` (where a release of buckets up to ``value`` stops),
    or None when ClickHouse's answer is not a later bucket's start (the store is then not used)."""
    probe = end_probe(bucketed, value, _column_type(plan, bucketed.column))
    if probe is None:  # a bucket of no known length (none a plan accepts today): released as written
        return None
    end, ok = session.engine.query_rows(render(probe))[0]
    return end if ok else None


def missing_runs(domain: list[Any], missing: set[Any], last_end: Any) -> list[tuple[Any, Any]]:
    """Maximal runs of consecutive missing buckets of ``domain``, each as (its first bucket, the start of the
    bucket after its last: the next bucket of the domain, or ``last_end`` after the domain's last)."""
    runs: list[tuple[Any, Any]] = []
    first = None
    for i, v in enumerate(domain):
        if v in missing and first is None:
            first = v
        if first is not None and (i + 1 == len(domain) or domain[i + 1] not in missing):
            runs.append((first, domain[i + 1] if i + 1 < len(domain) else last_end))
            first = None
    return runs


def prepare(session: Session, plan: QueryPlan, opts: QueryOptions, options: dict[str, Any]) -> StorePlan | None:
    """How the store answers ``plan`` (None: it does not; the query is released as written). Reads the store,
    spends nothing; plans the release of the missing buckets (refused in words as any query is)."""
    bucketed = eligible(plan, opts)
    if bucketed is None:
        return None
    final_after = _final_after(plan)
    assert final_after is not None  # eligible() checked
    key_index = plan.outputs[bucketed.output].key_index
    assert key_index is not None
    domain = sorted(plan.keys[key_index].values or ())
    last_end = bucket_end(session, plan, bucketed, domain[-1]) if domain else None
    if last_end is None:
        return None
    boundary = first_open(session, plan, bucketed, final_after)
    open_ = tuple(v for v in domain if not v < boundary)
    buckets = tuple(v for v in domain if v < boundary or opts.open_buckets == "release")
    shape = shape_key(session, plan, opts, bucketed)
    stored = release_store.read(session.engine, session.analyst, shape, [bucket_text(v) for v in buckets],
                                bucket_text(boundary))
    missing = tuple(v for v in buckets if bucket_text(v) not in stored)
    waiting: tuple[Any, ...] = ()
    if all(v in open_ for v in missing) and any(bucket_text(v) in stored for v in open_):
        # only open buckets are missing (a new one began since the last release), and the open ones released
        # with the last final bucket are still served: the new ones wait for the next release, when another
        # bucket is final — so a refreshing panel pays once per bucket, not also once per new open bucket
        waiting, missing = missing, ()
        buckets = tuple(v for v in buckets if v not in waiting)
    release = None
    if missing:
        overrides = {**options, **option_overrides(plan.query.settings), "store": "off"}
        runs = missing_runs(domain, set(missing), last_end)
        restricted = for_buckets(bucketed, runs)
        release = session.plan(render(restricted), **overrides)
    return StorePlan(bucketed, shape, buckets, bucket_text(boundary), stored, missing, release,
                     tuple(v for v in open_ if v in buckets), len(domain) - len(buckets) - len(waiting),
                     len(waiting), final_after)


def _notes(planned: StorePlan, new: Release | None) -> list[str]:
    held = len(planned.buckets) - len(planned.missing)
    ids = sorted({b.release_id for b in planned.stored.values()})
    notes = [f"release store: {len(planned.buckets)} time buckets; {held} re-served from earlier releases"
             + (f" ({', '.join(ids[:5])}{', …' if len(ids) > 5 else ''})" if ids else "")
             + (f", {len(planned.missing)} released now" + (f" (release {new.release_id})" if new else "")
                if planned.missing else ", nothing released now (free)"),
             f"each bucket is answered whole: the range ({' AND '.join(show(c) for c in planned.bucketed.range)}) "
             "is widened to whole buckets"]
    if planned.open:
        notes.append(f"{_count(len(planned.open), 'bucket')} {_are(len(planned.open))} not final (data may "
                     f"still arrive until {planned.final_after} s after a bucket ends): their values are re-served "
                     "until another bucket becomes final, then released again")
    if planned.waiting:
        notes.append(f"{_count(planned.waiting, 'bucket')} begun since the last release {_are(planned.waiting)} left "
                     "out: released with the next one, when another bucket is final")
    if planned.omitted:
        notes.append(f"{_count(planned.omitted, 'bucket')} that {_are(planned.omitted)} not final yet "
                     f"{_are(planned.omitted)} left out (dp_open_buckets = 'omit')")
    return notes


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


def explanation(session: Session, plan: QueryPlan, opts: QueryOptions, planned: StorePlan) -> Explanation:
    """What answering from the store would do and pay: the release of the missing buckets, or nothing."""
    if planned.release is not None:
        explained = session.explain_plan(*planned.release)
        return dataclasses.replace(explained, notes=[*explained.notes, *_notes(planned, None)])
    explained = session.explain_plan(plan, opts)
    return dataclasses.replace(explained, cost=PrivacyCost.zero(), admissible=True, reason="", sql="",
                               notes=[*explained.notes, *_notes(planned, None)])


#: a released row with its intervals
Row = tuple[tuple[Any, ...], list[Any]]


def _sorted(planned: StorePlan, rows: list[Row]) -> list[Row]:
    """The query's ORDER BY on the assembled rows, as ClickHouse orders them: NULLs last unless NULLS FIRST;
    the sorts run from the last item to the first (each stable)."""
    for position, desc, nulls_first in reversed(planned.bucketed.order):
        present = [r for r in rows if r[0][position] is not None]
        absent = [r for r in rows if r[0][position] is None]
        present.sort(key=functools.partial(_cell, position), reverse=desc)
        rows = absent + present if nulls_first else present + absent
    return rows


def _cell(position: int, row: Row) -> Any:
    return row[0][position]


def answer(session: Session, plan: QueryPlan, opts: QueryOptions, planned: StorePlan, started: float) -> Release:
    """The query answered from the store (see the module): the missing buckets released in one release and
    stored, every bucket's rows assembled, ordered and limited as the query asks."""
    new: Release | None = None
    fresh: dict[str, StoredBucket] = {}
    if planned.release is not None:
        new = session.release_plan(*planned.release, started)
        position = planned.bucketed.output
        by_bucket: dict[Any, list[int]] = {}  # the release's rows of each bucket, in one pass
        for i, row in enumerate(new.rows):
            by_bucket.setdefault(row[position], []).append(i)
        for v in planned.missing:
            text = bucket_text(v)
            chosen = by_bucket.get(v, [])
            final = v not in planned.open
            fresh[text] = StoredBucket(text, [new.rows[i] for i in chosen], [list(new.intervals[i]) for i in chosen],
                                       final=final, boundary="" if final else planned.boundary,
                                       release_id=new.release_id)
        release_store.write(session.engine, session.analyst, planned.shape, list(fresh.values()))
    rows: list[Row] = []
    for v in planned.buckets:
        entry = fresh.get(bucket_text(v)) or planned.stored[bucket_text(v)]
        rows += list(zip(entry.rows, entry.intervals, strict=True))
    if planned.bucketed.order:
        rows = _sorted(planned, rows)
    b = planned.bucketed
    rows = rows[b.offset:] if b.limit is None else rows[b.offset:b.offset + b.limit]
    notes = _notes(planned, new)
    elapsed = _elapsed_ms(started)
    if new is not None:
        return dataclasses.replace(new, columns=list(plan.columns), rows=[r for r, _ in rows],
                                   intervals=[list(iv) for _, iv in rows], notes=[*new.notes, *notes],
                                   elapsed_ms=elapsed)
    # every release the answer re-serves (a refresh of a panel: the releases its buckets came from)
    ids = ",".join(sorted({e.release_id for e in planned.stored.values()}))
    return Release(columns=list(plan.columns), rows=[r for r, _ in rows], intervals=[list(iv) for _, iv in rows],
                   cost=PrivacyCost.zero(), confidence=opts.confidence, mechanism=opts.resolved_mechanism,
                   measures=[], budget=session.budget(), release_id=ids, elapsed_ms=elapsed, notes=notes)


def _elapsed_ms(started: float) -> float:
    """The time the whole answer took, as a release reports it."""
    return (time.perf_counter() - started) * 1000.0


__all__ = ["StorePlan", "answer", "bucket_end", "eligible", "explanation", "first_open", "missing_runs", "prepare",
           "shape_key"]

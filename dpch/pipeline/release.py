"""Stage 6, release: draw the noise of a charged plan on exact :class:`GroupData` and turn it
into result rows (post-processing only from here on).

The caller must have charged ``noise.cost`` durably first (docs/design.md rule 2); the audit calls
:func:`release_rows` on fixed exact inputs to redraw the noise many times.

A key release (a GROUP BY or DISTINCT without aggregate, :attr:`QueryPlan.key_release`) takes one of
two paths: :func:`domain_rows` when every key has a data-independent domain (no charge, no noise,
nothing executed), else :func:`release_rows` with partition selection as its only mechanism (the
selected keys, no counts; the whole ε and δ on the selection)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dpch.errors import QueryRejected
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline.calibrate import NoisePlan
from dpch.pipeline.execute import GroupData
from dpch.pipeline.postprocess import (
    build_rows,
    having_order_limit,
    pick_quantiles,
)
from dpch.sql.aggregate_kinds import stat_intervals, stat_values, statistic
from dpch.sql.analyze import QueryPlan
from dpch.sql.settings import QueryOptions

Interval = tuple[float, float]
Rows = tuple[list[str], list[tuple[Any, ...]], list[list[Interval | None]]]


class Noise:
    """A session's noise source, one draw sequence at a time (the generator is not thread-safe)."""

    def __init__(self, seed: int | None = None) -> None:
        self.source = NoiseSource(seed)
        self._lock = threading.Lock()

    def cap_key(self) -> tuple[int, int]:
        """A fresh key for one release's contribution cap (:meth:`NoiseSource.cap_key`)."""
        with self._lock:
            return self.source.cap_key()

    @contextmanager
    def drawing(self) -> Iterator[NoiseSource]:
        """The source, held for one release's draws."""
        with self._lock:
            yield self.source


def release_rows(plan: QueryPlan, opts: QueryOptions, noise: NoisePlan, data: GroupData,
                 source: NoiseSource) -> Rows:
    """Draws the noise for ``data`` and post-processes it into (columns, rows, intervals)."""
    keys, measures, histograms = data.keys, data.measures, data.histograms
    shared: dict[str, Any] = {}
    if noise.selection is not None:
        counts = noise.selection.noisy_counts(data.units, source)
        keep = noise.selection.keep(counts)
        # the kept keys in an order that is a function of the kept set alone: ClickHouse's GROUP BY
        # order may depend on the data (hash tables, threads), and a LIMIT without ORDER BY would
        # then choose among the selected keys by it
        chosen = _in_order([i for i, kept in enumerate(keep) if kept], keys)
        keys = [keys[i] for i in chosen]
        measures = {name: arr[chosen] for name, arr in measures.items()}
        histograms = {name: [hs[i] for i in chosen] for name, hs in histograms.items()}
        if noise.shared is not None:  # the count of units is the answer: its selection noise is its noise
            shared[noise.shared] = counts[chosen]
    noisy = {name: mech.release(measures[name], source) for name, mech in noise.additive.items()} | shared
    quantiles = {
        stat.name: pick_quantiles(stat, histograms[stat.measures[0]], noise, source)
        for stat in plan.stats.values() if statistic(stat).selected
    }
    values = {name: stat_values(stat, noisy, quantiles) for name, stat in plan.stats.items()}
    rows, intervals = build_rows(plan.outputs, keys, values, output_intervals(plan, opts, noise, noisy))
    rows, intervals = having_order_limit(plan, keys, values, rows, intervals)
    return plan.columns, rows, intervals


def output_intervals(plan: QueryPlan, opts: QueryOptions, noise: NoisePlan,
                     noisy: dict[str, Any]) -> Callable[[Any], dict[str, list[Interval]] | None]:
    """For :func:`~dpch.pipeline.postprocess.build_rows`: an output column's statistics' intervals
    from the ``noisy`` measures, each at its share of ``1 − confidence`` (a union bound over the
    statistics the column combines), or None when one has no interval (a quantile)."""

    def intervals_for(out: Any) -> dict[str, list[Interval]] | None:
        level = 1.0 - (1.0 - opts.confidence) / max(1, len(set(out.stats)))
        ivs = {name: stat_intervals(plan.stats[name], noisy, noise.half_width, level) for name in set(out.stats)}
        found = {name: iv for name, iv in ivs.items() if iv is not None}
        return found if len(found) == len(ivs) else None

    return intervals_for


def domain_rows(plan: QueryPlan) -> Rows:
    """The rows of a free key release (:attr:`QueryPlan.free`): every key of the declared domain,
    whether or not a row has the key, then HAVING, ORDER BY and LIMIT on those keys.

    Sound without any charge: the answer is a function of the policy (declared values and bounds),
    the query text (WHERE's constant time ranges) and public tables only. No private row is read and
    no noise is drawn, so neighbouring tables give the same answer with probability 1. Returning only
    the keys that occur in the data would leak exactly which keys occur, hence this function never
    looks at the data."""
    if not plan.free or plan.group_domain is None:
        raise ValueError("domain_rows answers only a key release whose keys all have a declared domain")
    keys = [tuple(k) for k in plan.group_domain]
    rows, intervals = build_rows(plan.outputs, keys, {}, lambda out: None)
    rows, intervals = having_order_limit(plan, keys, {}, rows, intervals)
    return plan.columns, rows, intervals


def check_key_release(plan: QueryPlan, opts: QueryOptions) -> None:
    """Refuses (before anything is charged, from the plan and options only) a key release of private
    keys that cannot run: partition selection needs ``dp_delta``, and an accuracy target has no noisy
    value to apply to."""
    if not plan.key_release or plan.free:
        return
    private = ", ".join(k.label for k in plan.keys if k.values is None)
    if opts.delta <= 0:
        raise QueryRejected(
            f"listing the keys of {private} needs dp_delta > 0: keys without a declared domain are "
            "released by partition selection, an (ε, δ) mechanism",
            hint="add e.g. SETTINGS dp_delta = 1e-6, or list a public column with declared values")
    if opts.accuracy_first:
        raise QueryRejected("dp_accuracy and dp_relative_error apply to noisy values; a query listing keys has none",
                            hint="drop them: the keys are chosen by partition selection at dp_epsilon, dp_delta")


def _canonical(key: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """A key's place in the released order: by its values (one ClickHouse type per column), NULL last."""
    return tuple((v is None, 0 if v is None else v) for v in key)


def _in_order(indexes: list[int], keys: list[tuple[Any, ...]]) -> list[int]:
    """``indexes`` sorted by their keys' values, or by their text where values do not compare."""
    try:
        return sorted(indexes, key=lambda i: _canonical(keys[i]))
    except TypeError:
        return sorted(indexes, key=lambda i: repr(keys[i]))

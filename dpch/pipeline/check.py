"""Stage 3, check: run the emitted tree on a synthetic row before anything is charged.

Both probes of :func:`dpch.sql.rewrite.emit_probe_sqls` run (the query as it will run, and with
WHERE dropped and joins made LEFT so the synthetic row reaches every aggregate). A type error or
a constant argument ClickHouse refuses surfaces here, where it costs nothing and depends on no
private row (docs/design.md rule 5).

Probes are cached by the query's *shape* (:func:`dpch.sql.shape.probe_shape`): numbers outside the
registry's constant arguments are replaced by their types, because their values cannot decide
whether ClickHouse runs the query. A dashboard that changes a threshold probes once."""

from __future__ import annotations

import threading

from dpch.sql.analyze import QueryPlan
from dpch.sql.rewrite import emit_probe_sqls, emit_tree
from dpch.sql.shape import probe_shape
from dpch.store.engine import Engine

#: query shapes remembered as already probed, per session
PROBE_CACHE_SIZE = 1024


class Probe:
    """Probes emitted SQL on ``engine``; a query whose shape passed once is not probed again."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: emitted texts and shapes that passed (a repeated text skips even rendering its shape)
        self._texts: set[str] = set()
        self._shapes: set[str] = set()
        self._lock = threading.Lock()

    def check(self, plan: QueryPlan, emitted: str) -> None:
        """Raises the engine's clear error if the probe fails; spends nothing. ``emitted`` is the
        text that will run, rendered from the same tree as the shape."""
        with self._lock:
            if emitted in self._texts:
                return
        shape = probe_shape(emit_tree(plan))
        with self._lock:
            known = shape in self._shapes
        if not known:
            for probe in emit_probe_sqls(plan, self.engine.database):
                self.engine.probe(probe)
        with self._lock:
            for seen, key in ((self._texts, emitted), (self._shapes, shape)):
                if len(seen) >= PROBE_CACHE_SIZE:
                    seen.clear()
                seen.add(key)

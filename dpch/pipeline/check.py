"""Stage 3, check: run the emitted tree on a synthetic row before anything is charged.

Both probes of :func:`dpch.sql.rewrite.emit_probe_sqls` run (the query as it will run, and with
WHERE dropped and joins made LEFT so the synthetic row reaches every aggregate). A type error or
a constant argument ClickHouse refuses surfaces here, where it costs nothing and depends on no
private row (docs/design.md rule 5)."""

from __future__ import annotations

import threading

from dpch.sql.analyze import QueryPlan
from dpch.sql.rewrite import emit_probe_sqls
from dpch.store.engine import Engine

#: emitted queries remembered as already probed, per session
PROBE_CACHE_SIZE = 1024


class Probe:
    """Probes emitted SQL on ``engine``; an emitted text that passed once is not probed again."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._passed: set[str] = set()
        self._lock = threading.Lock()

    def check(self, plan: QueryPlan, emitted: str) -> None:
        """Raises the engine's clear error if the probe fails; spends nothing."""
        with self._lock:
            if emitted in self._passed:
                return
        for probe in emit_probe_sqls(plan, self.engine.database):
            self.engine.probe(probe)
        with self._lock:
            if len(self._passed) >= PROBE_CACHE_SIZE:
                self._passed.clear()
            self._passed.add(emitted)

"""Stage 3, check: the probe runs before the charge, fails with a clear error that spends
nothing, and is not repeated for an emitted text that already passed."""

from __future__ import annotations

import pytest

from dpch import DpchError
from dpch.pipeline.check import Probe
from dpch.sql.rewrite import emit_sql
from dpch.store.engine import Engine
from tests.helpers import ledger_rows


class CountingEngine(Engine):
    """The real engine, counting the probes it runs (the database stays real)."""

    probes = 0

    def probe(self, sql: str) -> None:
        type(self).probes += 1
        super().probe(sql)


def test_probe_runs_once_per_emitted_text(session, store_dsn):
    engine = CountingEngine(store_dsn, database=session.engine.database)
    try:
        probe = Probe(engine)
        plan, _ = session.plan("SELECT count() FROM t WHERE x > 1")
        emitted = emit_sql(plan, engine.database)
        CountingEngine.probes = 0
        probe.check(plan, emitted)
        ran = CountingEngine.probes
        assert ran == 2  # the filtered and the unfiltered probe
        probe.check(plan, emitted)
        assert CountingEngine.probes == ran  # cached: not probed again
    finally:
        engine.close()


def test_a_failing_probe_spends_nothing(session):
    before = ledger_rows(session)
    with pytest.raises(DpchError):
        session.query("SELECT sum(x) FROM t WHERE region > 1")  # String compared with a number
    assert ledger_rows(session) == before

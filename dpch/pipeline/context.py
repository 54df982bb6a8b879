"""What the stages of one query run against: the store, the analyst's accountant, the probe
cache and the noise source. A session owns one; the gateway's sessions each have their own."""

from __future__ import annotations

from dataclasses import dataclass

from dpch.accounting.accountant import Accountant
from dpch.pipeline.check import Probe
from dpch.pipeline.release import Noise
from dpch.store.engine import Engine


@dataclass(frozen=True)
class QueryContext:
    """The services a query's stages use (no callbacks into the session)."""

    engine: Engine
    accountant: Accountant
    probe: Probe
    noise: Noise

    @property
    def database(self) -> str:
        return self.engine.database

"""dpch: a differential-privacy proxy for ClickHouse.

    import dpch
    with dpch.connect("chdb:///var/lib/dpch", analyst="ana") as session:
        release = session.query("SELECT region, avg(spend) FROM visits GROUP BY region")
        print(release.rows, release.intervals, release.cost)

The public names are loaded on first use (PEP 562): ``import dpch`` alone must stay cheap, because
``dpch --version`` and every CLI start import this package before anything else, and the pipeline
behind :func:`connect` pulls in NumPy, SciPy and the ClickHouse client (docs/benchmarks.md, Start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dpch.errors import (
    BudgetExceeded,
    ConfigError,
    DpchError,
    ExecutionError,
    MissingBoundsError,
    ParseError,
    PolicyError,
    QueryRejected,
    StoreLocked,
)

if TYPE_CHECKING:
    from dpch.accounting.budget import Budget
    from dpch.api import PrivateSession
    from dpch.connection import connect
    from dpch.pipeline.report import Release
    from dpch.policy.resolve import Policy
    from dpch.session import Session

__version__ = "0.1.0"

#: public name → the module that defines it, imported on first access
_LAZY = {
    "Budget": "dpch.accounting.budget",
    "PrivateSession": "dpch.api",
    "connect": "dpch.connection",
    "Release": "dpch.pipeline.report",
    "Policy": "dpch.policy.resolve",
    "Session": "dpch.session",
}

__all__ = [
    "Budget", "BudgetExceeded", "ConfigError", "DpchError", "ExecutionError", "MissingBoundsError",
    "ParseError", "Policy", "PolicyError", "PrivateSession", "QueryRejected", "Release", "Session", "StoreLocked",
    "connect",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later accesses skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

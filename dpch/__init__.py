"""dpch: a differential-privacy proxy for ClickHouse.

    import dpch
    with dpch.connect("chdb:///var/lib/dpch", analyst="ana") as session:
        release = session.query("SELECT region, avg(spend) FROM visits GROUP BY region")
        print(release.rows, release.intervals, release.cost)
"""

from dpch.accounting.budget import Budget
from dpch.api import PrivateSession
from dpch.connection import connect
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
from dpch.pipeline.report import Release
from dpch.policy.resolve import Policy
from dpch.session import Session

__version__ = "0.1.0"

__all__ = [
    "Budget", "BudgetExceeded", "ConfigError", "DpchError", "ExecutionError", "MissingBoundsError",
    "ParseError", "Policy", "PolicyError", "PrivateSession", "QueryRejected", "Release", "Session", "StoreLocked",
    "connect",
]

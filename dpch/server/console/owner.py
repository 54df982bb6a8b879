"""The data owner's JSON endpoints (users with ``owner = true``): budgets, spend, releases, locks,
policies, audit reports; unlocking an analyst and setting a budget.

Every read and action goes through the accounting API the ``dpch budget`` commands use
(:class:`~dpch.accounting.accountant.Accountant` ``status``/``recent``/``unlock``/``set_budget``,
:class:`~dpch.accounting.budget.BudgetStore`, :class:`~dpch.accounting.locks.LockStore`): the
console adds no second way to change a budget or a lock. What it shows is ledger metadata (who
spent how much, when, on which dataset) and the tables' annotations: never a released value, a
row or an aggregate of the data.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from dpch.accounting.accountant import Accountant, entry_dict
from dpch.accounting.budget import Budget, BudgetStore
from dpch.accounting.locks import LockStore
from dpch.errors import DpchError
from dpch.server.console.analyst import spend_series
from dpch.server.console.requests import Call, ConsoleError, number, optional_text, text
from dpch.server.errors import from_dpch
from dpch.server.ledger_views import ALL
from dpch.store.engine import Engine

#: the directory of ``dpch audit --report`` files the owner view links to
AUDIT_ENV = "DPCH_AUDIT_REPORTS"
#: report files served (``dpch audit --report x.html`` or ``x.png``)
_REPORT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.(html|png)$")
#: the most releases listed in "recent releases"
RECENT = 50
#: the hint shown when no report directory is configured
AUDIT_HOW = ("run `dpch audit --table visits --query \"SELECT count() FROM visits\" --epsilon 1 "
             f"--report reports/audit.html`, then start `dpch serve` with {AUDIT_ENV}=reports")


def overview(call: Call) -> dict[str, Any]:
    """Per database: each analyst's budgets (analyst-wide and per dataset) with spend over time and
    lock, the spend per dataset over all analysts, and the most recent releases."""
    return {"databases": [call.run(partial(_database, call, db)) for db in call.gateway.config.databases]}


def _database(call: Call, database: str) -> dict[str, Any]:
    engine = call.gateway.engine(database)
    settings = BudgetStore(engine).all_settings()
    locks = {lock.analyst: lock for lock in LockStore(engine).all()}
    analysts = sorted(set(settings) | {u.analyst for u in call.gateway.config.users.values()} | set(locks))
    rows, releases = [], []
    datasets: dict[str, dict[str, float]] = {}
    for analyst in analysts:
        accountant = _accountant(call, engine, analyst)
        try:
            status = accountant.status(recent=0).as_dict(internal=True)
            entries = accountant.recent(ALL)
        except DpchError as exc:  # e.g. an analyst of the config whose budget was never set
            rows.append({"analyst": analyst, "error": from_dpch(exc).wire.get("message"),
                         "locked": locks[analyst].as_dict(internal=True) if analyst in locks else None})
            continue
        status["series"] = spend_series(entries)
        rows.append(status)
        for entry in entries:
            for scope in entry.scopes:
                spent = datasets.setdefault(scope, {"epsilon": 0.0, "delta": 0.0, "releases": 0})
                spent["epsilon"] += entry.counted.epsilon
                spent["delta"] += entry.counted.delta
                spent["releases"] += 1
        releases += [entry_dict(e) | {"analyst": analyst} for e in entries[-RECENT:]]
    releases.sort(key=lambda r: r["time"], reverse=True)
    return {"database": database, "analysts": rows, "datasets": datasets, "recent": releases[:RECENT],
            "locked": [lock.as_dict(internal=True) | {"analyst": lock.analyst} for lock in locks.values()]}


def unlock(call: Call) -> dict[str, Any]:
    """Clears a tripwire lock (``dpch budget unlock``)."""
    analyst = text(call.data, "analyst", limit=200)
    engine = call.gateway.engine(optional_text(call.data, "database"))
    was = call.run(lambda: _owner_action(lambda: _accountant(call, engine, analyst).unlock()))
    return {"analyst": analyst, "database": engine.database, "unlocked": was}


def set_budget(call: Call) -> dict[str, Any]:
    """Sets an analyst's budget, analyst-wide or on one dataset (``dpch budget set``)."""
    analyst = text(call.data, "analyst", limit=200)
    epsilon = number(call.data, "epsilon")
    if epsilon is None:
        raise ConsoleError(400, "the field 'epsilon' is required")
    delta = number(call.data, "delta", default=1e-6)
    engine = call.gateway.engine(optional_text(call.data, "database"))
    dataset = optional_text(call.data, "dataset") or ""
    if dataset and "." not in dataset:  # as `dpch budget set --dataset`: a table of the served database
        dataset = f"{engine.database}.{dataset}"

    def work() -> None:
        _accountant(call, engine, analyst).set_budget(Budget(epsilon, delta or 0.0), dataset=dataset)

    call.run(lambda: _owner_action(work))
    return {"analyst": analyst, "database": engine.database, "dataset": dataset,
            "budget": {"epsilon": epsilon, "delta": delta}}


def policies(call: Call) -> dict[str, Any]:
    """Each served database's tables with their annotations in force."""
    user = call.session.user
    return {"databases": [{"database": db, "tables": call.run(
        partial(_owner_action, partial(call.gateway.table_policies, user, db)))}
        for db in call.gateway.config.databases]}


def audits(call: Call) -> dict[str, Any]:
    """The ``dpch audit`` reports in ``$DPCH_AUDIT_REPORTS``, or how to produce one."""
    folder = report_dir()
    if folder is None:
        return {"directory": None, "reports": [], "how": AUDIT_HOW}
    reports = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and _REPORT_NAME.match(path.name):
            stat = path.stat()
            reports.append({"name": path.name, "href": f"/console/audit/{path.name}", "bytes": stat.st_size,
                            "time": datetime.fromtimestamp(stat.st_mtime, UTC).isoformat()})
    return {"directory": str(folder), "reports": reports, "how": AUDIT_HOW}


def report_dir() -> Path | None:
    """The configured report directory, if it exists."""
    value = os.environ.get(AUDIT_ENV)
    if not value:
        return None
    folder = Path(value)
    return folder if folder.is_dir() else None


def report_file(name: str) -> Path:
    """One report file by name (only a plain file name of the report directory; no path)."""
    folder = report_dir()
    if folder is None or not _REPORT_NAME.match(name):
        raise ConsoleError(404, "no such audit report")
    path = folder / name
    if not path.is_file():
        raise ConsoleError(404, "no such audit report")
    return path


def _accountant(call: Call, engine: Engine, analyst: str) -> Accountant:
    return Accountant(engine, analyst, ledger_fsync=call.gateway.config.ledger_fsync)


def _owner_action(work: Any) -> Any:
    try:
        return work()
    except DpchError as exc:
        raise from_dpch(exc) from None

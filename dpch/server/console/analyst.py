"""The analyst's JSON endpoints: schema, explain, query, refine, history, budget.

Every answer is for the signed-in user's own analyst only (no endpoint takes an analyst name).
A query goes through :meth:`Gateway.release_wire` — :meth:`Gateway.answer`, the same function the
ClickHouse interface's ``/?query=`` calls — so it is planned, admitted, charged (durably, before
noise) and cached exactly as an HTTP query is; the console adds only presentation (half-widths and
which chart fits). History and budgets come from the ledger through the accountant.
"""

from __future__ import annotations

from typing import Any

from sqlglot.errors import SqlglotError

from dpch.accounting.accountant import entry_dict
from dpch.accounting.ledger import LedgerEntry
from dpch.errors import DpchError
from dpch.server.console.requests import Call, ConsoleError, number, optional_text, options, text
from dpch.server.errors import from_dpch, syntax_error
from dpch.server.ledger_views import ALL, budget_warning

#: ask before a query costing more than this share of the remaining budget: the shell's default
#: (``dpch.cli.shell.DEFAULT_CONFIRM_SHARE``; the server may not import the CLI, a test keeps them equal)
CONFIRM_SHARE = 0.25
#: the most history rows one request lists
MAX_HISTORY = 1000
#: the most points of a spend-over-time series (the latest are kept)
MAX_POINTS = 500
#: column types drawn as a time axis (lines with bands) rather than as bars
_TIME_TYPES = ("Date", "DateTime", "Nullable(Date", "Nullable(DateTime")


def schema(call: Call) -> dict[str, Any]:
    """The tables the user may query and their columns (for completion and the policy panel)."""
    database = optional_text(call.data, "database")
    tables = call.run(lambda: call.gateway.table_policies(call.session.user, database))
    return {
        "database": database or call.gateway.config.database,
        "databases": list(call.gateway.config.databases),
        "tables": [{"name": t["table"], "public": t["public"], "privacy_unit": t["privacy_unit"],
                    "describe": t["describe"],
                    "columns": [{"name": n, "type": c["type"], "describe": c["describe"]}
                                for n, c in t["columns"].items()]} for t in tables],
    }


def explain(call: Call) -> dict[str, Any]:
    """EXPLAIN DP as data (free), with the budget left and whether the page should ask first."""
    sql = text(call.data, "sql")
    database = optional_text(call.data, "database")
    opts = options(call.data)
    session = call.gateway.session(call.session.user, database)

    def work() -> tuple[dict[str, Any], Any]:
        try:
            return session.explain(sql, **opts).as_dict(), session.accountant.status(recent=0)
        except SqlglotError:
            raise syntax_error(sql) from None

    data, status = call.run(lambda: _dp(call, work))
    cost, left = data["cost"], status.remaining
    data["remaining"] = {"epsilon": left.epsilon, "delta": left.delta, "rho": left.rho}
    data["share"] = spend_share(cost, left.epsilon, left.delta, left.rho)
    data["confirm_share"] = CONFIRM_SHARE
    data["confirm"] = bool(data["admissible"]) and data["share"] > CONFIRM_SHARE
    return data


def spend_share(cost: dict[str, Any], epsilon: float, delta: float, rho: float | None) -> float:
    """The share of what is left a request would spend, as the shell computes it: ρ under a zCDP
    filter, else the larger of the ε and δ shares."""
    if cost.get("rho") is not None and rho is not None:
        return cost["rho"] / rho if rho > 0 else float("inf")
    share = cost["epsilon"] / epsilon if epsilon > 0 else float("inf")
    if cost.get("delta") and delta > 0:
        share = max(share, cost["delta"] / delta)
    return share


def query(call: Call) -> dict[str, Any]:
    """Runs the query on the DP path; the release with half-widths, a chart hint and the budget left."""
    sql = text(call.data, "sql")
    database = optional_text(call.data, "database")
    opts = options(call.data)
    user = call.session.user
    wire = call.run(lambda: call.gateway.release_wire(user, sql, database=database, options=opts))
    call.session.remember(wire.get("release_id", ""), " ".join(sql.split()))
    return present(wire)


def refine(call: Call) -> dict[str, Any]:
    """A less noisy version of an accuracy-first answer (charged the increment)."""
    request: dict[str, Any] = {"release_id": optional_text(call.data, "release_id")}
    for name in ("accuracy", "relative_error", "max_epsilon"):
        request[name] = number(call.data, name)
    database = optional_text(call.data, "database")
    wire = call.run(lambda: _dp(call, lambda: call.gateway.refine_wire(call.session.user, request,
                                                                        database=database)))
    call.session.remember(wire.get("release_id", ""), "refine " + str(request["release_id"] or "(latest)"))
    return present(wire)


def history(call: Call) -> dict[str, Any]:
    """The user's analyst's releases from the ledger, newest first, with the SQL this browser ran."""
    limit = int(number(call.data, "limit", default=50) or 0)
    if not 0 <= limit <= MAX_HISTORY:
        raise ConsoleError(400, f"the field 'limit' must be between 0 and {MAX_HISTORY}")
    session = call.gateway.session(call.session.user, optional_text(call.data, "database"))
    entries = call.run(lambda: _dp(call, lambda: session.accountant.recent(limit)))
    remembered = call.session.sql
    return {"analyst": call.session.user.analyst,
            "releases": [entry_dict(e) | {"sql": remembered.get(e.release_id)} for e in reversed(entries)]}


def budget(call: Call) -> dict[str, Any]:
    """The user's analyst's budget (per scope), a warning when low, and spend over time."""
    user = call.session.user
    session = call.gateway.session(user, optional_text(call.data, "database"))
    status, entries = call.run(lambda: _dp(call, lambda: (session.accountant.status(recent=0),
                                                            session.accountant.recent(ALL))))
    data = status.as_dict()  # not internal: an analyst never sees why it is locked
    data["warning"] = budget_warning(status, call.gateway.config.warning_share_for(user))
    data["series"] = spend_series(entries)
    return data


def spend_series(entries: list[LedgerEntry]) -> list[dict[str, Any]]:
    """Cumulative ε (and δ) over time, as the filter counts each release (a reservation at its worst)."""
    points = []
    epsilon = delta = 0.0
    for entry in sorted(entries, key=lambda e: e.time):
        counted = entry.counted
        epsilon += counted.epsilon
        delta += counted.delta
        points.append({"time": entry.time.isoformat(), "epsilon": epsilon, "delta": delta})
    return points[-MAX_POINTS:]


def present(wire: dict[str, Any]) -> dict[str, Any]:
    """A release as the page shows it: each noisy value's ± half-width, and which chart fits (bars
    for grouped results; when a key is a date or time, a line with a band over it, one line per
    value of the other keys), decided from the release's shape (which columns carry intervals,
    their types), never from the values."""
    intervals = wire.get("intervals") or []
    wire["half_widths"] = [[None if iv is None else (iv[1] - iv[0]) / 2 for iv in row] for row in intervals]
    columns = wire.get("columns") or []
    noisy = [j for j in range(len(columns)) if any(row[j] is not None for row in intervals)]
    keys = [j for j in range(len(columns)) if j not in noisy]
    chart: dict[str, Any] | None = None
    if keys and noisy and len(wire.get("rows") or []) > 1:
        times = [j for j in keys if str(wire["types"][j]).startswith(_TIME_TYPES)]
        if times:  # one line per value of the other keys (their series), over the first time key
            chart = {"kind": "line", "key": times[0], "keys": keys, "values": noisy,
                     "series": [j for j in keys if j != times[0]]}
        else:
            chart = {"kind": "bar", "key": keys[0], "keys": keys, "values": noisy}
    wire["chart"] = chart
    wire["spent"] = wire.get("cost")
    wire["remaining"] = (wire.get("budget") or {}).get("remaining")
    return wire


def _dp(call: Call, work: Any) -> Any:
    """Runs ``work`` (a read of the session or accountant), its dpch errors as the gateway words them."""
    try:
        return work()
    except DpchError as exc:
        raise from_dpch(exc) from None

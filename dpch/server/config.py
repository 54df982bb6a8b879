"""The gateway's configuration: a TOML file mapping ClickHouse users to dpch analysts.

```toml
[server]
dsn = "chdb:///var/lib/dpch"        # the store this process owns (or http://... a ClickHouse server)
databases = ["default"]             # databases served; the first is the default
host = "127.0.0.1"
port = 8123
tcp_port = 9000                     # optional: ClickHouse's native TCP protocol too (dpch/server/native)
display_name = "dpch"               # X-ClickHouse-Server-Display-Name
cache_ttl = 60                      # seconds a released answer is re-served for free; 0 = off
max_request_bytes = 1048576
query_timeout = 30                  # seconds before a request is answered TIMEOUT_EXCEEDED
max_concurrent = 32                 # requests executing at once (more get TOO_MANY_SIMULTANEOUS_QUERIES)
metadata_timeout = 2                # seconds ClickHouse lets a metadata query (system.*, SHOW, ...) run
policy = "policy.toml"              # optional TOML overriding the tables' dp: annotations
access_log = "-"                    # "-" = stderr, or a file path (JSON lines)
accept_settings = []                # more URL settings to accept and ignore
ledger_fsync = true                 # optional: fsync every ledger INSERT (survives power loss; slower)
admission = "auto"                  # on a ClickHouse server: keeper (every gateway shares one budget through
                                    # ClickHouse Keeper), owner (this gateway alone), auto (keeper if the
                                    # server has Keeper); docs/serving.md "One gateway, many gateways"
cluster = "dpch_cluster"            # optional: create dpch's tables ON CLUSTER with replicated engines
reconcile_interval = 60             # seconds between passes of the ledger reconciler (Keeper); 0 = start-up only
reconcile_grace = 30                # a row younger than this is left to the process writing it
budget_warning_share = 0.1          # X-Dpch-Budget-Warning (and dpch.budget's warning) when remaining ε
                                    # is below this share of the budget; 0 = never warn

[users.grafana]                     # a ClickHouse user name
password_sha256 = "5e8848..."       # or password = "..." (plain, for tests)
analyst = "bi"                      # whose budget pays (default: the user name)
epsilon = 3.0                       # optional: sets the analyst's budget at startup
delta = 1e-6
renew = "daily"                     # optional: the budget restarts each UTC day, week or month
lifetime_epsilon = 30.0             # optional, with renew: a cap over all periods (else unbounded)
lifetime_delta = 1e-5
cache_ttl = 300                     # optional: this user's release-cache TTL (default: [server] cache_ttl)
budget_warning_share = 0.2          # optional: this user's warning share (default: [server]'s)
dp_intervals = "columns"            # optional: default of SETTINGS dp_intervals for this user (a query's
                                    # own setting wins): <c>_lo, <c>_hi after each noisy column
owner = true                        # optional: a data owner, who may open the web console's /admin
```
"""

from __future__ import annotations

import hashlib
import hmac
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpch.accounting.budget import DEFAULT_DELTA, NO_RENEWAL, Budget, Renewal
from dpch.errors import ConfigError
from dpch.sql.settings import INTERVAL_MODES
from dpch.store.keeper import MODES

_SERVER_KEYS = {
    "dsn", "database", "databases", "host", "port", "tcp_port", "display_name", "cache_ttl", "max_request_bytes",
    "query_timeout", "max_concurrent", "policy", "access_log", "accept_settings", "keep_alive_timeout",
    "metadata_timeout", "ledger_fsync", "budget_warning_share", "admission", "cluster", "reconcile_interval",
    "reconcile_grace",
}
_USER_KEYS = {"password", "password_sha256", "analyst", "epsilon", "delta", "cache_ttl", "budget_warning_share",
              "dp_intervals", "renew", "lifetime_epsilon", "lifetime_delta", "owner"}


@dataclass(frozen=True)
class User:
    """A ClickHouse user name the gateway accepts, and the analyst whose budget it spends."""

    name: str
    analyst: str
    password_sha256: str
    budget: Budget | None = None
    #: how :attr:`budget` renews (set with it at startup; docs/filters-and-ledger.md)
    renewal: Renewal = NO_RENEWAL
    #: seconds this user is re-served a cached release (None: the server's ``cache_ttl``)
    cache_ttl: float | None = None
    #: warn when remaining ε / budget ε is below this (None: the server's ``budget_warning_share``)
    budget_warning_share: float | None = None
    #: this user's default for ``SETTINGS dp_intervals`` (None: ``'none'``; a query's setting wins)
    dp_intervals: str | None = None
    #: a data owner: may open the web console's owner view (/admin: budgets, locks, policies)
    owner: bool = False

    def check(self, password: str) -> bool:
        digest = hashlib.sha256(password.encode()).hexdigest()
        return hmac.compare_digest(digest, self.password_sha256)


@dataclass(frozen=True)
class ServerConfig:
    """Everything ``dpch serve`` needs; see the module docstring for the TOML form."""

    dsn: str | None = None
    databases: tuple[str, ...] = ("default",)
    host: str = "127.0.0.1"
    port: int = 8123
    #: the native-protocol listener's port beside the HTTP one (None: no native listener; 0: a free port)
    tcp_port: int | None = None
    display_name: str = "dpch"
    cache_ttl: float = 60.0
    max_request_bytes: int = 1 << 20
    query_timeout: float = 30.0
    max_concurrent: int = 32
    keep_alive_timeout: float = 10.0
    #: ClickHouse's own max_execution_time for metadata queries: they share the engine with
    #: releases, so this bounds how long one can delay another analyst's release
    metadata_timeout: float = 2.0
    policy: str | None = None
    access_log: str | None = "-"
    accept_settings: tuple[str, ...] = ()
    #: fsync every ledger INSERT (docs/filters-and-ledger.md); None keeps the ledger table's setting
    #: (or follows $DPCH_LEDGER_FSYNC)
    ledger_fsync: bool | None = None
    #: X-Dpch-Budget-Warning when a user's remaining ε is below this share of its budget (0: never)
    budget_warning_share: float = 0.1
    #: where admission is decided on a server (dpch.accounting.admission): auto, keeper or owner
    #: (None: ``$DPCH_ADMISSION``, else auto)
    admission: str | None = None
    #: the ClickHouse cluster dpch's own tables are created on (None: ``$DPCH_CLUSTER``, else none)
    cluster: str | None = None
    #: seconds between passes of the shared state's ledger reconciler (0: only at start-up)
    reconcile_interval: float = 60.0
    #: the reconciler leaves rows younger than this to the process that is writing them
    reconcile_grace: float = 30.0
    users: dict[str, User] = field(default_factory=dict)

    @property
    def database(self) -> str:
        return self.databases[0]

    def cache_ttl_for(self, user: User) -> float:
        """``user``'s release-cache TTL in seconds (its own, else the server's)."""
        return self.cache_ttl if user.cache_ttl is None else user.cache_ttl

    def warning_share_for(self, user: User) -> float:
        """``user``'s budget-warning share (its own, else the server's)."""
        return self.budget_warning_share if user.budget_warning_share is None else user.budget_warning_share

    @classmethod
    def from_toml(cls, path: str | Path) -> ServerConfig:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"server config {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"server config {path} is not valid TOML: {exc}") from None
        return cls.from_mapping(data, source=str(path))

    @classmethod
    def from_mapping(cls, data: dict[str, Any], *, source: str = "server config") -> ServerConfig:
        unknown = set(data) - {"server", "users"}
        if unknown:
            raise ConfigError(f"{source}: unknown section(s) {sorted(unknown)}", hint="use [server] and [users.NAME]")
        server = dict(data.get("server", {}))
        bad = set(server) - _SERVER_KEYS
        if bad:
            raise ConfigError(f"{source}: unknown [server] key(s) {sorted(bad)}",
                              hint=f"known keys: {', '.join(sorted(_SERVER_KEYS))}")
        kwargs: dict[str, Any] = {}
        if "databases" in server:
            kwargs["databases"] = tuple(_str_list(server.pop("databases"), f"{source}: databases"))
            if not kwargs["databases"]:
                raise ConfigError(f"{source}: databases must name at least one database")
        if "database" in server:
            db = str(server.pop("database"))
            rest = [d for d in kwargs.get("databases", ()) if d != db]
            kwargs["databases"] = (db, *rest)
        if "accept_settings" in server:
            kwargs["accept_settings"] = tuple(_str_list(server.pop("accept_settings"), f"{source}: accept_settings"))
        for key, kind in (("port", int), ("tcp_port", int), ("max_request_bytes", int), ("max_concurrent", int),
                          ("cache_ttl", float), ("query_timeout", float), ("keep_alive_timeout", float),
                          ("metadata_timeout", float), ("reconcile_interval", float), ("reconcile_grace", float)):
            if key in server:
                try:
                    kwargs[key] = kind(server.pop(key))
                except (TypeError, ValueError):
                    raise ConfigError(f"{source}: [server] {key} must be a number") from None
                if kwargs[key] < 0:
                    raise ConfigError(f"{source}: [server] {key} must not be negative")
        if "budget_warning_share" in server:
            kwargs["budget_warning_share"] = _share(server.pop("budget_warning_share"), f"{source}: [server]")
        if kwargs.get("metadata_timeout", 1.0) == 0:
            raise ConfigError(f"{source}: [server] metadata_timeout must be positive",
                              hint="metadata queries share the engine with releases, so their time is always bounded")
        if "ledger_fsync" in server:
            value = server.pop("ledger_fsync")
            if not isinstance(value, bool):
                raise ConfigError(f"{source}: [server] ledger_fsync must be true or false")
            kwargs["ledger_fsync"] = value
        if "admission" in server:
            mode = str(server.pop("admission"))
            if mode not in MODES:
                raise ConfigError(f"{source}: [server] admission must be one of {', '.join(MODES)}")
            kwargs["admission"] = mode
        for key in ("dsn", "host", "display_name", "policy", "access_log", "cluster"):
            if key in server:
                kwargs[key] = str(server.pop(key))
        users = {}
        for name, spec in (data.get("users") or {}).items():
            if not isinstance(spec, dict):
                raise ConfigError(f"{source}: [users.{name}] must be a table")
            bad = set(spec) - _USER_KEYS
            if bad:
                raise ConfigError(f"{source}: unknown key(s) {sorted(bad)} in [users.{name}]",
                                  hint=f"known keys: {', '.join(sorted(_USER_KEYS))}")
            if "password_sha256" in spec:
                digest = str(spec["password_sha256"]).lower()
            else:
                digest = hashlib.sha256(str(spec.get("password", "")).encode()).hexdigest()
            budget = None
            if "epsilon" in spec:
                budget = Budget(float(spec["epsilon"]), float(spec.get("delta", DEFAULT_DELTA)))
            users[name] = User(name, str(spec.get("analyst", name)), digest, budget,
                               _renewal(spec, budget, f"{source}: [users.{name}]"),
                               **_user_options(spec, f"{source}: [users.{name}]"))
        return cls(users=users, **kwargs)


def _renewal(spec: dict[str, Any], budget: Budget | None, where: str) -> Renewal:
    """A user's ``renew`` schedule and optional lifetime cap (both need ``epsilon``)."""
    keys = {"renew", "lifetime_epsilon", "lifetime_delta"} & set(spec)
    if not keys:
        return NO_RENEWAL
    if budget is None:
        raise ConfigError(f"{where} {', '.join(sorted(keys))} need(s) epsilon", hint="set epsilon = … for this user")
    lifetime = None
    if "lifetime_epsilon" in spec:
        lifetime = Budget(float(spec["lifetime_epsilon"]), float(spec.get("lifetime_delta", budget.delta)))
    elif "lifetime_delta" in spec:
        raise ConfigError(f"{where} lifetime_delta needs lifetime_epsilon")
    try:
        return Renewal(str(spec.get("renew", "")), lifetime)
    except ConfigError as e:
        raise ConfigError(f"{where} {e.message}", hint=e.hint) from None


def _user_options(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """A user's own cache TTL, warning share, dp_intervals default and owner flag, checked."""
    options: dict[str, Any] = {}
    if "cache_ttl" in spec:
        try:
            options["cache_ttl"] = float(spec["cache_ttl"])
        except (TypeError, ValueError):
            raise ConfigError(f"{where} cache_ttl must be a number of seconds") from None
        if not options["cache_ttl"] >= 0:
            raise ConfigError(f"{where} cache_ttl must not be negative", hint="0 turns the cache off for this user")
    if "budget_warning_share" in spec:
        options["budget_warning_share"] = _share(spec["budget_warning_share"], where)
    if "dp_intervals" in spec:
        mode = spec["dp_intervals"]
        if mode not in INTERVAL_MODES:
            raise ConfigError(f"{where} dp_intervals must be one of {', '.join(repr(m) for m in INTERVAL_MODES)}",
                              hint='e.g. dp_intervals = "columns"')
        options["dp_intervals"] = mode
    if "owner" in spec:
        if not isinstance(spec["owner"], bool):
            raise ConfigError(f"{where} owner must be true or false")
        options["owner"] = spec["owner"]
    return options


def _share(value: Any, where: str) -> float:
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} budget_warning_share must be a number between 0 and 1") from None
    if not 0 <= share <= 1:
        raise ConfigError(f"{where} budget_warning_share must be between 0 and 1",
                          hint="e.g. 0.1 warns when less than 10% of the ε budget is left; 0 never warns")
    return share


def _str_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return list(value)

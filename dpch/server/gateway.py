"""The gateway: one process owns the store; each analyst gets a :class:`~dpch.session.Session`.

All sessions share one :class:`~dpch.store.engine.Engine` per served database (chdb opens a store
once per process) and one :class:`~dpch.policy.resolve.Policy`. A request is either
introspection (answered from public metadata, see :mod:`.introspection`), a read of the
analyst's own budget and ledger (``dpch.budget``, ``dpch.releases``: :mod:`.ledger_views`), or goes
through the analyst's Session — the DP path, with its filter, durable ledger charge and noise.
Released rows are serialised by ClickHouse in the client's format (:mod:`.formats`), with interval
columns when ``dp_intervals = 'columns'`` (:mod:`.intervals`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlglot.dialects.clickhouse import ClickHouse
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from dpch.accounting.accountant import Accountant, BudgetStatus, reconcile_all
from dpch.accounting.admission import OwnerAdmission, admission_for
from dpch.errors import AdmissionUnavailable, AuthenticationFailed, ConfigError, DpchError, QueryRejected
from dpch.pipeline.kinds import release_kind
from dpch.pipeline.report import Release
from dpch.policy.annotations import is_annotation
from dpch.policy.resolve import Policy
from dpch.privacy.cost import PrivacyCost
from dpch.server.cache import CachedRelease, ReleaseCache, cache_key
from dpch.server.catalog_tables import create_table_query
from dpch.server.config import ServerConfig, User
from dpch.server.errors import GatewayError, from_dpch, metadata_error, syntax_error
from dpch.server.formats import canonical_format, select_rows, serialize, split_format, string_literal
from dpch.server.intervals import check_names, noisy_columns, with_bounds
from dpch.server.introspection import Catalog, Introspection, introspect, metadata_limits, render
from dpch.server.ledger_views import ALL, ViewQuery, budget_rows, budget_warning, find_views, release_rows
from dpch.server.wire import release_to_wire
from dpch.session import Session
from dpch.sql.limits import check_unparsed, too_deep
from dpch.sql.result_types import typed_rows
from dpch.sql.settings import SETTING_NAMES, QueryOptions
from dpch.store.engine import Engine

#: URL parameters that are part of the HTTP protocol, not settings
TRANSPORT_PARAMS = {
    "query", "database", "default_format", "user", "password", "quota_key", "query_id", "session_id",
    "session_timeout", "session_check", "compress", "decompress", "buffer_size", "wait_end_of_query",
    "client_protocol_version", "enable_http_compression", "http_zlib_compression_level",
    "send_progress_in_http_headers", "http_headers_progress_interval_ms", "stacktrace",
    # compress=1's codec (dpch/server/block_compression.py): how the response is framed, not what it holds
    "network_compression_method", "network_zstd_compression_level",
}
#: settings clients send that cannot change what dpch releases; accepted and never passed on
HARMLESS_SETTINGS = {
    "cancel_http_readonly_queries_on_client_close": "0", "date_time_input_format": "basic",
    "cast_string_to_dynamic_use_inference": "0", "max_execution_time": "0", "max_result_rows": "0",
    "max_result_bytes": "0", "result_overflow_mode": "throw", "log_comment": "", "readonly": "0",
    "max_block_size": "65505", "use_client_time_zone": "0", "join_use_nulls": "0", "extremes": "0",
    "allow_experimental_analyzer": "1", "max_threads": "0", "timeout_before_checking_execution_speed": "10",
    "output_format_json_quote_64bit_integers": "1", "output_format_json_quote_denormals": "0",
    "output_format_json_named_tuples_as_objects": "1", "date_time_output_format": "simple",
    "output_format_arrow_string_as_string": "1", "output_format_parquet_string_as_string": "1",
    "output_format_csv_crlf_end_of_line": "0", "output_format_tsv_crlf_end_of_line": "0",
    "output_format_decimal_trailing_zeros": "0", "output_format_native_encode_types_in_binary_format": "0",
    # the ClickHouse JDBC driver v2 sends these with every query (ConnectionImpl's default query
    # settings); they concern INSERTs (refused: dpch is read-only) and when ClickHouse starts the
    # response (dpch always sends it whole), so they change nothing here
    "async_insert": "0", "wait_for_async_insert": "1", "wait_end_of_query": "0",
}
#: client settings that limit the rows written out (ClickHouse's ``limit`` and ``offset``), taken as output settings
_ROW_LIMITS = frozenset({"limit", "offset"})
#: the harmless settings that only change how rows are written: passed to the serialising query
_OUTPUT_SETTING = re.compile(r"^(output_format_[a-z0-9_]+|date_time_output_format)$")
_SETTING_VALUE = re.compile(r"^[A-Za-z0-9_.\-]{0,64}$")
_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*):([^{}]+)\}")
_NUMERIC_TYPE = re.compile(r"^(Nullable\()?(U?Int\d+|Float\d+|Decimal.*|Bool)\)?$")


@dataclass
class Result:
    """What one query produced, for the HTTP layer: bytes in ``fmt`` and extra headers."""

    body: bytes
    fmt: str
    rows: int
    kind: str
    headers: dict[str, str] = field(default_factory=dict)
    cost: PrivacyCost | None = None
    #: a release's columns as written (names and ClickHouse types, with ``dp_intervals`` bounds): what a
    #: native client's header block names when the release has no rows (its Native output is then empty)
    header: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Answer:
    """A release for one request: the (possibly cached) release and how to present it."""

    cached: CachedRelease
    hit: bool
    #: per released column: whether it is noisy with an interval (from the plan, never the data)
    noisy: tuple[bool, ...]
    #: the query's resolved ``dp_intervals``
    intervals: str = "none"


class Gateway:
    """Answers ClickHouse-protocol queries for authenticated users through dpch."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.policy = Policy.from_toml(config.policy) if config.policy else Policy()
        self.cache = ReleaseCache(config.cache_ttl)
        self._engines: dict[str, Engine] = {}
        self._sessions: dict[tuple[str, str], Session] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        try:
            for db in config.databases:
                engine = self._engines[db] = Engine(config.dsn, database=db, cluster=config.cluster)
                if not engine.embedded:
                    # where this database's admission is decided; without Keeper this gateway must be its
                    # only owner, and says so now if another process holds it (not at the first query)
                    admission = admission_for(engine, config.admission)
                    if isinstance(admission, OwnerAdmission):
                        admission.claim()
            first = self._engines[config.database]
            self.version, self.timezone = first.query_rows("SELECT version(), timezone()")[0]
            for user in config.users.values():
                if user.budget is not None:
                    for engine in self._engines.values():
                        Accountant(engine, user.analyst).set_budget(user.budget, renewal=user.renewal)
            self.reconcile()  # rows a process that died left only in the shared state are written now
        except BaseException:
            self.close()
            raise
        if config.reconcile_interval > 0 and self._shared_engines():
            threading.Thread(target=self._reconcile_periodically, name="dpch-reconciler", daemon=True).start()
        self.accept = set(HARMLESS_SETTINGS) | set(config.accept_settings)

    def _shared_engines(self) -> list[Engine]:
        return [e for e in self._engines.values() if not e.embedded and admission_for(e).shared]

    def reconcile(self) -> int:
        """One pass of the ledger reconciler over every served database whose admission is in Keeper
        (:func:`~dpch.accounting.accountant.reconcile_all`); returns the ledger rows it wrote."""
        return sum(reconcile_all(engine, self.config.reconcile_grace) for engine in self._shared_engines())

    def _reconcile_periodically(self) -> None:
        while not self._stop.wait(self.config.reconcile_interval):
            try:
                self.reconcile()
            except Exception:  # noqa: S112 — Keeper may be down for a while: the next pass tries again
                continue

    # -- users and sessions ---------------------------------------------------------------------

    def authenticate(self, user: str | None, password: str | None) -> User:
        name = user or "default"
        entry = self.config.users.get(name)
        if entry is None or not entry.check(password or ""):
            raise from_dpch(AuthenticationFailed(
                f"{name}: Authentication failed: password is incorrect, or there is no user with such name",
                hint="the gateway refused the credentials: check the user name and password"))
        return entry

    def engine(self, database: str | None) -> Engine:
        db = database or self.config.database
        engine = self._engines.get(db)
        if engine is None:
            raise GatewayError(
                81, ConfigError.kind, f"Database {db} does not exist (dpch serves: {', '.join(self._engines)})")
        return engine

    def session(self, user: User, database: str | None) -> Session:
        engine = self.engine(database)
        key = (user.analyst, engine.database)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                session = Session(engine, analyst=user.analyst, policy=self.policy,
                                  ledger_fsync=self.config.ledger_fsync)
                self._sessions[key] = session
            return session

    # -- settings -------------------------------------------------------------------------------

    def split_params(self, params: dict[str, str]) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
        """URL parameters → (dp options, bind parameters, output settings). Others are refused
        unless they are harmless; nothing here ever reaches ClickHouse as a setting except
        output_format_* ones, which only shape how released rows are written."""
        options: dict[str, Any] = {}
        binds: dict[str, str] = {}
        output: dict[str, str] = {}
        check_repeated_settings(params)
        for name, value in params.items():
            if name in TRANSPORT_PARAMS:
                continue
            if name.startswith("param_"):
                binds[name[6:]] = value
            elif name.lower() in SETTING_NAMES:
                options[SETTING_NAMES[name.lower()]] = _number_or_text(value)
            elif name in _ROW_LIMITS:
                # a client's row limit (Grafana's "row limit" option sends limit): applied by ClickHouse to the
                # rows it writes out, after the release, which is post-processing of the released rows
                if not value.isdigit() or len(value) > 19:
                    raise GatewayError(36, ConfigError.kind, f"Invalid value {value!r} for setting {name}: a whole "
                                       "number of rows (0: no limit)")
                output[name] = value
            elif name in self.accept:
                if _OUTPUT_SETTING.match(name):
                    if not _SETTING_VALUE.match(value):
                        raise GatewayError(36, ConfigError.kind, f"Invalid value {value!r} for setting {name}")
                    output[name] = value
            else:
                raise GatewayError(115, QueryRejected.kind,
                                   f"Setting {name} is not accepted by dpch (only dp_* settings and harmless "
                                   "client settings are; ClickHouse settings are fixed by the data owner)")
        return options, binds, output

    def settings_rows(self) -> list[tuple[Any, ...]]:
        rows = []
        for name, default in sorted(HARMLESS_SETTINGS.items()):
            rows.append((name, default, 0, "accepted by dpch and not passed to ClickHouse", None, None, 0,
                         "String", default, "", 0))
        for name in sorted(SETTING_NAMES):
            rows.append((name, "", 0, f"dpch: the query's {name[3:]}", None, None, 0, "String", "", "", 0))
        return rows

    # -- queries --------------------------------------------------------------------------------

    def execute(self, user: User, sql: str, *, database: str | None = None,
                params: dict[str, str] | None = None, default_format: str | None = None) -> Result:
        """Answers one query from a ClickHouse client."""
        options, binds, output = self.split_params(params or {})
        text, clause_format = split_format(sql)
        fmt_name = clause_format or default_format or "TabSeparated"
        fmt = canonical_format(fmt_name)
        if fmt is None:
            raise GatewayError(73, QueryRejected.kind,
                               f"Unknown output format {fmt_name} (dpch serves: TabSeparated[WithNames[AndTypes]], "
                               "CSV[WithNames], JSON, JSONCompact, JSONEachRow, Native, RowBinary, Arrow, Parquet, "
                               "Pretty)")
        text = bind_parameters(text, binds)
        try:  # before any parse of it here (ledger views, metadata): the planner's limits on size and nesting
            check_unparsed(text)
        except DpchError as exc:
            raise from_dpch(exc) from None
        except SqlglotError:
            raise syntax_error(text) from None
        engine = self.engine(database)
        try:
            view = find_views(text, self._engines)
            if view is not None:
                return self.ledger_view(user, engine.database, view, fmt, output)
            catalog = self._catalog(user, engine.database)
            found = introspect(text, catalog)
        except SqlglotError:
            raise syntax_error(text) from None
        except RecursionError:  # a shape the nesting count does not see, e.g. a long run of NOT
            raise from_dpch(too_deep()) from None
        if found is not None:
            body = self.metadata(found, fmt, output)
            return Result(body, fmt, -1, found.kind)
        if user.dp_intervals is not None:  # the user's default; a URL or SETTINGS dp_intervals wins
            options.setdefault("intervals", user.dp_intervals)
        answer = self.answer(user, text, database=engine.database, options=options)
        cached, hit = answer.cached, answer.hit
        release = cached.release
        bounds = answer.noisy if answer.intervals == "columns" else None
        encoding_key = (fmt, tuple(sorted(output.items())), bounds)
        encoded = cached.encoded.get(encoding_key)
        if encoded is None:
            encoded = self._serialize(engine, fmt, release, cached.types, output, bounds)
            if self.config.cache_ttl_for(user) > 0:
                cached.encoded[encoding_key] = encoded
        # one status per request: a fresh release carries the status taken right after its charge;
        # a cached one is re-read (other releases may have spent since)
        status = self.current_status(user, engine.database) if hit else release.budget
        headers = {
            "X-Dpch-Release-Id": release.release_id,
            "X-Dpch-Cost": _json({"epsilon": 0.0 if hit else release.cost.epsilon,
                                  "delta": 0.0 if hit else release.cost.delta}),
            **self.budget_headers(user, status),
            "X-Dpch-Mechanism": release.mechanism,
            "X-Dpch-Confidence": repr(release.confidence),
            "X-Dpch-Cache": ("hit" if hit else "miss") if self.config.cache_ttl_for(user) > 0 else "off",
        }
        cost = PrivacyCost.zero() if hit else release.cost
        names, types = release.columns, cached.types
        if bounds is not None:
            names, types, _ = with_bounds(names, types, [], [], bounds)
        return Result(encoded, fmt, len(release.rows), "cache" if hit else "release", headers, cost,
                      tuple(zip(names, types, strict=True)))

    def release(self, user: User, sql: str, *, database: str | None,
                options: dict[str, Any]) -> tuple[CachedRelease, bool]:
        """A release of ``sql`` for ``user`` (from the cache when an identical one is fresh), and
        whether it came from the cache."""
        answer = self.answer(user, sql, database=database, options=options)
        return answer.cached, answer.hit

    def answer(self, user: User, sql: str, *, database: str | None, options: dict[str, Any]) -> Answer:
        """:meth:`release`, with what presenting it needs (its noisy columns, ``dp_intervals``)."""
        session = self.session(user, database)
        try:
            plan, opts = session.plan(sql, **options)
            if plan.query.explain:
                # EXPLAIN DP is free and never cached: it has no entry of its own to share, and
                # must never take (or fill) the entry of the query it explains.
                explained = session.query(sql, **options)
                cached = CachedRelease(explained, ["String"] * len(explained.columns), time.monotonic())
                return Answer(cached, False, noisy_columns(plan), opts.intervals)
            kind = release_kind(plan, opts)
            noisy = noisy_columns(plan) if kind.estimates else tuple(False for _ in plan.outputs)
            if kind.estimates and opts.intervals == "columns":
                check_names(plan.columns, noisy)  # before anything is charged
            if not kind.cacheable:
                # e.g. a watch's question advances its state: each one is a new answer, never a cached replay
                asked = session.query(sql, **options)
                return Answer(CachedRelease(asked, kind.column_types(plan, opts), time.monotonic()), False,
                              noisy, opts.intervals)
            key = cache_key("release", user.analyst, session.engine.database, plan.query.fingerprint,
                            release_options(opts))

            def fresh() -> tuple[Release, list[str]]:
                return session.query(sql, **options), kind.column_types(plan, opts)

            cached, hit = self.cache.get_or_release(key, fresh, ttl=self.config.cache_ttl_for(user))
            return Answer(cached, hit, noisy, opts.intervals)
        except DpchError as exc:
            raise from_dpch(exc) from None
        except SqlglotError:  # the tokenizer's errors (an unexpanded $macro, an open quote)
            raise syntax_error(sql) from None

    def current_status(self, user: User, database: str | None) -> BudgetStatus:
        """The analyst's budget now, for a cached answer; while the shared admission state (Keeper) is
        unreachable, as this process last saw it: a cached answer is post-processing, still served."""
        try:
            session = self.session(user, database)
            try:
                return session.budget()
            except AdmissionUnavailable:
                return session.accountant.status(fresh=False)
        except DpchError as exc:
            raise from_dpch(exc) from None

    def budget_headers(self, user: User, status: BudgetStatus) -> dict[str, str]:
        """The budget left, and ``X-Dpch-Budget-Warning`` when it is below ``user``'s share."""
        headers = {"X-Dpch-Budget-Remaining": _json({"epsilon": status.remaining.epsilon,
                                                     "delta": status.remaining.delta})}
        warning = budget_warning(status, self.config.warning_share_for(user))
        if warning:
            headers["X-Dpch-Budget-Warning"] = warning
        return headers

    def ledger_view(self, user: User, database: str, view: ViewQuery, fmt: str, output: dict[str, str]) -> Result:
        """``dpch.budget`` / ``dpch.releases`` for ``user``'s analyst only; free."""
        session = self.session(user, database)
        share = self.config.warning_share_for(user)
        try:
            status = session.accountant.status(recent=0)
            sources: dict[str, Callable[[], list[tuple[Any, ...]]]] = {
                "budget": lambda: budget_rows(status, share),
                "releases": lambda: release_rows(session.accountant.recent(ALL)),
            }
            rows = {name: sources[name]() for name in view.views}
        except DpchError as exc:
            raise from_dpch(exc) from None
        body = self.metadata(view.bind(rows.__getitem__), fmt, output)
        return Result(body, fmt, -1, "ledger:" + ",".join(view.views), self.budget_headers(user, status),
                      PrivacyCost.zero())

    def release_wire(self, user: User, sql: str, *, database: str | None, options: dict[str, Any]) -> dict:
        """The dpch:// protocol's answer: the full release as JSON."""
        cached, hit = self.release(user, sql, database=database, options=options)
        release = cached.release
        wire = release_to_wire(release, cached.types, cached=hit)
        wire["rows"] = [list(r) for r in typed_rows(release.rows, cached.types)]
        status = self.current_status(user, database) if hit else release.budget  # one status per request
        wire["budget"] = status.as_dict()
        if hit:
            wire["cost"] = {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
            wire["notes"] = [*wire["notes"], f"served from the release cache (release {release.release_id}): "
                                              "no budget spent"]
        return wire

    def refine_wire(self, user: User, request: dict[str, Any], *, database: str | None) -> dict:
        """``dpch://`` refine: a less noisy version of the analyst's last accuracy-first answer,
        continuing the same Brownian path in this gateway's session (charged the increment)."""
        session = self.session(user, database)
        kwargs = {k: request[k] for k in ("accuracy", "relative_error", "max_epsilon") if request.get(k) is not None}
        release = session.refine(request.get("release_id") or None, **kwargs)
        types = [_column_type(release, j) for j in range(len(release.columns))]
        wire = release_to_wire(release, types)
        wire["rows"] = [list(r) for r in typed_rows(release.rows, types)]
        wire["budget"] = release.budget.as_dict()  # taken right after the refinement's charge
        return wire

    def _serialize(self, engine: Engine, fmt: str, release: Release, types: list[str],
                   output: dict[str, str], bounds: tuple[bool, ...] | None = None) -> bytes:
        """``release``'s rows in ``fmt``; with ``bounds`` (dp_intervals = 'columns'), each noisy
        column followed by its interval's ``_lo`` and ``_hi``."""
        columns: list[str] = release.columns
        rows = typed_rows(release.rows, types)
        if bounds is not None:
            columns, types, rows = with_bounds(columns, types, rows, release.intervals, bounds)
        if not output:
            return serialize(engine, fmt, columns, types, rows)
        return self._raw(engine, select_rows(columns, types, rows, output), fmt)

    def metadata(self, found: Introspection, fmt: str, output: dict[str, str]) -> bytes:
        """Runs an introspection query with limits ClickHouse itself enforces.

        It borrows a client of its own from the engine's pool, so it delays no release; these
        limits bound the CPU it can take from them (the allowlist already refuses row generators)."""
        settings = {**metadata_limits(self.config.metadata_timeout), "input_format_parallel_parsing": "0", **output}
        # synthetic rows only, so any database's engine serves it: the default one's
        engine = self._engines.get(self.config.database)
        if engine is None:
            raise GatewayError(1002, DpchError.kind, "dpch: the gateway is closed")
        return self._raw(engine, render(found, settings), fmt)

    def _raw(self, engine: Engine, sql: str, fmt: str) -> bytes:
        try:
            return engine.raw_query(sql, fmt)
        except Exception as exc:  # over synthetic public rows only, but ClickHouse's text is a dump
            raise metadata_error(str(exc), self.config.metadata_timeout) from None

    def _catalog(self, user: User, database: str) -> Catalog:
        return Catalog(user=user.name, database=database, databases=list(self._engines),
                       tables=self._tables, settings=self.settings_rows)

    def _tables(self, database: str) -> list[tuple[str, str, str, str, str, list[tuple[str, str, str]]]]:
        engine = self._engines.get(database)
        if engine is None:
            return []
        rows = engine.query_rows(
            "SELECT name, engine, comment, sorting_key FROM system.tables "
            "WHERE database = {db:String} AND NOT is_temporary ORDER BY name", {"db": database})
        result = []
        for name, eng, comment, sorting_key in rows:
            if name.startswith("dpch_"):
                continue
            try:
                policy = self.policy.table(engine, name)
            except DpchError:
                continue
            if not (policy.private or policy.public):
                continue
            cols = [(c.name, c.type, c.comment) for c in engine.columns(name)]
            if self.config.policy:  # a TOML policy overrides the COMMENTs: show the annotations in force
                comment = _shown_comment(comment, policy.annotation())
                cols = [(n, t, _shown_comment(c, policy.columns[n].annotation() if n in policy.columns else ""))
                        for n, t, c in cols]
            create = create_table_query(database, name, eng, sorting_key, comment, cols)
            result.append((name, eng, comment, sorting_key, create, cols))
        return result

    def table_policies(self, user: User, database: str | None) -> list[dict]:
        """The policies of the tables ``user`` may query, as JSON with their text and each column's."""
        result = []
        for policy in self.session(user, database).tables():
            data = policy.as_dict() | {"describe": policy.describe()}
            data["columns"] = {name: {**col, "describe": policy.columns[name].describe()}
                               for name, col in data["columns"].items()}
            result.append(data)
        return result

    def close(self) -> None:
        self._stop.set()
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()
        self._sessions.clear()


def _shown_comment(stored: str, effective: str) -> str:
    """The COMMENT metadata shows: the policy's annotation in force, else a stored comment that is not
    an annotation (an ordinary description), else nothing."""
    return effective or ("" if is_annotation(stored) else stored)


def bind_parameters(sql: str, binds: dict[str, str]) -> str:
    """Substitutes ClickHouse's ``{name:Type}`` placeholders with literals from ``param_name``.

    Only where ClickHouse itself would: at a ``{`` token of the query, never inside a string
    literal, a quoted identifier or a comment (the text stays as the analyst wrote it there)."""
    if not binds:
        return sql
    try:
        braces = {t.start for t in ClickHouse().tokenize(sql) if t.token_type == TokenType.L_BRACE}
    except SqlglotError:
        raise syntax_error(sql) from None

    def literal(match: re.Match[str]) -> str:
        if match.start() not in braces:
            return match.group(0)
        name, ch_type = match.group(1), match.group(2).strip()
        if name not in binds:
            raise GatewayError(36, ConfigError.kind, f"Substitution {name} is not set (send it as param_{name})")
        value = binds[name]
        if _NUMERIC_TYPE.match(ch_type):
            try:
                float(value)
            except ValueError:
                raise GatewayError(36, ConfigError.kind, f"Value of parameter {name} is not a {ch_type}") from None
            return value
        return string_literal(value)

    return _PARAM.sub(literal, sql)


def check_repeated_settings(names: Iterable[str]) -> None:
    """Refuses a dp_* setting named twice among URL parameter names, in any spelling: dpch matches
    setting names without regard to case (as in a query's SETTINGS clause, :mod:`dpch.sql.parse`),
    so ``dp_epsilon=1&DP_EPSILON=0.1`` would otherwise keep one of them silently."""
    seen: dict[str, str] = {}
    for name in names:
        key = name.lower()
        if key not in SETTING_NAMES:
            continue
        if key not in seen:
            seen[key] = name
            continue
        first = seen[key]
        both = f" (as {first} and {name})" if first != name else ""
        raise GatewayError(36, QueryRejected.kind,
                           f"dpch: setting {key} is given twice in the URL{both}; give each setting once")


def release_options(opts: QueryOptions) -> QueryOptions:
    """The options that decide what is released (the cache key's): ``dp_intervals`` only shapes
    how a release is shown, so a dashboard's chart with error bars and its table share one release."""
    return replace(opts, intervals="none")


def _number_or_text(value: str) -> Any:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


def _json(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))


def check_config(config: ServerConfig) -> None:
    if not config.users:
        raise ConfigError("the server config defines no users",
                          hint="add [users.NAME] with a password (and analyst) to the config")


def _column_type(release: Release, column: int) -> str:
    """A released column's type without its plan: statistics (with intervals) are Float64."""
    if any(ivs[column] is not None for ivs in release.intervals):
        return "Float64"
    sample = next((row[column] for row in release.rows if row[column] is not None), "")
    if isinstance(sample, bool):
        return "UInt8"
    if isinstance(sample, int):
        return "Int64"
    return "Float64" if isinstance(sample, float) else "String"

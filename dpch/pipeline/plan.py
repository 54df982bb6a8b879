"""Stage 1, plan: SQL text → (QueryPlan, QueryOptions). Reads only the policy and, for keys
joined from a public table, that table's distinct values (public data: reading it is free).
Nothing private is read and nothing is spent."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from dpch.errors import QueryRejected
from dpch.policy.model import TablePolicy
from dpch.sql.analyze import MAX_GROUPS, QueryPlan, analyze
from dpch.sql.parse import parse_query
from dpch.sql.relation import quote
from dpch.sql.settings import QueryOptions, option_overrides
from dpch.store.engine import Engine

#: seconds a public table's key domain is reused before it is read again
PUBLIC_DOMAIN_TTL = 60.0


class PublicDomains:
    """The distinct values of public tables' columns, cached for :data:`PUBLIC_DOMAIN_TTL` seconds."""

    def __init__(self, engine: Engine, table_policy: Callable[[str], TablePolicy]) -> None:
        self.engine = engine
        self.table_policy = table_policy
        self._cache: dict[tuple[str, str], tuple[float, tuple[Any, ...]]] = {}
        self._lock = threading.Lock()

    def __call__(self, table: str, column: str) -> tuple[Any, ...]:
        with self._lock:
            cached = self._cache.get((table, column))
        if cached is not None and time.monotonic() - cached[0] < PUBLIC_DOMAIN_TTL:
            return cached[1]
        if not self.table_policy(table).public:
            raise QueryRejected(f"table {table} is not public")
        rows = self.engine.query_rows(
            f"SELECT DISTINCT {quote(column)} FROM {self.engine.table(table)} ORDER BY 1 LIMIT {MAX_GROUPS + 1}"
        )
        domain = tuple(r[0] for r in rows)
        with self._lock:
            self._cache[(table, column)] = (time.monotonic(), domain)
        return domain


def plan_query(
    sql: str,
    *,
    defaults: QueryOptions,
    overrides: Mapping[str, Any],
    table_policy: Callable[[str], TablePolicy],
    database: str,
    public_domain: Callable[[str, str], tuple[Any, ...]],
) -> tuple[QueryPlan, QueryOptions]:
    """Parses and analyzes ``sql``. Options: the session's ``defaults``, then the caller's
    ``overrides``, then the query's own ``SETTINGS dp_…`` (the last word wins)."""
    parsed = parse_query(sql)
    opts = defaults.with_overrides(dict(overrides)).with_overrides(option_overrides(parsed.settings)).validated()
    return analyze(parsed, table_policy, database, public_domain), opts

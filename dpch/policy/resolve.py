"""Building effective table policies from the database's annotations and overrides."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpch.errors import PolicyError
from dpch.policy.annotations import is_annotation, parse_annotation
from dpch.policy.model import TablePolicy, build_table_policy
from dpch.policy.toml_file import parse_policy_mapping, read_policy_toml, read_privacy_settings
from dpch.policy.verified import lookup as verification

if TYPE_CHECKING:
    from dpch.store.engine import Engine


#: how long a table's policy is reused before its COMMENTs are read again. A long-running
#: process (the gateway) sees a data owner's ``ALTER TABLE ... COMMENT`` within this time
#: without a restart; a query reads its tables' policies once, when it is planned.
POLICY_TTL_SECONDS = 10.0


class Policy:
    """The privacy policy of a database: ``dp:`` annotations, overridden by a TOML file.

    ``Policy.from_toml(path)`` or ``Policy.from_mapping({...})`` give the overrides; pass
    the result to :func:`dpch.connect`. Table policies are read from ClickHouse on first use
    and cached for ``ttl`` seconds (by ``clock``, monotonic); :meth:`reload` forgets the cache
    at once (``dpch load`` does, after it writes the comments).
    """

    def __init__(self, overrides: dict[str, dict[str, Any]] | None = None, *, source: str = "",
                 privacy: dict[str, Any] | None = None, ttl: float = POLICY_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.overrides = overrides or {}
        self.source = source
        #: deployment-wide privacy settings from the file's [privacy] table (filter choice)
        self.privacy = privacy or {}
        self.ttl = ttl
        self._clock = clock
        # (store opening, database, table) → (policy, time read); the token keeps two stores'
        # equally named databases apart
        self._cache: dict[tuple[str, str, str], tuple[TablePolicy, float]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_toml(cls, path: str | Path) -> Policy:
        return cls(read_policy_toml(path), source=str(path), privacy=read_privacy_settings(path))

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> Policy:
        return cls(parse_policy_mapping(data, source="policy mapping"), source="policy mapping")

    def reload(self) -> None:
        with self._lock:
            self._cache.clear()

    def table(self, engine: Engine, table: str) -> TablePolicy:
        """The effective policy of ``table`` in the engine's database."""
        key = (engine.token, engine.database, table)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now - cached[1] < self.ttl:
            policy = cached[0]
        else:
            policy = self._build(engine, table)
            with self._lock:
                self._cache[key] = (policy, now)
        return policy

    def _build(self, engine: Engine, table: str) -> TablePolicy:
        columns = engine.columns(table)
        if not columns:
            raise PolicyError(
                f"table {table!r} does not exist in database {engine.database!r}",
                hint="SHOW TABLES lists them (or `dpch policy show`, `\\tables` in the shell)",
            )
        sources = []
        table_comment = engine.table_comment(table)
        table_spec = parse_annotation(table_comment, where=f"table {table}")
        if is_annotation(table_comment):
            sources.append("table comment")
        column_specs = {
            c.name: parse_annotation(c.comment, where=f"column {table}.{c.name}")
            for c in columns
            if is_annotation(c.comment)
        }
        if column_specs:
            sources.append("column comments")
        override = self.overrides.get(table)
        if override:
            table_spec = {**table_spec, **override["table"]}
            for col, spec in override["columns"].items():
                column_specs[col] = {**column_specs.get(col, {}), **spec}
            sources.append(self.source or "policy file")
        primary_key, table_engine = _table_info(engine, table)
        policy = build_table_policy(
            table,
            {c.name: c.type for c in columns},
            table_spec,
            column_specs,
            tuple(sources),
            tuple(engine.sorting_key(table)),
            primary_key,
        )
        # a Distributed table's rows lie on shards: the cap's single-store forms are refused on it
        policy = replace(policy, distributed=table_engine == "Distributed", engine=table_engine)
        if policy.private and policy.max_rows_per_unit is not None and not policy.unique_units:
            # cached with the policy: whether a record exists decides the emitted query's form (its
            # guard checks the record again as it runs, so a cached answer is never unsafe), and
            # whether it is current is only shown (`dpch policy show`)
            state = verification(engine, table, policy.unit_column, policy.max_rows_per_unit)
            policy = replace(policy, verified=state.recorded, verified_current=state.current)
        return policy


def _table_info(engine: Engine, table: str) -> tuple[tuple[str, ...], str]:
    """The table's primary key as a tuple of expressions (empty if none), and its engine's name."""
    rows = engine.query_rows(
        "SELECT primary_key, engine FROM system.tables WHERE database = {db:String} AND name = {t:String}",
        {"db": engine.database, "t": table})
    key = str(rows[0][0]) if rows else ""
    return tuple(part.strip() for part in key.split(",") if part.strip()), str(rows[0][1]) if rows else ""

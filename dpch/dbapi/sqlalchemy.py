"""A read-only SQLAlchemy dialect for dpch: ``dpch://user:password@host:port/db`` (a gateway)
and ``dpch+chdb:///path/to/store?analyst=ana&database=db`` (embedded).

It does what an analytical, read-only dialect needs: ``pandas.read_sql``, Core ``select()``s
(compiled with ClickHouse quoting), and reflection of the tables a policy exposes (their
columns and types, read from the policy, never from rows). No DDL, no writes, no transactions.
"""

from __future__ import annotations

import re
from typing import Any, cast

from sqlalchemy import types as sqltypes
from sqlalchemy.engine import default
from sqlalchemy.engine.interfaces import ReflectedColumn, ReflectedPrimaryKeyConstraint, ReflectedTableComment
from sqlalchemy.engine.url import URL
from sqlalchemy.exc import NoSuchTableError
from sqlalchemy.sql import compiler

from dpch import dbapi
from dpch.api import PrivateSession, TableInfo
from dpch.errors import DpchError

_WRAPPER = re.compile(r"^(?:Nullable|LowCardinality)\((.*)\)$")


def sqlalchemy_type(ch_type: str) -> sqltypes.TypeEngine:
    """The SQLAlchemy type of a ClickHouse column type."""
    base = ch_type.strip()
    while (m := _WRAPPER.match(base)) is not None:
        base = m.group(1).strip()
    if base == "Bool":
        return sqltypes.Boolean()
    if base.startswith(("Int", "UInt")):
        return sqltypes.BigInteger() if base.endswith(("64", "128", "256")) else sqltypes.Integer()
    if base.startswith("Float"):
        return sqltypes.Float()
    if base.startswith("Decimal"):
        return sqltypes.Numeric()
    if base.startswith(("String", "FixedString", "Enum", "UUID")):
        return sqltypes.String()
    if base.startswith("DateTime"):
        return sqltypes.DateTime()
    if base.startswith("Date"):
        return sqltypes.Date()
    return sqltypes.NullType()


class DpchIdentifierPreparer(compiler.IdentifierPreparer):
    """ClickHouse quotes identifiers with backquotes (the base class's signature, other defaults)."""

    def __init__(self, dialect: Any, initial_quote: str = "`", final_quote: str | None = "`",
                 escape_quote: str = "\\`", quote_case_sensitive_collations: bool = True,
                 omit_schema: bool = False) -> None:
        super().__init__(dialect, initial_quote, final_quote, escape_quote, quote_case_sensitive_collations,
                         omit_schema)


class DpchCompiler(compiler.SQLCompiler):
    def limit_clause(self, select: Any, **kw: Any) -> str:
        text = ""
        if select._limit_clause is not None:
            text += "\n LIMIT " + self.process(select._limit_clause, **kw)
        if select._offset_clause is not None:
            if select._limit_clause is None:
                text += "\n LIMIT 18446744073709551615"
            text += " OFFSET " + self.process(select._offset_clause, **kw)
        return text


class DpchDialect(default.DefaultDialect):
    """SQLAlchemy dialect ``dpch`` (gateway) / ``dpch+chdb`` (embedded store)."""

    name = "dpch"
    driver = "dpch"
    supports_statement_cache = True
    supports_alter = False
    supports_sequences = False
    supports_native_boolean = True
    supports_default_values = False
    supports_empty_insert = False
    supports_multivalues_insert = False
    supports_native_decimal = True
    postfetch_lastrowid = False
    default_paramstyle = "pyformat"
    returns_native_bytes = False
    preparer = DpchIdentifierPreparer
    statement_compiler = DpchCompiler

    @classmethod
    def import_dbapi(cls) -> Any:
        return dbapi

    def create_connect_args(self, url: URL) -> tuple[list[Any], dict[str, Any]]:
        query = dict(url.query)
        kwargs: dict[str, Any] = {}
        for key in ("epsilon", "delta", "confidence"):
            if key in query:
                kwargs[key] = float(_one(query.pop(key)))
        if "policy" in query:
            kwargs["policy"] = _one(query.pop("policy"))
        if url.get_driver_name() in ("chdb", "embedded"):
            path = url.database or ""
            kwargs["dsn"] = "chdb:///" + path.lstrip("/") if path else None
            kwargs["analyst"] = query.pop("analyst", url.username or "default")
            kwargs["database"] = query.pop("database", None)
        else:
            host = url.host or "127.0.0.1"
            kwargs["dsn"] = f"dpch://{host}:{url.port or 8123}"
            kwargs["analyst"] = url.username or query.pop("analyst", "default")
            kwargs["password"] = url.password if url.password is not None else query.pop("password", None)
            kwargs["database"] = url.database or query.pop("database", None)
        if query:
            raise ValueError(f"unknown dpch URL parameter(s): {', '.join(sorted(query))}")
        return [], kwargs

    # -- no transactions, no server round trips on connect --------------------------------------------

    def initialize(self, connection: Any) -> None:
        self.server_version_info = (26,)
        self.default_schema_name = self._session(connection).engine.database
        self.default_isolation_level = None

    def get_isolation_level(self, dbapi_connection: Any) -> Any:
        return None

    def do_rollback(self, dbapi_connection: Any) -> None:
        pass

    def do_commit(self, dbapi_connection: Any) -> None:
        pass

    def do_ping(self, dbapi_connection: Any) -> bool:
        return not dbapi_connection.closed

    def is_disconnect(self, e: Any, connection: Any, cursor: Any) -> bool:
        return False

    # -- reflection: from the policy -------------------------------------------------------------------

    @staticmethod
    def _session(connection: Any) -> PrivateSession:
        """The dpch session under SQLAlchemy's connection (its pool's DB-API connection)."""
        return cast(dbapi.Connection, connection.connection.dbapi_connection).session

    def _policies(self, connection: Any, schema: str | None) -> dict[str, TableInfo]:
        session = self._session(connection)
        if schema not in (None, session.engine.database):
            return {}
        return {p.table: p for p in session.tables()}

    def get_schema_names(self, connection: Any, **kw: Any) -> list[str]:
        return [self._session(connection).engine.database]

    def get_table_names(self, connection: Any, schema: str | None = None, **kw: Any) -> list[str]:
        return sorted(self._policies(connection, schema))

    def get_view_names(self, connection: Any, schema: str | None = None, **kw: Any) -> list[str]:
        return []

    def has_table(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> bool:
        return table_name in self._policies(connection, schema)

    def get_columns(self, connection: Any, table_name: str, schema: str | None = None,
                    **kw: Any) -> list[ReflectedColumn]:
        policy = self._policies(connection, schema).get(table_name)
        if policy is None:
            raise NoSuchTableError(table_name)
        return [ReflectedColumn(name=name, type=sqlalchemy_type(col.type), nullable=col.type.startswith("Nullable"),
                                default=None, autoincrement=False, comment=col.describe() or None)
                for name, col in policy.columns.items()]

    def get_pk_constraint(self, connection: Any, table_name: str, schema: str | None = None,
                          **kw: Any) -> ReflectedPrimaryKeyConstraint:
        return ReflectedPrimaryKeyConstraint(constrained_columns=[], name=None)

    def get_foreign_keys(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> list:
        return []

    def get_indexes(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> list:
        return []

    def get_unique_constraints(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> list:
        return []

    def get_check_constraints(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> list:
        return []

    def get_table_comment(self, connection: Any, table_name: str, schema: str | None = None,
                          **kw: Any) -> ReflectedTableComment:
        policy = self._policies(connection, schema).get(table_name)
        try:
            return ReflectedTableComment(text=policy.describe() if policy is not None else None)
        except DpchError:
            return ReflectedTableComment(text=None)


def _one(value: str | tuple[str, ...]) -> str:
    """A URL query parameter given once (SQLAlchemy gives repeated ones as a tuple: the last wins)."""
    return value if isinstance(value, str) else value[-1]


dialect = DpchDialect

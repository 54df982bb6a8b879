"""Compare-and-set in ClickHouse Keeper, through a KeeperMap table.

dpch's admission must be linearizable across every process that shares a budget (docs/design.md
rule 11). ClickHouse Keeper is the linearizable store a ClickHouse deployment already has, and the
KeeperMap table engine reaches it in SQL (https://clickhouse.com/docs/engines/table-engines/special/keeper-map):
each row is one Keeper node; with ``keeper_map_strict_mode = 1`` an INSERT of an existing key fails
("Node exists") and an ``ALTER TABLE … UPDATE`` reads each row with its Keeper version and writes it
back only at that version (a ``set`` with version: "Bad version" if another writer came between).

:class:`VersionedMap` is one such table of versioned values, with two writes:

- :meth:`VersionedMap.create`: create-if-absent (strict INSERT);
- :meth:`VersionedMap.advance`: compare-and-set. The UPDATE carries ``throwIf(version != v)`` in its
  assignment, so an UPDATE against a value that has already moved on *fails* instead of matching no
  row: the writer learns that it lost from the error, without a second read. A concurrent writer
  between the mutation's read and its write is Keeper's "Bad version".

Why a versioned value and not a chain of create-only slots: a slot chain grows in Keeper with every
release, and its old slots cannot be deleted safely — a writer paused (SIGSTOP, a long GC) while
holding slot h could later re-create the deleted slot h+1 and commit from stale state. A versioned
``set`` keeps one node per key and fences any writer whose version is stale, however long it paused.

Each value records the token of the write that made it and of the last :data:`WRITERS` writes
(``writers``), so a writer whose statement failed in transit (a broken connection: the write may or
may not have happened) re-reads the key and finds out (:meth:`VersionedMap.outcome`). Any other error
is :class:`~dpch.errors.AdmissionUnavailable`: callers fail closed.

The embedded store never uses this module: chdb's in-process test Keeper forgets everything when the
process ends, and a KeeperMap table whose Keeper data is gone can stop the store from opening.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from dpch.errors import AdmissionUnavailable
from dpch.store.engine import Engine
from dpch.store.quoting import quote_string

#: where a server's admission is decided (dpch.accounting.admission): auto (Keeper if the server has it),
#: keeper, owner — here, below the CLI, so that reading the option loads no accounting code
MODE_ENV = "DPCH_ADMISSION"
MODES = ("auto", "keeper", "owner")
#: writers' tokens kept in each value, newest last (how far back a writer can recognise its own write)
WRITERS = 64
#: the setting that makes KeeperMap writes conditional (Keeper's create and versioned set)
STRICT = "keeper_map_strict_mode = 1"

#: errors that say the write lost the race: the key exists (create), its version moved (our throwIf,
#: Keeper's "Bad version"), or it vanished between read and write
_LOST = re.compile(r"Node exists|Bad version|No node|FUNCTION_THROW_IF_VALUE_IS_NON_ZERO|\(code 395\)|Code: 395\b")
#: errors that say the server has no Keeper for KeeperMap (not configured: never "down")
_NOT_CONFIGURED = re.compile(r"keeper_map_path_prefix|no Zookeeper configuration|NO_ELEMENTS_IN_CONFIG|"
                             r"NO_ZOOKEEPER|KeeperMap is disabled", re.IGNORECASE)


class KeeperNotConfigured(AdmissionUnavailable):
    """The server has no Keeper for KeeperMap tables (``<zookeeper>`` and ``keeper_map_path_prefix``)."""


@dataclass(frozen=True)
class Versioned:
    """A key's value at one version; ``writers`` are the tokens of its latest writes, newest last."""

    version: int
    value: str
    writers: tuple[str, ...]


def new_token() -> str:
    """A fresh writer token (one per write attempt)."""
    return uuid.uuid4().hex


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class VersionedMap:
    """A KeeperMap table ``name`` in ``engine``'s database: key → (version, value, writers).

    The Keeper path is ``/dpch/<database>/<name>`` under the server's ``keeper_map_path_prefix``, so
    every process and every replica that opens the same database shares it (created ``ON CLUSTER``
    when the engine names a cluster). Creating the table raises :class:`KeeperNotConfigured` on a
    server without Keeper, :class:`~dpch.errors.AdmissionUnavailable` on any other failure.
    """

    def __init__(self, engine: Engine, name: str, *, create: bool = True) -> None:
        self.engine = engine
        self.name = name
        self.table = engine.table(name)
        if create:
            self._create()

    def on(self, engine: Engine) -> VersionedMap:
        """The same table through ``engine`` (another connection to the same database; no DDL)."""
        return VersionedMap(engine, self.name, create=False)

    def _create(self) -> None:
        engine, name = self.engine, self.name
        path = quote_string(f"/dpch/{engine.database}/{name}")
        try:
            engine.command(
                f"CREATE TABLE IF NOT EXISTS {self.table}{engine.on_cluster()}"
                " (key String, version UInt64, writers Array(String), value String)"
                f" ENGINE = KeeperMap({path}) PRIMARY KEY key")
            self.read("")  # a table whose Keeper data is missing fails here, not at the first admission
        except AdmissionUnavailable:
            raise
        except Exception as exc:
            text = _message(exc)
            if _NOT_CONFIGURED.search(text):
                raise KeeperNotConfigured(
                    f"the ClickHouse server has no Keeper for KeeperMap tables ({engine.describe()})",
                    hint="configure <zookeeper> and <keeper_map_path_prefix> on the server (docs/serving.md)") from None
            raise self._unavailable(exc) from None

    @staticmethod
    def exists(engine: Engine, name: str) -> bool:
        """Whether the KeeperMap table ``name`` exists in ``engine``'s database (once it does, the
        database's admission has used Keeper and never silently stops using it)."""
        return engine.table_exists(name)

    def _unavailable(self, exc: BaseException) -> AdmissionUnavailable:
        error = AdmissionUnavailable(
            "ClickHouse Keeper could not be reached, so nothing was admitted or charged",
            hint="admission fails closed while Keeper is unavailable; retry when the server's Keeper is back")
        error.reason = type(exc).__name__  # the owner's view (logs); the text may name servers
        return error

    # -- reads ----------------------------------------------------------------------------------------

    def read(self, key: str) -> Versioned | None:
        """The key's current value (one Keeper read), or None if it does not exist."""
        found = self.read_many([key])
        return found.get(key)

    def read_many(self, keys: list[str]) -> dict[str, Versioned]:
        """The current values of ``keys`` that exist (one statement: KeeperMap turns ``key IN (…)``
        into a multi-key lookup instead of a scan)."""
        if not keys:
            return {}
        listed = ", ".join(quote_string(k) for k in keys)
        try:
            rows = self.engine.query_rows(
                f"SELECT key, version, value, writers FROM {self.table} WHERE key IN ({listed})")
        except Exception as exc:
            raise self._unavailable(exc) from None
        return {r[0]: Versioned(int(r[1]), r[2], tuple(r[3])) for r in rows}

    # -- writes ---------------------------------------------------------------------------------------

    def create(self, key: str, value: str, token: str, version: int = 1) -> bool | None:
        """Creates ``key`` at ``version`` unless it exists. True: created; False: it exists (another
        writer); None: the outcome is unknown (the statement failed in transit): call :meth:`outcome`."""
        sql = (f"INSERT INTO {self.table} (key, version, writers, value) SETTINGS {STRICT}"
               f" VALUES ({quote_string(key)}, {int(version)}, [{quote_string(token)}], {quote_string(value)})")
        return self._write(sql)

    def advance(self, key: str, version: int, value: str, token: str) -> bool | None:
        """Sets ``key`` to ``value`` at ``version`` + 1 if it is still at ``version`` (Keeper's versioned
        set). True: written; False: the key moved on; None: unknown, see :meth:`outcome`. The key must
        exist (an UPDATE of a missing key matches no row and reports nothing): callers advance only keys
        they read, and dpch never deletes a key while processes use it."""
        v = int(version)
        tok = quote_string(token)
        sql = (f"ALTER TABLE {self.table} UPDATE"
               f" version = version + 1 + throwIf(version != {v}, 'dpch: stale version'),"
               f" writers = arrayPushBack(arraySlice(writers, -{WRITERS - 1}), {tok}),"
               f" value = {quote_string(value)}"
               f" WHERE key = {quote_string(key)} SETTINGS {STRICT}")
        return self._write(sql)

    def _write(self, sql: str) -> bool | None:
        try:
            self.engine.command(sql)
        except Exception as exc:
            text = _message(exc)
            if _LOST.search(text):
                return False
            return None
        return True

    def outcome(self, key: str, tokens: set[str]) -> str | None:
        """After a write whose outcome is unknown: which of ``tokens`` (this writer's attempts) made
        the key's current value or one of its last :data:`WRITERS` values, or None if none did.
        Raises :class:`~dpch.errors.AdmissionUnavailable` if the key cannot be read (fail closed)."""
        found = self.read(key)
        if found is None:
            return None
        for token in found.writers:
            if token in tokens:
                return token
        return None

    def delete(self, key: str) -> None:
        """Removes ``key`` (tests and the data owner's reset; never on the admission path)."""
        try:
            self.engine.command(f"DELETE FROM {self.table} WHERE key = {quote_string(key)}")
        except Exception as exc:
            raise self._unavailable(exc) from None

    def keys(self, prefix: str) -> list[str]:
        """Every key starting with ``prefix`` (a scan of the table's Keeper children: the reconciler's)."""
        try:
            rows = self.engine.query_rows(f"SELECT key FROM {self.table} WHERE startsWith(key, {quote_string(prefix)})")
        except Exception as exc:
            raise self._unavailable(exc) from None
        return [r[0] for r in rows]


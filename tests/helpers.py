"""Helpers for tests that build small annotated tables, and for tests that run a child process."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import dpch

ROOT = Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    """This process's environment with the repository on PYTHONPATH, for a child ``python -c``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


#: the cap key tests run emitted SQL with (a release draws its own, dpch.sql.cap.row_order): fixed, so
#: two runs of one emitted query — a query and its neighbour, a form and its reference — keep the same rows
CAP_KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


def query_keyed(engine, sql: str, key: tuple[int, int] = CAP_KEY) -> list[tuple]:
    """``engine.query_rows`` of emitted SQL, its cap key bound."""
    from dpch.sql.cap import keyed

    return engine.query_rows(sql, keyed(sql, key))


def run_private_keyed(engine, sql: str, key: tuple[int, int] = CAP_KEY) -> list[tuple]:
    """``engine.run_private`` of emitted SQL, its cap key bound."""
    from dpch.sql.cap import keyed

    return engine.run_private(sql, keyed(sql, key))


def ledger_rows(session: dpch.Session) -> int:
    """Rows in the session's ledger (a refused query must leave it unchanged)."""
    return session.engine.query_rows(f"SELECT count() FROM {session.engine.table('dpch_ledger')}")[0][0]


def refused_uncharged(session: dpch.Session, sql: str, **options: object) -> dpch.QueryRejected:
    """The refusal of ``sql``, checked to leave the ledger as it was (refused before any charge)."""
    before = ledger_rows(session)
    with pytest.raises(dpch.QueryRejected) as info:
        session.query(sql, **options)
    assert ledger_rows(session) == before, "refused before anything is charged"
    return info.value


def make_table(session: dpch.Session, ddl_body: str, rows: list[tuple], columns: list[str],
               name: str = "t", comment: str = "dp: privacy_unit=uid, max_rows_per_unit=3") -> str:
    """Creates ``name`` in the session's database with the given columns, comment and rows."""
    engine = session.engine
    engine.command(
        f"CREATE TABLE {engine.table(name)} ({ddl_body}) ENGINE = MergeTree ORDER BY tuple() "
        f"COMMENT '{comment}'"
    )
    if rows:
        engine.insert(name, rows, columns)
    session.policy.reload()
    return name


#: a table every kind of release can ask: a public key ``g`` with declared values, a private key
#: ``occupation`` (partition selection), a bounded ``x``; one row per unit
KINDS_TABLE = ("uid UInt32, g String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', occupation String, "
               "x Float64 COMMENT 'dp: bounds=[0, 10]'")


def make_kinds_table(session: dpch.Session, name: str = "t", units: int = 300) -> str:
    """:data:`KINDS_TABLE` as ``name``: unit u in group "abc"[u % 3], a nurse or a cook, x = u % 11."""
    rows = [(u, "abc"[u % 3], ("nurse", "cook")[u % 2], float(u % 11)) for u in range(units)]
    return make_table(session, KINDS_TABLE, rows, ["uid", "g", "occupation", "x"], name=name,
                      comment="dp: privacy_unit=uid, unique_units")


def inject_totality_gap(monkeypatch) -> None:
    """Fault injection for the tripwire (docs/design.md rule 5), the database staying real: every
    emitted SQL run fails inside ClickHouse iff its first aggregate ``m0`` is non-zero, as if a
    function that throws on some rows had slipped past the totality registry (issue 12's regex
    oracle: ``match('x', if(<condition>, '(', 'x'))``). ``monkeypatch.undo()`` removes it."""
    from dpch.store.engine import Engine

    real = Engine.run_private

    def run_private(self: Engine, sql: str, parameters: dict | None = None) -> list[tuple]:
        return real(self, f"SELECT * FROM ({sql}) AS r WHERE throwIf(r.m0 > 0) = 0", parameters)

    monkeypatch.setattr(Engine, "run_private", run_private)


def raw_http(port: int, request: bytes) -> bytes:
    """Sends the bytes of ``request`` to a server on 127.0.0.1 and reads until the server closes the
    connection (no half-close: the client is still there); the socket's 60 s timeout is the deadline."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out

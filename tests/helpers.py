"""Helpers for tests that build small annotated tables."""

from __future__ import annotations

import dpch


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

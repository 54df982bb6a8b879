"""sqlglot's log messages while dpch parses and renders go to dpch's debug log, not to the user
(issue 24, item 4; ``dpch/sql/sqlglot_log.py``); sqlglot used directly, outside dpch, logs as before."""

from __future__ import annotations

import logging

import sqlglot

from dpch.sql import sqlglot_log
from tests.helpers import make_table, refused_uncharged

#: sqlglot parses ClickHouse's two-argument log and cannot render it back: it warns on every render
WARNS = "SELECT count() FROM t WHERE log(3, 5) > 0"


def _sqlglot_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "sqlglot" and r.levelno >= logging.WARNING]


def test_sqlglot_warns_when_used_directly(caplog):
    """The control: the same SQL through sqlglot itself, with no dpch code on the stack, does warn
    (with dpch's filter installed on the sqlglot logger, as importing dpch.sql.parse does)."""
    sqlglot_log.install()
    assert any(isinstance(f, sqlglot_log.QuietInsideDpch) for f in logging.getLogger("sqlglot").filters)
    with caplog.at_level(logging.DEBUG):
        sqlglot.transpile(WARNS, read="clickhouse", write="clickhouse")
    assert any("Unsupported logarithm" in m for m in _sqlglot_warnings(caplog))


def test_nothing_from_sqlglot_reaches_the_user_while_dpch_plans_and_renders(connect, caplog):
    session = connect()
    make_table(session, "uid UInt64, x Float64 COMMENT 'dp: bounds=[0, 10]'", [(1, 1.0)], ["uid", "x"])
    with caplog.at_level(logging.DEBUG):
        err = refused_uncharged(session, WARNS)
    assert _sqlglot_warnings(caplog) == []
    moved = [r for r in caplog.records if r.name == "dpch.sql.sqlglot"]
    assert moved and all(r.levelno == logging.DEBUG for r in moved)
    assert any("Unsupported logarithm" in r.getMessage() for r in moved)
    assert "Unsupported" not in str(err)  # dpch's own refusal says what is wrong, in its words

"""Keeps sqlglot's own log messages off the user's stderr while dpch parses and renders SQL.

sqlglot logs what it cannot translate faithfully (``Unsupported logarithm with base 5``) and what it
falls back on to the ``sqlglot`` logger; when the application configured no logging, Python prints
such warnings on stderr, in the middle of ``dpch query``'s output. They are not the user's business:
a query sqlglot cannot render faithfully is refused by ClickHouse's check of the emitted SQL before
anything is charged, in dpch's own words. So a record that sqlglot emits while dpch's code is on the
call stack is moved to dpch's logger at debug level; sqlglot's messages to an application that uses
it directly, outside dpch, are untouched, and so are dpch's own messages (other loggers).

The call stack, rather than a flag set around each parse and render, decides "inside dpch": dpch
renders trees in several modules and dialects (emitted SQL, probe shapes, time grids, error texts),
and a flag would have to be set at each of them, now and in every module written later.
"""

from __future__ import annotations

import inspect
import logging

#: where sqlglot's messages from inside dpch go (debug level)
log = logging.getLogger("dpch.sql.sqlglot")


def _called_from_dpch() -> bool:
    frame = inspect.currentframe()
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith("dpch.") and module != __name__:  # this filter's own frames do not count
            return True
        frame = frame.f_back
    return False


class QuietInsideDpch(logging.Filter):
    """A filter for the ``sqlglot`` logger: drops (and re-logs at debug level on :data:`log`) the
    records emitted while dpch's code is on the call stack."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _called_from_dpch():
            return True
        log.debug("%s", record.getMessage())
        return False


def install() -> None:
    """Adds :class:`QuietInsideDpch` to the ``sqlglot`` logger, once per process."""
    logger = logging.getLogger("sqlglot")
    if not any(isinstance(f, QuietInsideDpch) for f in logger.filters):
        logger.addFilter(QuietInsideDpch())


__all__ = ["QuietInsideDpch", "install", "log"]

"""``dpch query``'s input: the SQL from the argument, ``-q/--query`` or standard input (``-``),
and ``--multiquery``: several ``;``-separated statements, each a separate release.

A multi-statement run first explains every statement (free: nothing is read or spent), so a
statement dpch refuses stops the run before anything is charged. Then the statements run in
order, each charged on its own; the first error stops the run, and the message says which
statements were released (and paid for), whether the failed one was charged (only a failure
after its charge is), and which never ran.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from dpch.errors import ConfigError, DpchError, GatewayTimeout, QueryFailedAfterCharge

if TYPE_CHECKING:  # types only: dpch.api loads the session stack (start-up speed)
    from dpch.api import PrivateSession
    from dpch.pipeline.report import Release

#: what became of a failed statement's charge, by the class of its error (first match wins)
_CHARGED: list[tuple[type[DpchError], str]] = [
    (QueryFailedAfterCharge, "it was charged: it failed after its charge"),
    (GatewayTimeout, "the gateway may have charged it (dpch budget tells)"),
]
_NOT_CHARGED = "nothing was charged for it"


def read_sql(argument: str | None, option: str | None, stdin: TextIO | None = None) -> str:
    """The SQL to run: the argument or ``-q`` (not both); ``-`` (either) reads standard input, as
    does giving neither when standard input is not a terminal."""
    if argument is not None and option is not None:
        raise ConfigError("give the SQL once: as the argument or with -q/--query, not both")
    stream = stdin if stdin is not None else sys.stdin
    text = argument if argument is not None else option
    if text == "-" or (text is None and not stream.isatty()):
        text = stream.read()
    if text is None or not text.strip():
        raise ConfigError("no SQL given", hint='dpch query "SELECT ...", dpch query -q "SELECT ...", '
                          'or echo "SELECT ..." | dpch query -')
    return text


class MultiQueryFailed(DpchError):
    """A statement of a ``--multiquery`` run failed; the message says what was charged."""


def _range(first: int, last: int) -> str:
    return f"statement {first}" if first == last else f"statements {first}–{last}"


def run_statements(session: PrivateSession, statements: list[str], options: dict[str, Any],
                   emit: Callable[[Release], None]) -> list[Release]:
    """Runs each statement as its own release, calling ``emit`` on each answer; raises
    :class:`MultiQueryFailed` at the first error (after the free check of all of them)."""
    total = len(statements)
    for index, sql in enumerate(statements, start=1):
        if sql.split(None, 1)[0].upper() == "EXPLAIN":
            continue  # EXPLAIN DP spends nothing anyway
        try:
            session.explain(sql, **options)
        except DpchError as exc:
            raise MultiQueryFailed(f"statement {index} of {total} is refused: {exc}; "
                                   f"nothing was run or charged") from exc
    releases: list[Release] = []
    for index, sql in enumerate(statements, start=1):
        try:
            release = session.query(sql, **options)
        except DpchError as exc:
            done = f"{_range(1, index - 1)} released and charged; " if index > 1 else ""
            charged = next((text for cls, text in _CHARGED if isinstance(exc, cls)), _NOT_CHARGED)
            skipped = f"; {_range(index + 1, total)} not run" if index < total else ""
            raise MultiQueryFailed(f"statement {index} of {total} failed: {exc}\n"
                                   f"{done}{charged}{skipped}") from exc
        releases.append(release)
        emit(release)
    return releases

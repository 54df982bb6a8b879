"""Cancelling a running query before its charge (the shell's Ctrl-C).

A query's admission is decided, and its charge counted, before ClickHouse runs anything for it; the
charge is durable before its noise is drawn or its result acted on (docs/design.md rule 2). So a
query can be cancelled for free exactly until the charge is counted, and never after it:

- The caller runs the query inside ``with cancellable(token):`` (a context variable, so only
  that thread's query is affected) and may call :meth:`CancelToken.cancel` from another thread.
- :class:`~dpch.accounting.accountant.Accountant` calls :func:`checkpoint` under the analyst's
  lock, after admission and immediately before the ledger INSERT. If the token was cancelled,
  :class:`QueryCancelled` is raised there: no row is written, no data read, no noise drawn.
  Otherwise the token is *committed*: from then on :meth:`CancelToken.cancel` returns False,
  since the release is paid for whether or not its answer is shown.

The decision depends only on when the analyst pressed Ctrl-C relative to the charge, which is
counted before any data is read; it reveals nothing about the data.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from dpch.errors import DpchError


class QueryCancelled(DpchError):
    """The query was cancelled before its charge: nothing was charged, read or released."""

    kind = "cancelled"


class CancelToken:
    """One query's cancellation state: running → cancelled (before the charge) or committed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._committed = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def committed(self) -> bool:
        """True once the query passed the checkpoint before its ledger write."""
        return self._committed

    def cancel(self) -> bool:
        """Requests cancellation. True: in time, the query will stop before any charge. False:
        the charge was already being written (the release is paid for)."""
        with self._lock:
            if self._committed:
                return False
            self._cancelled = True
            return True

    def commit(self) -> None:
        """The last point to cancel: raises :class:`QueryCancelled` if cancelled, else commits."""
        with self._lock:
            if self._cancelled:
                raise QueryCancelled("query cancelled before its charge: nothing was spent")
            self._committed = True


_current: ContextVar[CancelToken | None] = ContextVar("dpch_cancel_token", default=None)


@contextmanager
def cancellable(token: CancelToken) -> Iterator[CancelToken]:
    """Runs the block's queries under ``token`` (in this thread / context only)."""
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)


def check_cancelled() -> None:
    """Raises :class:`QueryCancelled` if this thread's query was cancelled; never commits. Called
    between steps of planning, so that work for a request that was already answered (a timeout) or
    whose client is gone stops early instead of running on to the charge's checkpoint."""
    token = _current.get()
    if token is not None and token.cancelled:
        raise QueryCancelled("query cancelled before its charge: nothing was spent")


def checkpoint() -> None:
    """Called right before a ledger write; a no-op unless the caller runs under a token."""
    token = _current.get()
    if token is not None:
        token.commit()

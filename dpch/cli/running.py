"""Running one shell call in a worker thread: a spinner after half a second, and Ctrl-C.

What Ctrl-C does (see :mod:`dpch.store.cancel`), for an in-process session:

- **before the ledger write** (parsing, planning, reading a public table's key domain, the
  type-checking probe, admission): the shell returns to the prompt at once and reports that
  nothing was charged. The worker stops at the checkpoint before the ledger INSERT and writes
  nothing; the next command first waits for it to stop (it may be finishing a read of public data).
- **after the ledger write** (ClickHouse computing the aggregate, noise): the release is paid for.
  The shell says so and keeps waiting for the answer; a second Ctrl-C abandons it (the charge
  stays, and ``\\history`` lists it).

Through a gateway (``dpch://``) the charge is made by the server, so the shell cannot know
whether it happened: it stops waiting and says to check ``\\budget``.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from dpch.errors import DpchError
from dpch.store.cancel import CancelToken, cancellable

T = TypeVar("T")

SPINNER_DELAY = 0.5  # seconds before the progress indicator appears
_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Cancelled(DpchError):
    """The analyst pressed Ctrl-C; ``charged`` says whether the release was already paid for."""

    kind = "cancelled"

    def __init__(self, message: str, *, charged: bool | None) -> None:
        super().__init__(message)
        self.charged = charged


class Runner:
    """Runs calls so that Ctrl-C and a spinner work; ``local``: the session charges in this process."""

    def __init__(self, *, local: bool, progress: bool, ascii: bool = False) -> None:
        self.local = local
        self.progress = progress
        self.frames = "|/-\\" if ascii else _FRAMES
        # a cancelled call still running; an Event, not Thread.is_alive(): a join() interrupted
        # by Ctrl-C can leave the thread looking finished while it runs (CPython 3.11)
        self._pending: threading.Event | None = None

    def settle(self) -> None:
        """Waits for a cancelled call that is still running (it holds the embedded store)."""
        pending, self._pending = self._pending, None
        if pending is not None and self.local:
            self._wait(pending, time.perf_counter(), "waiting for the cancelled query to stop")

    def call(self, fn: Callable[[], T], label: str = "running") -> T:
        """``fn()`` in a worker under a fresh :class:`CancelToken`; re-raises its error."""
        self.settle()
        token = CancelToken()
        result: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            with cancellable(token):
                try:
                    result["value"] = fn()
                except BaseException as exc:  # handed to the caller's thread
                    result["error"] = exc
                finally:
                    done.set()

        worker = threading.Thread(target=work, name="dpch-shell-call", daemon=True)
        started = time.perf_counter()
        worker.start()
        try:
            self._wait(done, started, label)
        except KeyboardInterrupt:
            if not self.local:
                self._pending = done
                raise Cancelled("cancelled; the gateway may still run the query and charge it",
                                charged=None) from None
            if token.cancel():
                self._pending = done
                raise Cancelled("cancelled before the charge: nothing was spent", charged=False) from None
            click.secho("the charge was already written to the ledger (before ClickHouse ran), so this "
                        "answer is paid for; waiting for it (Ctrl-C again abandons it)", fg="yellow", err=True)
            try:
                self._wait(done, started, label)
            except KeyboardInterrupt:
                self._pending = done
                raise Cancelled("abandoned; the release stays charged (\\history lists it)", charged=True) from None
        if "error" in result:
            raise result["error"]
        return result["value"]

    def _wait(self, done: threading.Event, started: float, label: str) -> None:
        shown = False
        frames = itertools.cycle(self.frames)
        try:
            while not done.wait(0.1):
                elapsed = time.perf_counter() - started
                if self.progress and elapsed >= SPINNER_DELAY:
                    sys.stderr.write(f"\r{next(frames)} {label} {elapsed:.1f} s  (Ctrl-C cancels)")
                    sys.stderr.flush()
                    shown = True
        finally:
            if shown:
                sys.stderr.write("\r\x1b[K")
                sys.stderr.flush()

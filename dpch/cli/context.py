"""What every ``dpch`` command shares: the global options with the sessions they open, and the
error handling that turns a dpch error into one line on stderr and exit code 1.

Its own module so that :mod:`.main` (which registers the commands) and the commands defined in
their own modules (:mod:`.audit`, :mod:`.serve`) all import it, and none imports another.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from dpch.errors import ConfigError, DpchError

if TYPE_CHECKING:  # the session stack is imported by the first command that opens one (start-up speed)
    from dpch.api import PrivateSession
    from dpch.session import Session


class Context:
    """Global options, and the session opened lazily by the first command that needs it.

    :meth:`session` is the analyst's, on a store or a gateway (``--dsn dpch://...``); :meth:`store`
    is the data owner's, on the store itself (the ledger, budgets, locks, loading, audits)."""

    def __init__(self, dsn: str | None, analyst: str, database: str | None, policy: str | None,
                 debug: bool) -> None:
        self.dsn = dsn
        self.analyst = analyst
        self.database = database
        self.policy = policy
        self.debug = debug
        self._local: Session | None = None
        self._remote: PrivateSession | None = None

    def session(self, seed: int | None = None) -> PrivateSession:
        """The analyst's private session (a gateway's when the DSN names one)."""
        # start-up: the session stack (NumPy, SciPy, sqlglot, the ClickHouse client) loads only when used
        from dpch.connection import connect_gateway, is_gateway_dsn

        if not is_gateway_dsn(self.dsn):
            return self.store(seed=seed)
        if self._remote is None:
            self._remote = connect_gateway(self.dsn, analyst=self.analyst, database=self.database)
        return self._remote

    def store(self, command: str = "this command", *, seed: int | None = None) -> Session:
        """A session on the store itself; refused through a gateway (its data owner runs ``command``)."""
        # start-up: the session stack (NumPy, SciPy, sqlglot, the ClickHouse client) loads only when used
        from dpch.connection import connect_local, is_gateway_dsn

        if is_gateway_dsn(self.dsn):
            raise ConfigError(f"{command} is for the data owner, on the store itself, not through a gateway",
                              hint="run it where the store is, with --dsn chdb:///path or http://host:8123")
        if self._local is None:
            self._local = connect_local(self.dsn, analyst=self.analyst, database=self.database,
                                        policy=self.policy, seed=seed)
        return self._local

    def close(self) -> None:
        for session in (self._local, self._remote):
            if session is not None:
                session.close()
        self._local = self._remote = None


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turns errors into one line on stderr and exit code 1 (tracebacks only with --debug)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = isinstance(ctx.obj, Context) and ctx.obj.debug
        try:
            return func(*args, **kwargs)
        except DpchError as exc:
            if debug:
                traceback.print_exc()
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(1)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as exc:  # never show a traceback (or an unvetted message) by default
            if debug:
                traceback.print_exc()
            click.secho(f"error: internal error ({type(exc).__name__}); rerun with --debug for details",
                        fg="red", err=True)
            sys.exit(1)

    return wrapper

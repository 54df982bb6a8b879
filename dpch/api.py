"""The interface of a private session, as every client of one programs against it.

:func:`dpch.connect` returns a :class:`PrivateSession`: an in-process
:class:`~dpch.session.Session` on a store, or a :class:`~dpch.server.client.RemoteSession` on a
``dpch serve`` gateway. Both satisfy these Protocols structurally (neither inherits them), and the
shell, the DB-API and the CLI use only what is declared here, so none of them asks which of the two
it holds. What is local-only (planning, the policy, the store itself) is reached through
:class:`~dpch.session.Session`, which the data owner's commands open on the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Self

from dpch.accounting.accountant import BudgetStatus
from dpch.accounting.ledger import LedgerEntry
from dpch.pipeline.report import MeasureReport, Release
from dpch.privacy.cost import PrivacyCost


class ColumnInfo(Protocol):
    """One column of a table's policy."""

    @property
    def type(self) -> str:
        """Its ClickHouse type."""
        ...

    def describe(self) -> str:
        """Its policy in one line (bounds, public, values)."""
        ...


class TableInfo(Protocol):
    """A table's privacy policy (:class:`~dpch.policy.model.TablePolicy`, or a gateway's account of one)."""

    @property
    def table(self) -> str: ...

    @property
    def public(self) -> bool: ...

    @property
    def privacy_unit(self) -> str | None: ...

    @property
    def columns(self) -> Mapping[str, ColumnInfo]: ...

    def describe(self) -> str:
        """The policy as text (what ``dpch policy show`` prints)."""
        ...

    def as_dict(self) -> dict[str, Any]:
        """The policy as JSON (what ``dpch policy show --json`` prints)."""
        ...


class Explained(Protocol):
    """What a query would do and cost, computed without spending anything
    (:class:`~dpch.pipeline.report.Explanation`, or a gateway's account of one)."""

    @property
    def sql(self) -> str:
        """The SQL dpch would run (over the private table: never shown data)."""
        ...

    @property
    def cost(self) -> PrivacyCost:
        """What running the query would be charged."""
        ...

    @property
    def admissible(self) -> bool:
        """Whether the analyst's filter would admit that charge now."""
        ...

    @property
    def reason(self) -> str:
        """The filter's verdict in words (why it would refuse the charge, when it would)."""
        ...

    @property
    def measures(self) -> list[MeasureReport]: ...

    @property
    def notes(self) -> list[str]: ...

    def describe(self) -> str:
        """The explanation as text (what ``dpch explain`` prints)."""
        ...

    def as_dict(self) -> dict[str, Any]:
        """The explanation as JSON (what a gateway sends)."""
        ...


class Store(Protocol):
    """Where a session's data lives."""

    @property
    def database(self) -> str: ...

    def describe(self) -> str:
        """One line: the store (or gateway) and database."""
        ...


class Ledger(Protocol):
    """An analyst's budget and releases, as the session's filter keeps them."""

    @property
    def analyst(self) -> str: ...

    def status(self, *, recent: int = 5) -> BudgetStatus:
        """Budget, spent, reserved, remaining, and the last ``recent`` releases."""
        ...

    def recent(self, limit: int = 10) -> list[LedgerEntry]:
        """The last ``limit`` releases, newest first."""
        ...


class PrivateSession(Protocol):
    """One analyst's private session: every answer noisy, with its interval, and charged."""

    @property
    def analyst(self) -> str:
        """Whose budget pays."""
        ...

    @property
    def in_process(self) -> bool:
        """Whether queries are planned, charged and noised in this process. When they are, Ctrl-C
        can stop a query before its charge; through a gateway the client cannot know whether
        the charge happened (see :mod:`dpch.cli.running`)."""
        ...

    @property
    def engine(self) -> Store: ...

    @property
    def accountant(self) -> Ledger: ...

    def query(self, sql: str, **options: Any) -> Release:
        """Answers ``sql`` privately (options: ``epsilon``, ``delta``, ``mechanism``, ``confidence``, ...)."""
        ...

    def explain(self, sql: str, **options: Any) -> Explained:
        """What ``query(sql, **options)`` would do and cost; spends nothing."""
        ...

    def refine(self, release_id: str | None = None, *, accuracy: float | None = None,
               relative_error: float | None = None, max_epsilon: float | None = None) -> Release:
        """A less noisy version of an accuracy-first answer (default: the latest)."""
        ...

    def budget(self) -> BudgetStatus:
        """The analyst's budget, spent and remaining."""
        ...

    def tables(self) -> Sequence[TableInfo]:
        """The tables with a privacy policy (private or public)."""
        ...

    def table_policy(self, table: str) -> TableInfo:
        """One table's policy (a :class:`~dpch.errors.PolicyError` if it has none)."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

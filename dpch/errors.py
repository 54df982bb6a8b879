"""The dpch error hierarchy.

Every error a user can see is a :class:`DpchError`. Messages name what was wrong and how to
fix it, and never contain a value read from a private table (errors are releases too).

Each error has a ``kind``. :data:`KINDS` is the one table that maps a kind to its dpch class,
the ClickHouse error code a gateway answers with, and the PEP 249 exception class
:mod:`dpch.dbapi` raises; the gateway's wire format, the remote session and the DB-API all
read it (:func:`kind_of`, :func:`error_kind`), so an error crosses the wire as its kind, never
as a message to be sorted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

_E = TypeVar("_E", bound="DpchError")


class DpchError(Exception):
    """Base class of every error dpch raises on purpose."""

    #: a short machine-readable kind, used by the query corpus and the CLI
    kind = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (hint: {self.hint})"
        return self.message

    @classmethod
    def restore(cls: type[_E], message: str, hint: str | None = None) -> _E:
        """The error another process raised, rebuilt from its kind, message and hint (a remote
        session receiving a gateway's error): the message is kept as sent, whatever the
        class's own constructor would write."""
        error = cls.__new__(cls)
        DpchError.__init__(error, message, hint=hint)
        return error


class ConfigError(DpchError):
    """Bad DSN, option, or configuration value."""

    kind = "config"


class AuthenticationFailed(ConfigError):
    """A gateway refused the user name or password."""

    kind = "auth"


class PolicyError(DpchError):
    """A privacy annotation or policy file is invalid, or a table has no policy."""

    kind = "policy"


class QueryRejected(DpchError):
    """The SQL is outside what dpch can answer privately. Nothing was run or charged."""

    kind = "unsupported"


class ParseError(QueryRejected):
    """The SQL text does not parse."""

    kind = "parse"


class MissingBoundsError(QueryRejected):
    """A column is summed or averaged but has no declared bounds."""

    kind = "bounds"


class BudgetExceeded(DpchError):
    """The privacy filter refused the release. Nothing was run or charged."""

    kind = "budget"


class AnalystLocked(BudgetExceeded):
    """The analyst is locked: a release failed after it was charged (a possible attack).

    Nothing was run or charged. Only the data owner clears the lock (``dpch budget unlock``);
    the reason stays with the owner (docs/design.md rule 5).
    """

    kind = "locked_analyst"

    @classmethod
    def of(cls, analyst: str) -> AnalystLocked:
        """The refusal for ``analyst`` (the message names no query and no reason)."""
        return cls(f"analyst {analyst} is locked after a query failed once it was charged",
                   hint=f"the data owner reviews it and runs `dpch budget unlock --analyst {analyst}`")


class StoreLocked(DpchError):
    """Another process holds the embedded store (or, on a server without ClickHouse Keeper, the
    admission of its ledger)."""

    kind = "locked"


class AdmissionUnavailable(DpchError):
    """The shared admission state (ClickHouse Keeper) could not be reached: nothing was admitted,
    run or released. Admission fails closed (docs/design.md rule 11)."""

    kind = "admission"
    #: the failure's class name (the data owner's logs; never shown to an analyst)
    reason = ""


class GatewayBusy(DpchError):
    """A gateway is running as many queries as it allows; nothing was run or charged."""

    kind = "busy"


class GatewayTimeout(DpchError):
    """A gateway stopped waiting for a query after its time limit. The query may still finish on
    the gateway and be charged (its charge is durable before it runs): check the budget."""

    kind = "timeout"


class ExecutionError(DpchError):
    """ClickHouse failed while running dpch's emitted SQL.

    The message never carries ClickHouse's own text, which can quote data.
    """

    kind = "execution"

    #: internal only (e.g. ClickHouse's error code name): for the data owner's lock record, never shown
    reason: str = ""


class QueryFailedAfterCharge(ExecutionError):
    """A release failed after its charge: a possible attack (docs/design.md rule 5, the tripwire).

    The message is one fixed sentence with no detail, whatever failed: anything more could
    depend on the data. The ledger row is marked failed (still counted) and the analyst locked.
    """

    kind = "failed_after_charge"
    MESSAGE = "the query failed after it was charged; the analyst is locked until the data owner reviews it"

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


class ReservationClosed(DpchError):
    """A reservation was settled or voided twice."""

    kind = "ledger"


class AccuracyNotReached(DpchError):
    """An accuracy-first query did not meet its target within its cap: the answer is withheld.

    The run was charged what it reserved (its worst case). ``report`` says what was reached.
    """

    kind = "accuracy"
    release_id: str = ""
    charged: object = None
    report: object = None

    def __init__(self, release_id: str, charged: object, report: object) -> None:
        eps = getattr(charged, "epsilon", 0.0)
        rho = getattr(charged, "rho", None)
        target = getattr(report, "target", "the target")
        super().__init__(
            f"accuracy target {target} not reached within the cap: answer withheld; charged ε {eps:.4g}"
            + (f" (ρ {rho:.4g})" if rho else "") + f" as reserved (release {release_id})",
            hint="allow more with dp_max_epsilon (or more budget), or ask for a looser dp_accuracy")
        self.release_id = release_id
        self.charged = charged
        self.report = report


class CostCheckFailed(DpchError):
    """The cost self-check failed: the mechanisms a release would run do not compose to the cost
    it would be charged (docs/design.md rule 7). Nothing was run or charged; this is a dpch bug."""

    kind = "internal"
    #: what did not compose, for the data owner's logs; never sent to a client ("" when rebuilt from the wire)
    detail: str = ""

    def __init__(self, detail: str) -> None:
        super().__init__("dpch refused to release: its privacy cost self-check failed (nothing was charged)",
                         hint="this is a bug in dpch; please report it with the query")
        self.detail = detail


@dataclass(frozen=True)
class ErrorKind:
    """What one kind of error is in each protocol dpch speaks."""

    kind: str
    #: the dpch class a remote session raises for it
    error: type[DpchError]
    #: the ClickHouse error code a gateway answers with (its name and HTTP status: dpch.server.errors)
    clickhouse_code: int
    #: the name of the PEP 249 exception class :mod:`dpch.dbapi` raises (this module sits below dbapi)
    pep249: str


def _kinds(*rows: tuple[type[DpchError], int, str]) -> dict[str, ErrorKind]:
    return {cls.kind: ErrorKind(cls.kind, cls, code, pep249) for cls, code, pep249 in rows}


class LedgerWriteFailed(ExecutionError):
    """The ledger INSERT carrying a release's charge failed: nothing was released, no noise drawn.

    Fixed text (the failure concerns dpch's own rows, never the data); the release stays counted in
    this process's budget state until the store is reopened (the safe direction)."""

    kind = "ledger_write"

    def __init__(self) -> None:
        super().__init__("the privacy ledger could not be written, so nothing was released; the query "
                         "still counts against the budget until the store is reopened",
                         hint="the data owner should check the store (disk space, permissions), then retry")


#: kind → (dpch class, ClickHouse code, PEP 249 class). The query's fault is a ProgrammingError;
#: budget, locks and an overloaded gateway are OperationalErrors; configuration is an InterfaceError;
#: ClickHouse or dpch failing is an InternalError. ClickHouse codes: 201 QUOTA_EXCEEDED for a
#: budget (HTTP 403: clients retry 429), 291 DATABASE_ACCESS_DENIED for a locked analyst, 60
#: UNKNOWN_TABLE for a table dpch does not serve privately (missing, without a policy, or with an
#: invalid one: to a ClickHouse client it is not there), 1001 for the tripwire's fixed sentence.
KINDS: dict[str, ErrorKind] = _kinds(
    (DpchError, 1002, "DatabaseError"),
    (ConfigError, 36, "InterfaceError"),
    (AuthenticationFailed, 516, "InterfaceError"),
    (PolicyError, 60, "ProgrammingError"),
    (QueryRejected, 497, "ProgrammingError"),
    (ParseError, 62, "ProgrammingError"),
    (MissingBoundsError, 497, "ProgrammingError"),
    (BudgetExceeded, 201, "OperationalError"),
    (AnalystLocked, 291, "OperationalError"),
    (StoreLocked, 202, "OperationalError"),
    (AdmissionUnavailable, 999, "OperationalError"),
    (GatewayBusy, 202, "OperationalError"),
    (GatewayTimeout, 159, "OperationalError"),
    (ExecutionError, 1002, "InternalError"),
    (LedgerWriteFailed, 1002, "OperationalError"),
    (QueryFailedAfterCharge, 1001, "InternalError"),
    (ReservationClosed, 1002, "InternalError"),
    (AccuracyNotReached, 36, "OperationalError"),
    (CostCheckFailed, 1002, "InternalError"),
)


def kind_of(error: DpchError) -> ErrorKind:
    """The table row of ``error``: its class's, or its nearest listed base class's (an error
    defined elsewhere, e.g. the shell's, is what its base is to other processes)."""
    for cls in type(error).__mro__:
        row = KINDS.get(getattr(cls, "kind", ""))
        if row is not None and row.error is cls:
            return row
    return KINDS[DpchError.kind]


def error_kind(kind: str) -> ErrorKind:
    """The table row of ``kind`` (an unknown kind, e.g. from a newer gateway, is a plain DpchError)."""
    return KINDS.get(kind, KINDS[DpchError.kind])

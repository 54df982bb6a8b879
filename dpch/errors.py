"""The dpch error hierarchy.

Every error a user can see is a :class:`DpchError`. Messages name what was wrong and how to
fix it, and never contain a value read from a private table (errors are releases too).
"""

from __future__ import annotations


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


class ConfigError(DpchError):
    """Bad DSN, option, or configuration value."""

    kind = "config"


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
    the reason stays with the owner (DESIGN.md rule 5).
    """

    kind = "locked_analyst"

    @classmethod
    def of(cls, analyst: str) -> AnalystLocked:
        """The refusal for ``analyst`` (the message names no query and no reason)."""
        return cls(f"analyst {analyst} is locked after a query failed once it was charged",
                   hint=f"the data owner reviews it and runs `dpch budget unlock --analyst {analyst}`")


class StoreLocked(DpchError):
    """Another process holds the embedded store."""

    kind = "locked"


class ExecutionError(DpchError):
    """ClickHouse failed while running dpch's emitted SQL.

    The message never carries ClickHouse's own text, which can quote data.
    """

    kind = "execution"

    #: internal only (e.g. ClickHouse's error code name): for the data owner's lock record, never shown
    reason: str = ""


class QueryFailedAfterCharge(ExecutionError):
    """A release failed after its charge: a possible attack (DESIGN.md rule 5, the tripwire).

    The message is one fixed sentence with no detail, whatever failed: anything more could
    depend on the data. The ledger row is marked failed (still counted) and the analyst locked.
    """

    kind = "failed_after_charge"
    MESSAGE = "the query failed after it was charged; the analyst is locked until the data owner reviews it"

    def __init__(self, message: str = MESSAGE, *, hint: str | None = None) -> None:
        # the arguments exist so a remote client can rebuild the error from the gateway's text;
        # what is shown is always the fixed sentence
        super().__init__(self.MESSAGE)


class ReservationClosed(DpchError):
    """A reservation was settled or voided twice."""

    kind = "ledger"


class AccuracyNotReached(DpchError):
    """An accuracy-first query did not meet its target within its cap: the answer is withheld.

    The run was charged what it reserved (its worst case). ``report`` says what was reached.
    """

    kind = "accuracy"

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
    it would be charged (DESIGN.md rule 7). Nothing was run or charged; this is a dpch bug."""

    kind = "internal"

    def __init__(self, detail: str) -> None:
        super().__init__("dpch refused to release: its privacy cost self-check failed (nothing was charged)",
                         hint="this is a bug in dpch; please report it with the query")
        self.detail = detail

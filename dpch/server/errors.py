"""ClickHouse-style errors of the gateway: a code, its name, an HTTP status, and a message.

The body is what ClickHouse writes (``Code: N. DB::Exception: message. (NAME) (version V)``)
and the ``X-ClickHouse-Exception-Code`` header carries the code, so clients raise their own
error types with dpch's message in them.
"""

from __future__ import annotations

from dpch.errors import (
    AnalystLocked,
    BudgetExceeded,
    ConfigError,
    DpchError,
    ExecutionError,
    ParseError,
    PolicyError,
    QueryFailedAfterCharge,
    QueryRejected,
    StoreLocked,
)

# code: (name, HTTP status) — codes and names as ClickHouse defines them
CODES = {
    36: ("BAD_ARGUMENTS", 400),
    48: ("NOT_IMPLEMENTED", 501),
    60: ("UNKNOWN_TABLE", 404),
    62: ("SYNTAX_ERROR", 400),
    73: ("UNKNOWN_FORMAT", 400),
    81: ("UNKNOWN_DATABASE", 404),
    115: ("UNKNOWN_SETTING", 400),
    159: ("TIMEOUT_EXCEEDED", 500),  # not 504: clients retry 504, and a retry would be charged again
    164: ("READONLY", 403),
    201: ("QUOTA_EXCEEDED", 403),  # not 429: clients retry 429, and an exhausted budget stays so
    202: ("TOO_MANY_SIMULTANEOUS_QUERIES", 503),
    210: ("NETWORK_ERROR", 500),
    291: ("DATABASE_ACCESS_DENIED", 403),  # an analyst locked by the tripwire (DESIGN.md rule 5)
    307: ("TOO_MANY_BYTES", 413),
    497: ("ACCESS_DENIED", 403),
    516: ("AUTHENTICATION_FAILED", 401),
    1001: ("STD_EXCEPTION", 500),  # a release failed after its charge: one fixed message, nothing more
    1002: ("UNKNOWN_EXCEPTION", 500),
}


class GatewayError(Exception):
    """An error answered to the client in ClickHouse's shape."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def name(self) -> str:
        return CODES.get(self.code, ("UNKNOWN_EXCEPTION", 500))[0]

    @property
    def status(self) -> int:
        return CODES.get(self.code, ("UNKNOWN_EXCEPTION", 500))[1]

    def body(self, version: str) -> bytes:
        text = self.message.rstrip(".")
        return f"Code: {self.code}. DB::Exception: {text}. ({self.name}) (version {version})\n".encode()


def from_dpch(exc: DpchError) -> GatewayError:
    """Maps a dpch error (whose message is already free of data) to a ClickHouse code."""
    text = f"dpch: {exc}"
    if isinstance(exc, ParseError):
        return GatewayError(62, text)
    if isinstance(exc, AnalystLocked):  # before BudgetExceeded, its base class
        return GatewayError(291, text)
    if isinstance(exc, BudgetExceeded):
        return GatewayError(201, text)
    if isinstance(exc, PolicyError):
        return GatewayError(60 if "does not exist" in exc.message else 497, text)
    if isinstance(exc, QueryRejected):
        return GatewayError(497, text)
    if isinstance(exc, ConfigError):
        return GatewayError(36, text)
    if isinstance(exc, StoreLocked):
        return GatewayError(202, text)
    if isinstance(exc, QueryFailedAfterCharge):  # the fixed sentence, whatever failed
        return GatewayError(1001, f"dpch: {QueryFailedAfterCharge.MESSAGE}")
    if isinstance(exc, ExecutionError):
        return GatewayError(1002, text)
    return GatewayError(1002, text)

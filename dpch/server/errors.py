"""ClickHouse-style errors of the gateway: a code, its name, an HTTP status, a message and a kind.

To ClickHouse clients the body is what ClickHouse writes (``Code: N. DB::Exception: message.
(NAME) (version V)``) and the ``X-ClickHouse-Exception-Code`` header carries the code, so they
raise their own error types with dpch's message in them. To dpch's own clients (``/dpch/v1/``)
the body is JSON with the error's kind (:meth:`GatewayError.as_json`), from which the remote
session rebuilds the same dpch error. A dpch error's code is its kind's row of
:data:`dpch.errors.KINDS`; an error of the protocol itself (authentication, limits, a bad
request) names its code and kind where it is raised.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dpch.errors import DpchError, ExecutionError, ParseError, QueryFailedAfterCharge, kind_of
from dpch.server.wire import error_to_wire

# code: (name, HTTP status) — codes and names as ClickHouse defines them
CODES = {
    36: ("BAD_ARGUMENTS", 400),
    40: ("CHECKSUM_DOESNT_MATCH", 400),  # a compressed request body (decompress=1) that was corrupted
    43: ("ILLEGAL_TYPE_OF_ARGUMENT", 400),
    46: ("UNKNOWN_FUNCTION", 400),
    47: ("UNKNOWN_IDENTIFIER", 400),
    48: ("NOT_IMPLEMENTED", 501),
    60: ("UNKNOWN_TABLE", 404),
    62: ("SYNTAX_ERROR", 400),
    73: ("UNKNOWN_FORMAT", 400),
    89: ("UNKNOWN_COMPRESSION_METHOD", 400),
    81: ("UNKNOWN_DATABASE", 404),
    115: ("UNKNOWN_SETTING", 400),
    158: ("TOO_MANY_ROWS", 400),
    271: ("CANNOT_DECOMPRESS", 400),
    159: ("TIMEOUT_EXCEEDED", 500),  # not 504: clients retry 504, and a retry would be charged again
    164: ("READONLY", 403),
    201: ("QUOTA_EXCEEDED", 403),  # not 429: clients retry 429, and an exhausted budget stays so
    202: ("TOO_MANY_SIMULTANEOUS_QUERIES", 503),
    210: ("NETWORK_ERROR", 500),
    291: ("DATABASE_ACCESS_DENIED", 403),  # an analyst locked by the tripwire (docs/design.md rule 5)
    307: ("TOO_MANY_BYTES", 413),
    394: ("QUERY_WAS_CANCELLED", 500),  # its client closed the connection: nobody reads the answer
    396: ("TOO_MANY_ROWS_OR_BYTES", 400),
    497: ("ACCESS_DENIED", 403),
    516: ("AUTHENTICATION_FAILED", 401),
    999: ("KEEPER_EXCEPTION", 503),  # the shared admission state is unreachable: nothing was charged
    1001: ("STD_EXCEPTION", 500),  # a release failed after its charge: one fixed message, nothing more
    1002: ("UNKNOWN_EXCEPTION", 500),
}


class GatewayError(Exception):
    """An error answered to the client: ``message`` in ClickHouse's shape, ``wire`` as dpch's JSON."""

    def __init__(self, code: int, kind: str, message: str, *, wire: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.kind = kind
        self.wire = wire if wire is not None else {"kind": kind, "message": message.removeprefix("dpch: "),
                                                   "hint": None}

    @property
    def name(self) -> str:
        return CODES.get(self.code, ("UNKNOWN_EXCEPTION", 500))[0]

    @property
    def status(self) -> int:
        return CODES.get(self.code, ("UNKNOWN_EXCEPTION", 500))[1]

    def body(self, version: str) -> bytes:
        text = self.message.rstrip(".")
        return f"Code: {self.code}. DB::Exception: {text}. ({self.name}) (version {version})\n".encode()

    def as_json(self) -> bytes:
        """The body for dpch's own clients: the error's kind, message, hint and fields, with its code."""
        return json.dumps({"error": {**self.wire, "code": self.code, "name": self.name}}, default=str).encode()


#: sqlglot's operator classes, as the SQL the analyst wrote
_OPERATORS = {"GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "EQ": "=", "NEQ": "!=", "Add": "+", "Sub": "-",
              "Mul": "*", "Div": "/", "Mod": "%", "And": "AND", "Or": "OR", "Not": "NOT", "Neg": "-"}
_SQLGLOT_CLASS = re.compile(r"<class 'sqlglot\.[A-Za-z0-9_.]*\.([A-Za-z0-9_]+)'>")
_SQLGLOT_TOKEN = re.compile(r"<Token token_type: TokenType\.([A-Z_]+), text: (.*?), line: \d+, col: \d+"
                            r", start: \d+, end: \d+, comments: \[.*?\]>")


def scrub(message: str) -> str:
    """The last line of defence for "no sqlglot internals in a message": a sqlglot class or token
    that reached an error text becomes the SQL it stands for (the sources should not emit them)."""
    message = _SQLGLOT_CLASS.sub(lambda m: _OPERATORS.get(m.group(1), m.group(1).upper()), message)
    return _SQLGLOT_TOKEN.sub(
        lambda m: "the end of the query" if m.group(1) == "SENTINEL" else repr(m.group(2)), message)


def from_dpch(exc: DpchError) -> GatewayError:
    """A dpch error (whose message is already free of data) as the gateway answers it: the code
    of its kind (:data:`dpch.errors.KINDS`); no sqlglot internals in what is sent."""
    row = kind_of(exc)
    if row.error is QueryFailedAfterCharge:  # the fixed sentence, whatever failed (docs/design.md rule 5)
        exc = QueryFailedAfterCharge()
    wire = error_to_wire(exc)
    wire["message"] = scrub(wire["message"])
    if wire.get("hint"):
        wire["hint"] = scrub(wire["hint"])
    return GatewayError(row.clickhouse_code, row.kind, scrub(f"dpch: {exc}"), wire=wire)


_CLICKHOUSE_CODE = re.compile(r"Code: (\d+)\.")

#: what a failed metadata query is told, per ClickHouse code: ClickHouse's own text is a dump
#: (it quotes the whole rewritten query with its synthetic rows), so it never reaches the client
_METADATA_FAILURES = {
    159: "the metadata query was stopped after the limit of {timeout:g} s; narrow it with WHERE",
    158: "the metadata query reads too many rows; narrow it with WHERE",
    396: "the metadata query returns too many rows; narrow it with WHERE or LIMIT",
    47: "the metadata query names a column the system table does not have; see DESCRIBE system.<table>",
    46: "the metadata query calls an unknown function",
    43: "the metadata query applies a function to a column of the wrong type",
}


def metadata_error(clickhouse_text: str, timeout: float) -> GatewayError:
    """A failed metadata query as the client sees it: ClickHouse's code and dpch's words."""
    match = _CLICKHOUSE_CODE.search(clickhouse_text)
    code = int(match.group(1)) if match else 1002
    message = _METADATA_FAILURES.get(code)
    if message is None:
        return GatewayError(36 if code not in CODES else code, ExecutionError.kind,
                            "dpch: ClickHouse cannot run this metadata query")
    return GatewayError(code, ExecutionError.kind, "dpch: " + message.format(timeout=timeout))


def syntax_error(sql: str) -> GatewayError:
    """The tokenizer's failure (no sqlglot text): an unexpanded client macro or an open quote."""
    if "$" in sql:
        macro = re.search(r"\$\{?[A-Za-z_][A-Za-z0-9_]*", sql)
        name = macro.group(0) if macro else "$"
        return GatewayError(62, ParseError.kind,
                            f"dpch: cannot parse the query: {name} is a client macro that was not expanded "
                            "(ClickHouse SQL has no $); let the client expand it, or write the value")
    return GatewayError(62, ParseError.kind, "dpch: cannot parse the query: it cannot be read as SQL tokens "
                                             "(is a quote, backquote or comment left open?)")

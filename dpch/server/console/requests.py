"""What a console endpoint receives, and checks of its JSON fields (errors name the field)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dpch.server.console.security import ConsoleSession
from dpch.server.gateway import Gateway


class ConsoleError(Exception):
    """An error the console answers with ``status`` and a short message (never a traceback)."""

    def __init__(self, status: int, message: str, *, hint: str | None = None, kind: str = "ConsoleError") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.hint = hint
        self.kind = kind


class Headers(Protocol):
    """Request headers (``http.server``'s message, or a dict in tests)."""

    def get(self, name: str, default: None = None) -> str | None: ...


@dataclass(frozen=True)
class Request:
    """One HTTP request to the console, as :mod:`dpch.server.http` read it."""

    method: str
    path: str
    params: dict[str, str]
    headers: Headers
    body: bytes
    #: whether the connection is TLS (the cookie is then ``Secure``)
    secure: bool = False


@dataclass
class Call:
    """One call of a JSON endpoint by a signed-in browser."""

    gateway: Gateway
    session: ConsoleSession
    #: the JSON body of a POST, or the URL parameters of a GET
    data: dict[str, Any]
    #: runs a callable under the server's concurrency and time limits (``Handler._run``)
    run: Callable[[Callable[[], Any]], Any]


def json_body(body: bytes) -> dict[str, Any]:
    """A POST's body as a JSON object."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise ConsoleError(400, "the request body must be a JSON object") from None
    if not isinstance(data, dict):
        raise ConsoleError(400, "the request body must be a JSON object")
    return data


def text(data: dict[str, Any], name: str, *, default: str | None = None, limit: int = 100_000) -> str:
    """A string field (required unless ``default`` is given)."""
    value = data.get(name, default)
    if value is None:
        raise ConsoleError(400, f"the field {name!r} is required")
    if not isinstance(value, str):
        raise ConsoleError(400, f"the field {name!r} must be a string")
    if len(value) > limit:
        raise ConsoleError(413, f"the field {name!r} is longer than {limit} characters")
    return value


def optional_text(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    return None if value in (None, "") else text(data, name)


def number(data: dict[str, Any], name: str, *, default: float | None = None) -> float | None:
    """A finite number field (a GET's parameters arrive as text and are parsed)."""
    value = data.get(name, default)
    if value is None or value == "":
        return default
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ConsoleError(400, f"the field {name!r} must be a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConsoleError(400, f"the field {name!r} must be a finite number")
    return float(value)


def options(data: dict[str, Any]) -> dict[str, Any]:
    """The ``options`` object of dp settings (names are checked by the session, which knows them)."""
    value = data.get("options") or {}
    if not isinstance(value, dict):
        raise ConsoleError(400, "the field 'options' must be an object of dp settings, e.g. {\"epsilon\": 0.5}")
    for name, item in value.items():
        if item is not None and not isinstance(item, str | int | float | bool):
            raise ConsoleError(400, f"the option {name!r} must be a string, number or boolean")
    return {k: v for k, v in value.items() if v is not None and v != ""}


def to_json(data: Any) -> bytes:
    """JSON a browser can parse: non-finite floats (never a released value) become null."""
    return json.dumps(_finite(data), default=str, allow_nan=False).encode()


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value

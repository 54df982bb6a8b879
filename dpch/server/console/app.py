"""The console's routes: pages, static files, sign-in, and the JSON endpoints of each role.

:meth:`Console.respond` answers every console path and never raises: an error is a short JSON
``{"error": {"message", "hint", "kind"}}`` (API) or a short text page, never a traceback. Every
response carries the security headers of :func:`.security.security_headers`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from dpch.errors import DpchError
from dpch.server.console import analyst, owner, saved
from dpch.server.console.requests import Call, ConsoleError, Request, json_body, text, to_json
from dpch.server.console.security import (
    CSRF_HEADER,
    REPORT_CONTENT_SECURITY_POLICY,
    SIGN_IN_HEADER,
    ConsoleSession,
    SessionStore,
    SignInThrottle,
    cookie_token,
    security_headers,
    set_cookie,
)
from dpch.server.errors import GatewayError, from_dpch
from dpch.server.gateway import Gateway

log = logging.getLogger("dpch.console")

Response = tuple[int, bytes, dict[str, str]]
Runner = Callable[[Callable[[], Any]], Any]

#: the paths the console answers (everything else stays with the ClickHouse interface)
PREFIX = "/console/"
PAGES = {"/play": ("play.html", False), "/admin": ("admin.html", True)}
SIGN_IN_PAGE = "/console/login"
_STATIC = re.compile(r"^/console/static/([a-z0-9][a-z0-9_-]{0,60}\.(js|css|svg))$")
_TYPES = {"js": "text/javascript; charset=UTF-8", "css": "text/css; charset=UTF-8", "svg": "image/svg+xml",
          "html": "text/html; charset=UTF-8", "png": "image/png"}
_NEXT = {"/play", "/admin"}


@dataclass(frozen=True)
class Endpoint:
    """One JSON endpoint: the function answering it and whether only owners may call it."""

    answer: Callable[[Call], dict[str, Any]]
    owner: bool = False


#: (method, path) → endpoint; POSTs also need the CSRF token
ENDPOINTS: dict[tuple[str, str], Endpoint] = {
    ("GET", "/console/api/schema"): Endpoint(analyst.schema),
    ("POST", "/console/api/explain"): Endpoint(analyst.explain),
    ("POST", "/console/api/query"): Endpoint(analyst.query),
    ("POST", "/console/api/refine"): Endpoint(analyst.refine),
    ("GET", "/console/api/history"): Endpoint(analyst.history),
    ("GET", "/console/api/budget"): Endpoint(analyst.budget),
    ("GET", "/console/api/saved"): Endpoint(saved.list_saved),
    ("POST", "/console/api/saved"): Endpoint(saved.save),
    ("POST", "/console/api/saved/delete"): Endpoint(saved.delete),
    ("GET", "/console/api/owner/overview"): Endpoint(owner.overview, owner=True),
    ("GET", "/console/api/owner/policies"): Endpoint(owner.policies, owner=True),
    ("GET", "/console/api/owner/audits"): Endpoint(owner.audits, owner=True),
    ("POST", "/console/api/owner/unlock"): Endpoint(owner.unlock, owner=True),
    ("POST", "/console/api/owner/budget"): Endpoint(owner.set_budget, owner=True),
}


def is_console_path(path: str) -> bool:
    """Whether the console answers ``path``."""
    return path in PAGES or path == "/console" or path.startswith(PREFIX)


def static_bytes(name: str) -> bytes:
    """A file shipped in ``dpch/server/console/static`` (package data)."""
    return resources.files("dpch.server.console").joinpath("static", name).read_bytes()


class Console:
    """The web console of one gateway: its sessions and its routes."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.sessions = SessionStore()
        self.throttle = SignInThrottle()

    def respond(self, request: Request, run: Runner, record: dict[str, Any] | None = None) -> Response:
        """The response to ``request`` (``run`` bounds the work as the HTTP interface does)."""
        api = request.path.startswith(PREFIX + "api/")
        try:
            return self._route(request, run, record if record is not None else {})
        except Exception as exc:  # short and without a traceback, whatever failed
            error = _console_error(exc)
            if api:
                body = to_json({"error": {"message": error.message, "hint": error.hint, "kind": error.kind}})
                return error.status, body, security_headers("application/json; charset=UTF-8")
            return error.status, f"dpch console: {error.message}\n".encode(), security_headers(
                "text/plain; charset=UTF-8")

    # -- routing ------------------------------------------------------------------------------------

    def _route(self, request: Request, run: Runner, record: dict[str, Any]) -> Response:
        path, method = request.path, request.method
        if path == "/console":
            return _redirect("/play")
        if path == SIGN_IN_PAGE:
            return 200, static_bytes("login.html"), security_headers(_TYPES["html"])
        static = _STATIC.match(path)
        if static:
            try:
                data = static_bytes(static.group(1))
            except (FileNotFoundError, IsADirectoryError):
                raise ConsoleError(404, "no such file") from None
            return 200, data, security_headers(_TYPES[static.group(2)]) | {"Cache-Control": "no-cache"}
        if path == "/console/api/login" and method == "POST":
            return self._sign_in(request, record)
        session = self.sessions.get(cookie_token(request.headers.get("Cookie")))
        if session is not None:
            record["user"], record["analyst"] = session.user.name, session.user.analyst
        if path in PAGES:
            page, for_owner = PAGES[path]
            if session is None:
                return _redirect(f"{SIGN_IN_PAGE}?next={path}")
            if for_owner and not session.user.owner:
                raise ConsoleError(403, "this page is for data owners only")
            return 200, static_bytes(page), security_headers(_TYPES["html"])
        if session is None:
            raise ConsoleError(401, "sign in first", hint=f"open {SIGN_IN_PAGE}", kind="AuthenticationFailed")
        if method == "POST" and not session.csrf_ok(request.headers.get(CSRF_HEADER)):
            raise ConsoleError(403, "the request's CSRF token is missing or wrong; reload the page")
        if path.startswith("/console/audit/") and method == "GET":
            return self._report(session, path.removeprefix("/console/audit/"))
        if path == "/console/api/session" and method == "GET":
            return _json(self._session_data(session))
        if path == "/console/api/logout" and method == "POST":
            self.sessions.drop(session.token)
            return 200, to_json({"signed_out": True}), security_headers("application/json; charset=UTF-8") | {
                "Set-Cookie": set_cookie("", secure=request.secure, clear=True)}
        endpoint = ENDPOINTS.get((method, path))
        if endpoint is None:
            known = any(p == path for _, p in ENDPOINTS)
            raise ConsoleError(405 if known else 404, "method not allowed" if known else "no such endpoint")
        if endpoint.owner and not session.user.owner:
            raise ConsoleError(403, "only data owners may do this")
        fields: dict[str, Any] = json_body(request.body) if method == "POST" else dict(request.params)
        record["kind"] = "console:" + path.removeprefix("/console/api/")
        if isinstance(fields.get("sql"), str):
            record["sql"] = fields["sql"][:300]  # as the HTTP interface logs a query
        answer = endpoint.answer(Call(self.gateway, session, fields, run))
        if isinstance(answer.get("cost"), dict) and "release_id" in answer:
            record["epsilon"], record["delta"] = answer["cost"].get("epsilon"), answer["cost"].get("delta")
        return _json(answer)

    def _sign_in(self, request: Request, record: dict[str, Any]) -> Response:
        if request.headers.get(SIGN_IN_HEADER) != "1":
            raise ConsoleError(403, "sign in from the console page")
        data = json_body(request.body)
        name = text(data, "user", limit=200)
        password = text(data, "password", default="", limit=1000)
        if not self.throttle.allowed(name):
            raise ConsoleError(429, "too many failed sign-ins for this user; wait a few minutes",
                               kind="AuthenticationFailed")
        try:
            user = self.gateway.authenticate(name, password)
        except GatewayError:
            self.throttle.failed(name)
            raise
        self.throttle.succeeded(name)
        session = self.sessions.create(user)
        record["user"], record["analyst"], record["kind"] = user.name, user.analyst, "console:login"
        headers = security_headers("application/json; charset=UTF-8") | {
            "Set-Cookie": set_cookie(session.token, secure=request.secure)}
        return 200, to_json(self._session_data(session)), headers

    def _session_data(self, session: ConsoleSession) -> dict[str, Any]:
        user = session.user
        return {"user": user.name, "analyst": user.analyst, "owner": user.owner, "csrf": session.csrf,
                "confirm_share": analyst.CONFIRM_SHARE, "database": self.gateway.config.database,
                "databases": list(self.gateway.config.databases), "server": self.gateway.config.display_name}

    def _report(self, session: ConsoleSession, name: str) -> Response:
        if not session.user.owner:
            raise ConsoleError(403, "only data owners may do this")
        path = owner.report_file(name)
        kind = path.suffix.lstrip(".")
        return 200, path.read_bytes(), security_headers(_TYPES[kind], policy=REPORT_CONTENT_SECURITY_POLICY)


def _json(data: dict[str, Any]) -> Response:
    return 200, to_json(data), security_headers("application/json; charset=UTF-8")


def _redirect(location: str) -> Response:
    return 303, b"", security_headers("text/plain; charset=UTF-8") | {"Location": location}


def _console_error(exc: Exception) -> ConsoleError:
    """Any exception as a short console error: the gateway's and dpch's messages are already free
    of data (and of sqlglot text); anything else is one fixed sentence naming its class."""
    if isinstance(exc, ConsoleError):
        return exc
    if isinstance(exc, DpchError):
        exc = from_dpch(exc)
    if isinstance(exc, GatewayError):
        return ConsoleError(exc.status, str(exc.wire.get("message") or exc.message), hint=exc.wire.get("hint"),
                            kind=exc.kind)
    log.warning("console: internal error (%s)", type(exc).__name__)
    return ConsoleError(500, f"internal error ({type(exc).__name__})", kind="DpchError")

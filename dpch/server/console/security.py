"""The console's sign-in sessions, cookie, CSRF check and security headers.

A console session is created by signing in with a gateway user's name and password (the same
check as the HTTP interface: :meth:`dpch.server.gateway.Gateway.authenticate`). Its random token
travels only in an ``HttpOnly; SameSite=Strict`` cookie (``Secure`` over TLS), so page scripts
never see it and other sites never send it. Each session has a second random token, the CSRF
token, which the page reads from ``/console/api/session`` and sends back in the
``X-Dpch-Csrf`` header of every POST; the server compares it with the session's in constant time
(a per-session synchronizer token). Sign-in itself has no session yet: it requires the
``X-Dpch-Console`` header, which a cross-site form cannot send and a cross-site script cannot send
without a CORS preflight that dpch never answers.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie

from dpch.server.config import User

#: the session cookie's name
COOKIE = "dpch_console"
#: the header carrying the CSRF token on every POST
CSRF_HEADER = "X-Dpch-Csrf"
#: the header sign-in requires (cross-site forms cannot set it)
SIGN_IN_HEADER = "X-Dpch-Console"
#: a session unused this long is signed out (seconds)
IDLE_SECONDS = 8 * 3600
#: the most sessions kept; the least recently used is dropped beyond it (memory stays bounded)
MAX_SESSIONS = 10_000
#: the SQL texts a session remembers by release id (for its history; the ledger keeps only hashes)
MAX_REMEMBERED = 200
#: failed sign-ins of one user name allowed per window; more are refused until the window passes
MAX_FAILURES = 10
#: the window of :data:`MAX_FAILURES` (seconds)
FAILURE_WINDOW = 300.0

#: only the console's own files: no inline script or style, no framing, no other origin
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
)
#: an audit report is a self-contained HTML file with inline SVG and inline styles, and no script
REPORT_CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'"
)


def security_headers(content_type: str, *, policy: str = CONTENT_SECURITY_POLICY) -> dict[str, str]:
    """The headers every console response carries."""
    return {
        "Content-Type": content_type,
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "Cross-Origin-Opener-Policy": "same-origin",
    }


@dataclass
class ConsoleSession:
    """One signed-in browser."""

    token: str
    csrf: str
    user: User
    seen: float
    #: release id → the SQL this session ran for it (the history shows it beside the ledger row)
    sql: OrderedDict[str, str] = field(default_factory=OrderedDict)

    def remember(self, release_id: str, sql: str) -> None:
        if not release_id:
            return
        self.sql[release_id] = sql
        while len(self.sql) > MAX_REMEMBERED:
            self.sql.popitem(last=False)

    def csrf_ok(self, sent: str | None) -> bool:
        """Whether ``sent`` is this session's CSRF token (constant time)."""
        return sent is not None and hmac.compare_digest(sent.encode(), self.csrf.encode())


class SessionStore:
    """The console's sessions, in memory (a restart signs everyone out)."""

    def __init__(self, clock: object = time.monotonic) -> None:
        self._sessions: OrderedDict[str, ConsoleSession] = OrderedDict()
        self._lock = threading.Lock()
        self._clock = clock

    def _now(self) -> float:
        return float(self._clock())  # type: ignore[operator]

    def create(self, user: User) -> ConsoleSession:
        """A new session for ``user`` with fresh tokens (never reusing one a browser brought)."""
        session = ConsoleSession(secrets.token_urlsafe(32), secrets.token_urlsafe(32), user, self._now())
        with self._lock:
            self._sessions[session.token] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def get(self, token: str | None) -> ConsoleSession | None:
        """The live session of ``token``, or None (unknown, or idle too long: then dropped)."""
        if not token:
            return None
        now = self._now()
        with self._lock:
            session = self._sessions.get(token)
            if session is None:
                return None
            if now - session.seen > IDLE_SECONDS:
                del self._sessions[token]
                return None
            session.seen = now
            self._sessions.move_to_end(token)
            return session

    def drop(self, token: str) -> None:
        with self._lock:
            self._sessions.pop(token, None)


class SignInThrottle:
    """Slows password guessing through the console: after :data:`MAX_FAILURES` failed sign-ins of a
    user name within :data:`FAILURE_WINDOW` seconds, that name's sign-ins are refused until the oldest
    failure leaves the window (the check runs before the password is looked at, so a refusal says
    nothing about it). The ClickHouse interface is not throttled here."""

    def __init__(self, clock: object = time.monotonic) -> None:
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def _recent(self, name: str, now: float) -> list[float]:
        times = [t for t in self._failures.get(name, []) if now - t < FAILURE_WINDOW]
        if times:
            self._failures[name] = times
        else:
            self._failures.pop(name, None)
        return times

    def allowed(self, name: str) -> bool:
        with self._lock:
            return len(self._recent(name, float(self._clock()))) < MAX_FAILURES  # type: ignore[operator]

    def failed(self, name: str) -> None:
        with self._lock:
            now = float(self._clock())  # type: ignore[operator]
            self._failures[name] = [*self._recent(name, now), now][-MAX_FAILURES:]
            if len(self._failures) > MAX_SESSIONS:  # bounded memory under a spray of names
                self._failures.pop(next(iter(self._failures)))

    def succeeded(self, name: str) -> None:
        with self._lock:
            self._failures.pop(name, None)


def cookie_token(cookie_header: str | None) -> str | None:
    """The session token in a ``Cookie`` header, or None."""
    if not cookie_header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(cookie_header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


def set_cookie(token: str, *, secure: bool, clear: bool = False) -> str:
    """The ``Set-Cookie`` value for ``token`` (or clearing the cookie)."""
    parts = [f"{COOKIE}={'' if clear else token}", "Path=/", "HttpOnly", "SameSite=Strict"]
    parts.append("Max-Age=0" if clear else f"Max-Age={IDLE_SECONDS}")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)

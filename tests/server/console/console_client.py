"""A browser-like HTTP client of the web console for tests: keeps the session cookie, sends the
CSRF token on POSTs (unless told otherwise), and returns (status, headers, parsed body)."""

from __future__ import annotations

import http.client
import json
from http.cookies import SimpleCookie
from typing import Any

#: users of the console tests: the gateway's test users plus a data owner
OWNER = {"owner": {"password": "owner-pw", "analyst": "dora", "epsilon": 3.0, "owner": True}}


class Browser:
    """One browser: a cookie jar and the CSRF token its page read from /console/api/session."""

    def __init__(self, srv) -> None:
        self.srv = srv
        self.cookie: str | None = None
        self.csrf: str | None = None

    def request(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
                csrf: bool = True) -> tuple[int, http.client.HTTPMessage, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=60)
        sent = dict(headers or {})
        if self.cookie:
            sent["Cookie"] = self.cookie
        data = None
        if method == "POST":
            data = json.dumps(body or {}).encode() if not isinstance(body, bytes) else body
            sent.setdefault("Content-Type", "application/json")
            if csrf and self.csrf:
                sent["X-Dpch-Csrf"] = self.csrf
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        raw = response.read()
        conn.close()
        for value in response.headers.get_all("Set-Cookie") or []:
            jar: SimpleCookie = SimpleCookie()
            jar.load(value)
            morsel = jar.get("dpch_console")
            if morsel is not None:
                self.cookie = f"dpch_console={morsel.value}" if morsel.value else None
        parsed: Any = raw
        if (response.headers.get("Content-Type") or "").startswith("application/json"):
            parsed = json.loads(raw)
        return response.status, response.headers, parsed

    def sign_in(self, user: str = "ana", password: str = "ana-pw") -> dict:
        status, _, data = self.request("POST", "/console/api/login", {"user": user, "password": password},
                                       headers={"X-Dpch-Console": "1"})
        assert status == 200, data
        self.csrf = data["csrf"]
        return data

    def get(self, path: str, **params: Any) -> tuple[int, Any]:
        from urllib.parse import urlencode

        status, _, data = self.request("GET", path + ("?" + urlencode(params) if params else ""))
        return status, data

    def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        status, _, data = self.request("POST", path, body, **kw)
        return status, data

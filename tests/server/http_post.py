"""One HTTP POST of SQL to a test gateway, as a ClickHouse client sends it (basic auth, settings in
the URL); the tests over real HTTP share it."""

from __future__ import annotations

import base64
import http.client
from urllib.parse import urlencode


def post(srv, sql: str, *, user: str = "ana", password: str = "ana-pw",
         params: dict | None = None) -> tuple[http.client.HTTPResponse, bytes]:
    """The gateway's response (read) and its body."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    conn.request("POST", "/?" + urlencode(params or {}), body=sql.encode(), headers={"Authorization": auth})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response, data

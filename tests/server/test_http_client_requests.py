"""What ClickHouse clients send with every request. Chunked request bodies (the official Node client,
@clickhouse/client, always sends them) on
keep-alive connections: the body is read to its end, so the next request on the same connection is
answered, and an error (a wrong password, a body over the limit, a malformed chunk) is reported as
ClickHouse would, never leaving the connection out of step. And the settings the JDBC driver adds
to every query."""

from __future__ import annotations

import base64
import http.client

from tests.helpers import raw_http

SQL = b"SELECT count(*) FROM visits SETTINGS dp_epsilon = 0.5"


def _auth(user: str = "ana", password: str = "ana-pw") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def _chunks(data: bytes, size: int = 7):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def test_chunked_bodies_on_one_keep_alive_connection(serve):
    srv = serve(cache_ttl=0)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    for _ in range(3):  # the same connection, request after request
        conn.request("POST", "/", body=_chunks(SQL), headers=_auth(), encode_chunked=True)
        response = conn.getresponse()
        body = response.read()
        assert response.status == 200, body
        assert len(body.decode().split()) == 1
        float(body.decode())  # one noisy number, parsed (raises if the answer were anything else)
    conn.close()


def test_a_wrong_password_with_a_chunked_body_is_reported_and_the_connection_stays_usable(serve):
    srv = serve(cache_ttl=0)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    conn.request("POST", "/", body=_chunks(SQL), headers=_auth(password="wrong"), encode_chunked=True)
    response = conn.getresponse()
    text = response.read().decode()
    assert response.status == 401 and "Code: 516" in text and "Authentication failed" in text
    conn.request("POST", "/", body=_chunks(SQL), headers=_auth(), encode_chunked=True)
    response = conn.getresponse()
    assert response.status == 200, response.read()
    conn.close()


def _head(body_lines: bytes, extra: str = "") -> bytes:
    auth = _auth()["Authorization"]
    return (f"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nTransfer-Encoding: chunked\r\n{extra}"
            "Connection: keep-alive\r\n\r\n").encode() + body_lines


def test_a_chunked_body_over_the_limit_is_refused_and_the_connection_closed(serve):
    srv = serve(cache_ttl=0, max_request_bytes=64)
    big = b"SELECT count(*) FROM visits WHERE " + b" OR ".join([b"age = 1"] * 40)
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in _chunks(big, 16)) + b"0\r\n\r\n"
    # a second request follows on the same connection: the server must close instead of reading the
    # rest of the oversized body as a new request
    out = raw_http(srv.port, _head(body) + _head(b"5\r\nSELEC\r\n0\r\n\r\n"))
    assert out.count(b"HTTP/1.1 ") == 1 and b"Code: 307" in out


def test_a_malformed_chunk_is_a_clear_error(serve):
    srv = serve(cache_ttl=0)
    out = raw_http(srv.port, _head(b"zz\r\nSELECT 1\r\n0\r\n\r\n"))
    assert out.startswith(b"HTTP/1.1 ") and b"Malformed chunked request body" in out
    assert out.count(b"HTTP/1.1 ") == 1  # closed afterwards: the rest is not read as a request


def test_trailer_fields_and_chunk_extensions_are_accepted(serve):
    srv = serve(cache_ttl=0)
    body = b"%x;ext=1\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n" % (len(SQL), SQL)
    out = raw_http(srv.port, _head(body, "Connection: close\r\n").replace(b"Connection: keep-alive\r\n", b""))
    assert out.startswith(b"HTTP/1.1 200"), out[:300]


def test_the_settings_the_jdbc_driver_sends_with_every_query_are_accepted(serve):
    """clickhouse-java jdbc-v2/src/main/java/com/clickhouse/jdbc/ConnectionImpl.java (commit 2c868508):
    ``defaultQuerySettings = new QuerySettings().serverSetting(ASYNC_INSERT, "0")
    .serverSetting(WAIT_END_OF_QUERY, "0")`` — sent as URL settings on every request (they were
    refused with UNKNOWN_SETTING, code 115, so DBeaver and Metabase failed on their first query)."""
    srv = serve(cache_ttl=0)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    conn.request("POST", "/?async_insert=0&wait_end_of_query=0&wait_for_async_insert=1", body=SQL, headers=_auth())
    response = conn.getresponse()
    assert response.status == 200, response.read()
    response.read()
    conn.request("POST", "/?max_insert_threads=4", body=SQL, headers=_auth())  # negative control: not harmless
    response = conn.getresponse()
    assert response.status != 200 and b"Code: 115" in response.read()
    conn.close()


def _ask(conn: http.client.HTTPConnection, sql: str) -> tuple[int, str]:
    conn.request("POST", "/", body=sql.encode(), headers=_auth())
    response = conn.getresponse()
    return response.status, response.read().decode()


def test_show_and_describe_with_double_quoted_names(serve, small_visits):
    """Grafana's ClickHouse plugin sends ``SHOW TABLES FROM "default"`` and ``DESC TABLE
    "default"."visits"``, clickhouse-sqlalchemy ``DESCRIBE TABLE "visits"`` (issue 15); ClickHouse
    accepts double quotes as well as backticks, so dpch answers each form alike."""
    srv = serve(cache_ttl=0)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    db = small_visits
    tables = {_ask(conn, f"SHOW TABLES FROM {q}{db}{q}")[1] for q in ("", "`", '"')}
    assert len(tables) == 1 and "visits" in tables.pop().split()
    described = {_ask(conn, sql)[1] for sql in (f"DESC TABLE {db}.visits", f'DESC TABLE "{db}"."visits"',
                                                'DESCRIBE TABLE "visits"', "DESCRIBE `visits`")}
    assert len(described) == 1 and "spend" in described.pop()
    assert _ask(conn, f'EXISTS TABLE "{db}"."visits"')[1].strip() == "1"
    status, text = _ask(conn, 'DESC TABLE "visits')  # an unclosed quote is not a name: refused as before
    assert status != 200
    conn.close()

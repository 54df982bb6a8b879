"""Malformed requests are answered at once, as ClickHouse answers a bad request (a 400 with
``Code: 36. DB::Exception: …``), never by waiting and never with a 500 (issue 24, item 4):

- ``Content-Length: -1`` made the gateway read until the client closed (the keep-alive timeout,
  10 s), then answer 500. The gateway here keeps connections open for 600 s, so a gateway that
  waited for the body would not answer within the client's 60 s deadline at all.
- A ``dp_*`` setting given twice in the URL, in any case, kept one of them silently."""

from __future__ import annotations

import base64

import pytest

from tests.helpers import raw_http
from tests.server.http_post import post

SQL = b"SELECT count(*) FROM visits"


def _auth() -> str:
    return "Basic " + base64.b64encode(b"ana:ana-pw").decode()


@pytest.mark.parametrize("length", ["-1", "+5", "1_0", "0x10", "abc"])
def test_a_content_length_that_is_not_digits_is_a_bad_request_at_once(serve, length):
    srv = serve(cache_ttl=0, keep_alive_timeout=600)
    request = (f"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: {_auth()}\r\nContent-Length: {length}\r\n"
               "Connection: keep-alive\r\n\r\n").encode() + SQL
    out = raw_http(srv.port, request)
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), out[:300]
    assert b"X-ClickHouse-Exception-Code: 36" in head
    assert body.startswith(b"Code: 36. DB::Exception: Content-Length must be a whole number of bytes")
    assert out.count(b"HTTP/1.1 ") == 1  # closed afterwards: the bytes after the head are not a request


def test_two_different_content_lengths_are_a_bad_request(serve):
    srv = serve(cache_ttl=0, keep_alive_timeout=600)
    request = (f"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: {_auth()}\r\nContent-Length: {len(SQL)}\r\n"
               f"Content-Length: {len(SQL) + 3}\r\n\r\n").encode() + SQL
    out = raw_http(srv.port, request)
    assert out.startswith(b"HTTP/1.1 400") and b"given twice with different values" in out


def test_a_valid_content_length_still_works(serve):
    srv = serve(cache_ttl=0)
    request = (f"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: {_auth()}\r\nContent-Length: {len(SQL)}\r\n"
               "Connection: close\r\n\r\n").encode() + SQL
    out = raw_http(srv.port, request)
    assert out.startswith(b"HTTP/1.1 200"), out[:300]


@pytest.mark.parametrize("query", ["dp_epsilon=0.5&DP_EPSILON=0.1", "dp_epsilon=0.5&dp_epsilon=0.1"])
def test_a_setting_given_twice_in_the_url_is_refused_and_nothing_is_charged(serve, query):
    srv = serve(cache_ttl=0)
    before = srv.gateway.session(srv.config.users["ana"], None).budget().spent.epsilon
    response, body = _post_query_string(srv, query)
    assert response.startswith(b"HTTP/1.1 400"), response[:300]
    assert b"setting dp_epsilon is given twice in the URL" in body
    assert srv.gateway.session(srv.config.users["ana"], None).budget().spent.epsilon == before


def test_one_upper_case_setting_in_the_url_is_the_setting(serve):
    srv = serve(cache_ttl=0)
    response, _ = post(srv, SQL.decode(), params={"DP_EPSILON": "0.25"})
    assert response.status == 200
    assert '"epsilon":0.25' in response.headers["X-Dpch-Cost"]


def _post_query_string(srv, query: str) -> tuple[bytes, bytes]:
    request = (f"POST /?{query} HTTP/1.1\r\nHost: x\r\nAuthorization: {_auth()}\r\n"
               f"Content-Length: {len(SQL)}\r\nConnection: close\r\n\r\n").encode() + SQL
    out = raw_http(srv.port, request)
    head, _, body = out.partition(b"\r\n\r\n")
    return head, body

"""Work on a request stops when its answer is sent (issue 24, "Limits on the planner itself").

When the gateway's time limit answers a request first (``TIMEOUT_EXCEEDED``), its query used to run on
in the worker to its charge. Now it is cancelled: a query not yet charged stops at its next check
and writes no ledger row, and the answer says that nothing was spent. The same when the client
closes its connection while it waits and asked for that (``cancel_http_readonly_queries_on_client_close
= 1``, which clickhouse-connect sends).

Planning is held, deterministically, until the client has its timeout answer: a fault injection
(the database stays real) wraps dpch's analysis so that it waits for an event the test sets after
reading the answer. No sleep decides the order: the worker cannot finish before the time limit."""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading

import dpch.pipeline.plan as plan_stage
from tests.server.http_post import post


def test_a_query_answered_by_the_time_limit_stops_before_its_charge(serve, keeper, small_visits, monkeypatch):
    answered = threading.Event()
    planning = threading.Event()
    real = plan_stage.analyze

    def held(*args, **kwargs):
        planning.set()
        answered.wait(60)  # released once the client has its answer (60 s: a deadline, never reached)
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_stage, "analyze", held)
    srv = serve(cache_ttl=0, query_timeout=0.5)
    response, body = post(srv, "SELECT count(*) FROM visits SETTINGS dp_epsilon = 0.5")
    answered.set()
    assert planning.is_set()
    assert response.status == 500 and response.headers["X-ClickHouse-Exception-Code"] == "159"
    assert b"it was stopped before its charge: nothing was spent" in body
    srv.stop()  # waits for the worker to finish: it ran on from planning and stopped at the charge's check
    ledger = keeper.query_rows(f"SELECT count() FROM `{small_visits}`.dpch_ledger")[0][0]
    assert ledger == 0, "the answered query charged the analyst"


class _Answered(logging.Handler):
    """Sets ``done`` when the access log records an answer with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(logging.INFO)
        self.code, self.done = code, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if json.loads(record.getMessage()).get("error") == self.code:
            self.done.set()


def test_a_query_whose_client_left_stops_before_its_charge(serve, keeper, small_visits, monkeypatch):
    client_left = threading.Event()
    planning = threading.Event()
    real = plan_stage.analyze

    def held(*args, **kwargs):
        planning.set()
        client_left.wait(60)  # released once the gateway has seen the client go (60 s: a deadline)
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_stage, "analyze", held)
    access = logging.getLogger("dpch.access")
    seen = _Answered(394)
    access.addHandler(seen)
    level = access.level
    access.setLevel(logging.INFO)
    try:
        srv = serve(cache_ttl=0)
        sql = b"SELECT count(*) FROM visits SETTINGS dp_epsilon = 0.5"
        auth = "Basic " + base64.b64encode(b"ana:ana-pw").decode()
        with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as sock:
            sock.sendall((f"POST /?cancel_http_readonly_queries_on_client_close=1 HTTP/1.1\r\nHost: x\r\n"
                          f"Authorization: {auth}\r\nContent-Length: {len(sql)}\r\n\r\n").encode() + sql)
            assert planning.wait(60), "the query never started planning"
        assert seen.done.wait(60), "the gateway did not notice that its client had gone"
    finally:
        client_left.set()
        access.removeHandler(seen)
        access.setLevel(level)
    srv.stop()  # waits for the worker: it ran on from planning and stopped at the charge's check
    ledger = keeper.query_rows(f"SELECT count() FROM `{small_visits}`.dpch_ledger")[0][0]
    assert ledger == 0, "the query of a client that had gone charged the analyst"

"""The tripwire through `dpch serve` (docs/design.md rule 5): over dpch:// the analyst gets the same
error classes as in process; over raw HTTP a failure after the charge is one fixed 500 body, and a
locked analyst a 403, with nothing from ClickHouse's own text."""

from __future__ import annotations

import base64
import http.client
from urllib.parse import urlencode

import pytest

import dpch
from dpch.errors import AnalystLocked, QueryFailedAfterCharge
from tests.helpers import inject_totality_gap

ORACLE = "SELECT count(*) FROM visits WHERE age > {}"


def _post(srv, user: str, password: str, sql: str) -> tuple[int, str]:
    auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    conn.request("POST", "/?" + urlencode({"dp_epsilon": "0.01"}), body=sql.encode(),
                 headers={"Authorization": auth})
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    return response.status, body


def test_remote_session_gets_the_same_error_classes(serve, database, monkeypatch):
    srv = serve(cache_ttl=0)
    inject_totality_gap(monkeypatch)
    with dpch.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="ana", password="ana-pw") as session:
        with pytest.raises(QueryFailedAfterCharge) as failed:
            session.query(ORACLE.format(30), epsilon=0.01)
        assert str(failed.value) == QueryFailedAfterCharge.MESSAGE
        monkeypatch.undo()
        with pytest.raises(AnalystLocked, match="analyst ana is locked"):
            session.query(ORACLE.format(30), epsilon=0.01)
        status = session.accountant.status(recent=5)
        assert status.locked is not None and status.locked.reason == ""  # the reason stays with the owner
        assert status.spent.epsilon == pytest.approx(0.01) and status.recent[-1].status == "failed"


def test_raw_http_shows_one_fixed_failure_then_a_lock(serve, monkeypatch):
    srv = serve(cache_ttl=0)
    inject_totality_gap(monkeypatch)
    # no row matches: nothing throws, an ordinary release
    assert _post(srv, "bob", "bob-pw", ORACLE.format(200))[0] == 200
    status, body = _post(srv, "bob", "bob-pw", ORACLE.format(30))
    assert status == 500 and QueryFailedAfterCharge.MESSAGE in body and "STD_EXCEPTION" in body
    assert "THROW" not in body.upper().replace("STD_EXCEPTION", "")  # nothing of ClickHouse's error
    monkeypatch.undo()
    status, body = _post(srv, "bob", "bob-pw", ORACLE.format(200))
    assert status == 403 and "analyst bob is locked" in body
    assert _post(srv, "ana", "ana-pw", ORACLE.format(200))[0] == 200  # another analyst is not locked

"""Every error kind crosses the wire as itself (dpch.errors.KINDS): a dpch error raised in the
gateway's session comes back from a real ``dpch serve`` (in process, over HTTP) as the same dpch
class with the same message and hint to a ``dpch://`` session, as the kind's PEP 249 class to the
DB-API, and with the kind's ClickHouse code to a ClickHouse client. Nothing is sorted by message
text: the negative control shows a PolicyError whose message reads like a refusal stays a
PolicyError."""

from __future__ import annotations

import base64
import http.client
import json

import pytest

import dpch
from dpch import dbapi
from dpch.errors import (
    KINDS,
    AccuracyNotReached,
    AnalystLocked,
    AuthenticationFailed,
    BudgetExceeded,
    CostCheckFailed,
    DpchError,
    LedgerWriteFailed,
    PolicyError,
    QueryFailedAfterCharge,
    QueryRejected,
)
from dpch.privacy.cost import PrivacyCost
from dpch.server.wire import WireAccuracy
from dpch.session import Session

SQL = "SELECT count(*) FROM visits"
MESSAGE, HINT = "table visits cannot be answered this way", "write it another way"


def _instance(kind: str) -> DpchError:
    """An error of ``kind`` as its raiser builds it (the classes with their own constructors too)."""
    cls = KINDS[kind].error
    if cls is AccuracyNotReached:
        report = WireAccuracy({"target": "± 5 at 95%", "met": False, "steps": 3}, "target ± 5 not met after 3 steps")
        return AccuracyNotReached("r-42", PrivacyCost(0.75, 1e-7, 0.01), report)
    if cls in (QueryFailedAfterCharge, LedgerWriteFailed):  # one fixed sentence each
        return cls()
    if cls is AnalystLocked:
        return AnalystLocked.of("ana")
    if cls is CostCheckFailed:
        return CostCheckFailed("mechanisms compose to ε 0.6, plan says 0.5")
    return cls(MESSAGE, hint=HINT)


@pytest.fixture
def raising(monkeypatch):
    """``raising(error)``: every session of this process (the gateway's) raises ``error`` when it
    plans a query — before anything reads data or is charged, as the real errors of planning do."""

    def arm(error: DpchError) -> None:
        def plan(self, sql, **options):
            raise error

        monkeypatch.setattr(Session, "plan", plan)

    return arm


def _remote(srv, database):
    return dpch.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="ana", password="ana-pw")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_round_trips_to_a_remote_session(serve, database, raising, kind):
    srv = serve(cache_ttl=0)
    original = _instance(kind)
    with _remote(srv, database) as session:
        raising(original)
        for call in (lambda: session.query(SQL), lambda: session.explain(SQL)):
            with pytest.raises(DpchError) as caught:
                call()
            back = caught.value
            assert type(back) is type(original), (kind, type(back))
            assert (back.message, back.hint, str(back)) == (original.message, original.hint, str(original))
    if isinstance(original, AccuracyNotReached):  # the fields it carries besides its message
        assert isinstance(back, AccuracyNotReached)
        assert back.release_id == "r-42" and back.charged == PrivacyCost(0.75, 1e-7, 0.01)
        assert back.report.steps == 3 and back.report.describe() == "target ± 5 not met after 3 steps"
    if isinstance(original, CostCheckFailed):
        assert isinstance(back, CostCheckFailed) and back.detail == ""  # the internal detail stays on the gateway


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_is_its_pep249_class_and_clickhouse_code(serve, database, raising, kind):
    srv = serve(cache_ttl=0)
    row = KINDS[kind]
    raising(_instance(kind))
    with dbapi.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="ana", password="ana-pw") as conn:
        with pytest.raises(dbapi.Error) as caught:
            conn.cursor().execute(SQL)
    assert type(caught.value).__name__ == row.pep249
    assert type(caught.value.dpch_error) is row.error
    # a ClickHouse client: ClickHouse's body and code, and the kind in a header
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    conn.request("POST", "/", body=SQL.encode(),
                 headers={"Authorization": "Basic " + base64.b64encode(b"ana:ana-pw").decode()})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    assert response.getheader("X-ClickHouse-Exception-Code") == str(row.clickhouse_code), body
    assert response.getheader("X-Dpch-Error-Kind") == kind
    assert body.startswith(f"Code: {row.clickhouse_code}. DB::Exception: dpch: ".encode()), body


def test_the_json_error_names_its_kind_and_code(serve, database, raising):
    srv = serve()
    raising(PolicyError(MESSAGE, hint=HINT))
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    conn.request("POST", "/dpch/v1/explain", body=json.dumps({"sql": SQL, "database": database}).encode(),
                 headers={"Authorization": "Basic " + base64.b64encode(b"ana:ana-pw").decode()})
    response = conn.getresponse()
    error = json.loads(response.read())["error"]
    conn.close()
    assert response.status == 404 and response.getheader("Content-Type").startswith("application/json")
    assert error == {"kind": "policy", "message": MESSAGE, "hint": HINT, "code": 60, "name": "UNKNOWN_TABLE"}


# -- real errors, not injected ---------------------------------------------------------------------


def test_real_errors_come_back_as_their_own_class(serve, database):
    srv = serve(cache_ttl=0)
    with _remote(srv, database) as session:
        # a table without a policy: a PolicyError on the gateway, a PolicyError here (was QueryRejected)
        with pytest.raises(PolicyError, match="does not exist") as missing:
            session.query("SELECT count(*) FROM nosuchtable")
        assert type(missing.value) is PolicyError
        with pytest.raises(PolicyError):
            session.explain("SELECT count(*) FROM nosuchtable")
        with pytest.raises(QueryRejected, match="not aggregated") as rejected:
            session.query("SELECT spend FROM visits")
        assert type(rejected.value) is QueryRejected
        with pytest.raises(BudgetExceeded, match="budget exhausted"):
            session.query(SQL, epsilon=10)
        assert session.budget().spent.epsilon == 0.0  # none of them was charged
    with pytest.raises(AuthenticationFailed, match="refused the credentials"):
        dpch.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="ana", password="wrong")


def test_negative_control_a_policy_error_worded_like_a_refusal_stays_a_policy_error(serve, database, raising):
    """The old client sorted errors by code and message text; this PolicyError's words would have
    sent it to QueryRejected. Its kind decides."""
    srv = serve(cache_ttl=0)
    raising(PolicyError("the query is not supported: table t has an invalid annotation"))
    with _remote(srv, database) as session, pytest.raises(DpchError) as caught:
        session.query(SQL)
    assert type(caught.value) is PolicyError


def test_structured_explain_carries_the_cost_and_the_budget_check(serve, database, connect):
    srv = serve(cache_ttl=0)
    with _remote(srv, database) as session:
        remote = session.explain(SQL, epsilon=0.3)
        assert remote.cost.epsilon == pytest.approx(0.3) and remote.admissible
        assert [m.sensitivity for m in remote.measures] == [10.0]  # count(*), ≤ 10 rows per unit
        refused = session.explain(SQL, epsilon=10)
        assert not refused.admissible and "budget" in refused.reason
        assert session.budget().spent.epsilon == 0.0
    local = connect(analyst="ana").explain(SQL, epsilon=0.3)  # the same explanation in process
    assert remote.as_dict() == local.as_dict()  # cost, budget check, measures, notes and text
    assert remote.cost == local.cost and remote.sql == local.sql

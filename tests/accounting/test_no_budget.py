"""An analyst the data owner set no budget for is refused with a hint — no silent default budget —
through the accountant, the Python API (``connect``/Session), the CLI and the gateway. The refusal
reads the budget table only: it comes before any charge, any data read and any noise. Opting in
with an explicit ``default_budget`` (``dpch demo``, the audit, tests) still works, and gateway users
whose budget is in the server config keep working."""

from __future__ import annotations

import base64
import http.client

import pytest
from click.testing import CliRunner

import dpch
from dpch import Budget, BudgetExceeded
from dpch.accounting.accountant import Accountant
from dpch.accounting.budget import NoBudgetSet
from dpch.cli.main import cli
from dpch.fixtures import visits
from dpch.privacy.cost import PrivacyCost
from dpch.server import ServerConfig, make_server
from dpch.store.engine import Engine
from tests.helpers import ledger_rows, make_table

COLUMNS = "uid UInt64, x Float64 COMMENT 'dp: bounds=[0, 1]'"
HINT = "dpch budget set --analyst bob --epsilon"


@pytest.fixture
def engine(store_dsn, database, keeper):
    e = Engine(store_dsn, database=database)
    yield e
    e.close()


def test_the_accountant_refuses_an_analyst_without_a_budget_before_anything_is_written(engine):
    acc = Accountant(engine, "bob")
    for attempt in (lambda: acc.check(PrivacyCost(0.1)),
                    lambda: acc.charge(PrivacyCost(0.1), query_hash="h", mechanism="laplace"),
                    lambda: acc.reserve(PrivacyCost(0.0, 0.0, ex_post=True, worst_epsilon=0.2), query_hash="h",
                                        mechanism="brownian"),
                    acc.status):
        with pytest.raises(NoBudgetSet) as refused:
            attempt()
        assert isinstance(refused.value, BudgetExceeded) and refused.value.kind == "budget"
        assert str(refused.value) == ("analyst 'bob' has no budget (hint: the data owner sets one with "
                                      "`dpch budget set --analyst bob --epsilon …`)")
    assert engine.query_rows(f"SELECT count() FROM {engine.table('dpch_ledger')}")[0][0] == 0
    # a dataset budget alone is not the analyst's budget
    acc.set_budget(Budget(1.0, 1e-6), dataset="db.t")
    with pytest.raises(NoBudgetSet):
        acc.check(PrivacyCost(0.1), datasets=("db.t",))
    acc.set_budget(Budget(1.0, 1e-6))  # the data owner sets one: admitted
    acc.charge(PrivacyCost(0.1), query_hash="h", mechanism="laplace")
    assert acc.status().spent.epsilon == pytest.approx(0.1)


def test_an_explicit_default_budget_is_the_opt_in(engine):
    acc = Accountant(engine, "demo", default_budget=Budget(0.5, 1e-6))
    acc.charge(PrivacyCost(0.5), query_hash="h", mechanism="laplace")
    with pytest.raises(BudgetExceeded, match="ε 0 of 0.5"):
        acc.check(PrivacyCost(0.1))


def test_connect_refuses_before_reading_data_or_drawing_noise(connect, monkeypatch):
    owner = connect(analyst="owner")
    make_table(owner, COLUMNS, [(i, i / 10) for i in range(10)], ["uid", "x"])
    bob = connect(analyst="bob", default_budget=None)  # the API's default: no default budget

    def no_data(*args, **kwargs):
        raise AssertionError("the private table was read before the refusal")

    monkeypatch.setattr(Engine, "run_private", no_data)
    monkeypatch.setattr(bob.context.noise, "drawing", no_data)
    with pytest.raises(NoBudgetSet, match="analyst 'bob' has no budget") as refused:
        bob.query("SELECT count(*) FROM t", epsilon=0.1)
    assert HINT in str(refused.value)
    assert ledger_rows(bob) == 0
    explanation = bob.explain("SELECT count(*) FROM t", epsilon=0.1)  # spends nothing: says why not
    assert not explanation.admissible and "has no budget" in explanation.reason
    monkeypatch.undo()
    bob.accountant.set_budget(Budget(1.0, 1e-6))
    assert bob.query("SELECT count(*) FROM t", epsilon=0.1).rows and ledger_rows(bob) == 1


def test_the_cli_refuses_an_analyst_without_a_budget_with_the_hint(connect, store_dsn, database):
    owner = connect(analyst="owner")
    make_table(owner, COLUMNS, [(i, i / 10) for i in range(10)], ["uid", "x"])
    base = ["--dsn", store_dsn, "--database", database, "--analyst", "bob"]
    refused = CliRunner().invoke(cli, [*base, "query", "SELECT count(*) FROM t"])
    assert refused.exit_code == 1 and "analyst 'bob' has no budget" in refused.output
    assert HINT in refused.output and "Traceback" not in refused.output
    assert ledger_rows(owner) == 0
    assert CliRunner().invoke(cli, [*base, "budget"]).exit_code == 1  # the status says the same
    ok = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, "budget", "set", "--analyst", "bob",
                                  "--epsilon", "1"])
    assert ok.exit_code == 0, ok.output
    released = CliRunner().invoke(cli, [*base, "query", "SELECT count(*) FROM t"])
    assert released.exit_code == 0, released.output


def _post(port: int, user: str, password: str, sql: str) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        auth = {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
        conn.request("POST", "/", body=sql.encode(), headers=auth)
        response = conn.getresponse()
        return response.status, response.getheader("X-ClickHouse-Exception-Code") or "", response.read().decode()
    finally:
        conn.close()


def test_the_gateway_refuses_users_without_a_budget_and_serves_configured_ones(store_dsn, database, keeper):
    engine = Engine(store_dsn, database=database)
    visits.load(engine, "visits", people=300)
    engine.close()
    config = ServerConfig.from_mapping({
        "server": {"dsn": store_dsn, "database": database, "access_log": "", "cache_ttl": 0},
        "users": {"ana": {"password": "ana-pw", "epsilon": 2.0}, "bob": {"password": "bob-pw"}},
    })
    srv = make_server(config, host="127.0.0.1", port=0)
    srv.start()
    try:
        status, code, body = _post(srv.port, "ana", "ana-pw", "SELECT count(*) FROM visits")
        assert status == 200 and not code, body  # a budget from the server config
        status, code, body = _post(srv.port, "bob", "bob-pw", "SELECT count(*) FROM visits")
        assert code == "201" and "analyst 'bob' has no budget" in body and HINT in body, body
        with dpch.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="bob", password="bob-pw") as remote:
            with pytest.raises(BudgetExceeded, match="has no budget"):
                remote.query("SELECT count(*) FROM visits")
        owner = Engine(store_dsn, database=database)
        try:
            Accountant(owner, "bob").set_budget(Budget(1.0, 1e-6))  # `dpch budget set`, in the same process
        finally:
            owner.close()
        status, code, body = _post(srv.port, "bob", "bob-pw", "SELECT count(*) FROM visits")
        assert status == 200 and not code, body
    finally:
        srv.stop()

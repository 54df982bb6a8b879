"""Several `dpch serve` gateways on one ClickHouse server share one budget (issue 26; docs/serving.md
"One gateway, many gateways"). Each gateway is its own process on the test HTTP endpoint (one chdb
store with ClickHouse's test Keeper); the data owner's CLI is another process.

- a tripwire on gateway A locks the analyst on gateway B at its next query; the owner's unlock from
  the CLI reaches B too;
- the owner's budget cut from the CLI is honoured by both running gateways;
- two gateways asking one watch at once write one history (no row written twice, the noisy threshold
  never redrawn: dpch.accounting.watches.watch_violations);
- Keeper unreachable: a cached answer is still served, a new query fails closed (nothing charged);
- without Keeper, a second gateway is refused at start-up, loudly.

Negative controls: a process that keeps its own state (what every process on a server did before)
admits after the trip and after the cut; two processes whose watch writes are not fenced write one
row twice.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import dpch
from dpch.accounting.budget import Budget
from dpch.accounting.ledger import Ledger
from dpch.accounting.watches import WatchStore, watch_violations
from dpch.fixtures import visits
from dpch.store.engine import Engine
from tests.helpers import ROOT, child_env
from tests.multiproc import Child

GATEWAY = textwrap.dedent("""
    import json, sys
    spec = json.loads(sys.argv[1])
    if spec.get("fail_after_charge"):  # this gateway's emitted SQL fails inside ClickHouse (the tripwire's case)
        from dpch.store.engine import Engine
        real = Engine.run_private
        Engine.run_private = lambda self, sql, parameters=None: real(
            self, f"SELECT * FROM ({sql}) AS r WHERE throwIf(1) = 0", parameters)
    from dpch.server import ServerConfig, make_server
    server = make_server(ServerConfig.from_mapping(spec["config"]), host="127.0.0.1", port=0)
    server.start()
    print("READY", server.port, flush=True)
    sys.stdin.readline()
    server.stop()
""")

OWN_STATE = textwrap.dedent("""
    import json, sys
    from dpch.accounting.accountant import Accountant
    from dpch.accounting.admission import InProcessAdmission
    from dpch.errors import BudgetExceeded
    from dpch.privacy.cost import PrivacyCost
    from dpch.store.engine import Engine

    acc = Accountant(Engine(sys.argv[1]), "ana", admission=InProcessAdmission())
    acc.status()  # its state is loaded now, before the owner's change or the trip
    print("READY", flush=True)
    assert sys.stdin.readline().strip() == "GO"
    try:
        acc.charge(PrivacyCost(0.5), query_hash="late", mechanism="laplace")
        print("RESULT" + json.dumps({"admitted": True}), flush=True)
    except BudgetExceeded as exc:
        print("RESULT" + json.dumps({"admitted": False, "error": str(exc)}), flush=True)
""")

USERS = {"ana": {"password": "pw", "epsilon": 3.0}}


@pytest.fixture
def shop(ch_server, server_db):
    """The test's database on the endpoint, with the demo visits table."""
    with Engine(ch_server.dsn(server_db)) as engine:
        visits.load(engine, "visits", people=300)
    return ch_server.dsn(server_db)


def config(dsn: str, database: str, **server: object) -> dict:
    return {"server": {"dsn": dsn, "database": database, "access_log": "", "cache_ttl": 0, **server},
            "users": USERS}


class Gateways:
    """Gateway processes started by a test (stopped at teardown)."""

    def __init__(self) -> None:
        self.children: list[Child] = []

    def start(self, cfg: dict, *, fail_after_charge: bool = False) -> int:
        child = Child(GATEWAY, json.dumps({"config": cfg, "fail_after_charge": fail_after_charge}))
        self.children.append(child)
        return int(child.expect("READY").split()[1])

    def stop(self) -> None:
        for child in self.children:
            if child.process.poll() is None:
                child.send("STOP")
                try:
                    child.process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    child.kill()


@pytest.fixture
def gateways():
    started = Gateways()
    yield started
    started.stop()


def ask(port: int, sql: str, *, epsilon: float = 0.5) -> tuple[int, str, dict[str, str]]:
    """POSTs ``sql`` as ana; (HTTP status, body, headers)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/?dp_epsilon={epsilon}", data=sql.encode(),
                                     headers={"Authorization": "Basic " + base64.b64encode(b"ana:pw").decode()})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def cli(dsn: str, database: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The data owner's ``dpch`` command, in a process of its own."""
    return subprocess.run([sys.executable, "-m", "dpch.cli.main", "--dsn", dsn, "--database", database, *args],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=180)


QUERY = "SELECT count() FROM visits"


def test_a_trip_on_one_gateway_locks_the_analyst_on_the_other(shop, server_db, gateways):
    b = gateways.start(config(shop, server_db))
    a = gateways.start(config(shop, server_db), fail_after_charge=True)
    assert ask(b, QUERY, epsilon=0.1)[0] == 200  # B has the analyst's state loaded
    control = Child(OWN_STATE, shop)
    try:
        control.expect("READY")
        status, body, headers = ask(a, QUERY, epsilon=0.1)
        assert status == 500 and headers.get("X-ClickHouse-Exception-Code") == "1001", body
        status, body, headers = ask(b, QUERY, epsilon=0.1)
        assert status == 403 and headers.get("X-ClickHouse-Exception-Code") == "291", body
        assert "analyst ana is locked" in body
        control.send("GO")  # negative control: its own state, loaded before the trip, knows no lock
        assert control.result()["admitted"]
    finally:
        control.kill()
    done = cli(shop, server_db, "budget", "unlock", "--analyst", "ana")
    assert done.returncode == 0, done.stderr
    assert ask(b, QUERY, epsilon=0.1)[0] == 200  # the owner's unlock reached B at its next query


def test_an_owner_cut_from_the_cli_reaches_both_running_gateways(shop, server_db, gateways):
    a, b = gateways.start(config(shop, server_db)), gateways.start(config(shop, server_db))
    assert ask(a, QUERY)[0] == 200 and ask(b, QUERY)[0] == 200  # ε 1 of 3 spent
    control = Child(OWN_STATE, shop)
    try:
        control.expect("READY")
        done = cli(shop, server_db, "budget", "set", "--analyst", "ana", "--epsilon", "0.8")
        assert done.returncode == 0, done.stderr
        for port in (a, b):
            status, body, headers = ask(port, QUERY)
            assert status == 403 and headers.get("X-ClickHouse-Exception-Code") == "201", body
        control.send("GO")  # negative control: its own state still has ε 3
        assert control.result()["admitted"]
    finally:
        control.kill()
    with Engine(shop) as engine:
        assert len(Ledger(engine).entries("ana")) == 3  # A's, B's and the control's; nothing after the cut


def test_two_gateways_asking_one_watch_write_one_history(shop, server_db, gateways):
    with dpch.connect(shop, analyst="ana", default_budget=Budget(3.0, 1e-6)) as session:
        session.watch_create("w", epsilon=1.0, delta=1e-6, threshold=150, upper=400, tables="visits")
    ports = [gateways.start(config(shop, server_db)), gateways.start(config(shop, server_db))]
    answers: list[int] = []
    lock = threading.Lock()

    def asker(port: int) -> None:
        for i in range(4):
            status, body, _ = ask(port, f"SELECT count() FROM visits WHERE age > {20 + i} SETTINGS dp_watch = 'w'")
            with lock:
                answers.append(status)

    threads = [threading.Thread(target=asker, args=(port,)) for port in ports for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(answers) == 16
    with Engine(shop) as engine:
        history = WatchStore(engine).history("ana", "w")
    assert watch_violations(history) == [], watch_violations(history)
    assert len(history) >= 1 + answers.count(200)  # every answer was written once, after the create row


UNFENCED_WATCH = textwrap.dedent("""
    import sys
    import dpch
    from dpch.accounting.budget import Budget
    from dpch.accounting.watches import WatchStore
    from dpch.pipeline.watch import Watches

    session = dpch.connect(sys.argv[1], analyst="ana", default_budget=Budget(3.0, 1e-6))
    session.watch_service = Watches(session.context, store=WatchStore(session.engine, shared=False))
    session.watch_state("w")
    print("READY", flush=True)
    assert sys.stdin.readline().strip() == "GO"
    for i in range(6):
        session.query(f"SELECT count() FROM visits WHERE age > {20 + i} SETTINGS dp_watch = 'w'")
    print("RESULT{}", flush=True)
""")


def test_negative_control_unfenced_watch_writes_from_two_processes_collide(shop):
    with dpch.connect(shop, analyst="ana", default_budget=Budget(3.0, 1e-6)) as session:
        session.watch_create("w", epsilon=1.0, delta=1e-6, threshold=150, upper=400, tables="visits")
    children = [Child(UNFENCED_WATCH, shop) for _ in range(2)]
    try:
        for child in children:
            child.expect("READY")
        for child in children:
            child.send("GO")
        for child in children:
            child.result()
    finally:
        for child in children:
            child.kill()
    with Engine(shop) as engine:
        assert watch_violations(WatchStore(engine, shared=False).history("ana", "w")), \
            "two processes writing one watch without the fence must collide"


def test_keeper_unreachable_fails_closed_but_serves_cached_answers(ch_server, shop, server_db):
    from dpch.server import ServerConfig, make_server

    server = make_server(ServerConfig.from_mapping(config(shop, server_db, cache_ttl=600)), host="127.0.0.1",
                         port=0)
    server.start()
    try:
        assert ask(server.port, QUERY)[0] == 200
        with Engine(shop) as engine:
            rows = len(Ledger(engine).entries("ana"))
            ch_server.keeper(up=False)
            try:
                status, _, headers = ask(server.port, QUERY)
                assert status == 200 and headers.get("X-Dpch-Cache") == "hit"  # re-serving a release is free
                status, body, headers = ask(server.port, QUERY + " WHERE age > 30")
                assert status == 503 and headers.get("X-ClickHouse-Exception-Code") == "999", body
                assert "Keeper" in body and "nothing was admitted" in body
            finally:
                ch_server.keeper(up=True)
            assert len(Ledger(engine).entries("ana")) == rows  # nothing was charged while Keeper was away
        assert ask(server.port, QUERY + " WHERE age > 30")[0] == 200
    finally:
        server.stop()


def test_without_keeper_a_second_gateway_is_refused_at_start_up(tmp_path: Path, gateways):
    from tests.chendpoint import start

    with start(tmp_path / "plain", keeper=False) as plain:
        dsn = plain.dsn("shop")
        with Engine(dsn) as engine:
            visits.load(engine, "visits", people=300)
        port = gateways.start(config(dsn, "shop"))
        assert ask(port, QUERY)[0] == 200
        second = Child(GATEWAY, json.dumps({"config": config(dsn, "shop")}))
        second.process.wait(timeout=180)
        err = second.stderr()
        assert second.process.returncode != 0 and "without ClickHouse Keeper only one process" in err, err[-2000:]
        # the owner's cut from the CLI still reaches the one gateway (it re-reads the owner's rows)
        done = cli(dsn, "shop", "budget", "set", "--analyst", "ana", "--epsilon", "0.4")
        assert done.returncode == 0, done.stderr
        assert ask(port, QUERY)[0] == 403
        gateways.stop()

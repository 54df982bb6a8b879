"""A `dpch serve` gateway on 127.0.0.1 (free port) over the session's shared store and this test's
database, holding a small demo visits table."""

from __future__ import annotations

import pytest

from dpch.fixtures import visits
from dpch.server import ServerConfig, make_server
from dpch.store.engine import Engine

#: each user's analyst has a budget set by the gateway's config at startup (ε 3): an analyst the data
#: owner gave no budget is refused (tests/accounting/test_no_budget.py)
USERS = {
    "ana": {"password": "ana-pw", "epsilon": 3.0},
    "bob": {"password": "bob-pw", "epsilon": 3.0},
    "grafana": {"password": "bi-pw", "analyst": "bi", "epsilon": 3.0},
}


@pytest.fixture
def small_visits(store_dsn: str, database: str, keeper: Engine) -> str:
    engine = Engine(store_dsn, database=database)
    visits.load(engine, "visits", people=1500)
    engine.command(f"CREATE TABLE {engine.table('unannotated')} (x UInt8) ENGINE = Memory")
    engine.close()
    return database


@pytest.fixture
def serve(store_dsn: str, small_visits: str):
    """``serve(**server_options)`` starts a gateway and returns it; all are stopped at teardown."""
    servers = []

    def start(users: dict | None = None, **server: object):
        config = ServerConfig.from_mapping({
            "server": {"dsn": store_dsn, "database": small_visits, "access_log": "", **server},
            "users": users or USERS,
        })
        srv = make_server(config, host="127.0.0.1", port=0)
        srv.start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.stop()

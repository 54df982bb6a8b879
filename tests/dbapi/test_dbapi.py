"""PEP 249 semantics of dpch.dbapi, in process and through a gateway."""

from __future__ import annotations

import pytest

from dpch import dbapi
from dpch.accounting.budget import Budget, BudgetStore
from dpch.fixtures import visits
from dpch.store.engine import Engine

Q = "SELECT region, count(*) AS n, avg(spend) AS a FROM visits WHERE age > %(age)s GROUP BY region"


@pytest.fixture
def conn(store_dsn, database, keeper):
    engine = Engine(store_dsn, database=database)
    visits.load(engine, "visits", people=1500)
    BudgetStore(engine).set("ana", Budget(3.0, 1e-6))  # the data owner's `dpch budget set`
    engine.close()
    connection = dbapi.connect(store_dsn, analyst="ana", database=database, seed=7)
    yield connection
    connection.close()


def test_module_globals():
    assert dbapi.apilevel == "2.0" and dbapi.paramstyle == "pyformat" and dbapi.threadsafety == 1
    assert issubclass(dbapi.ProgrammingError, dbapi.DatabaseError) and issubclass(dbapi.DatabaseError, dbapi.Error)
    assert dbapi.NUMBER == "Int64" and dbapi.NUMBER == "Nullable(Float64)" and dbapi.NUMBER != "String"
    assert dbapi.STRING == "LowCardinality(String)" and dbapi.DATETIME == "DateTime64(6, 'UTC')"


def test_cursor_semantics(conn):
    cur = conn.cursor()
    assert cur.description is None and cur.rowcount == -1
    with pytest.raises(dbapi.ProgrammingError, match="execute"):
        cur.fetchone()
    assert cur.execute(Q, {"age": 40}) is cur
    assert [d[0] for d in cur.description] == ["region", "n", "a"]
    assert [d[1] for d in cur.description] == ["LowCardinality(String)", "Int64", "Float64"]
    assert cur.description[1][1] == dbapi.NUMBER and cur.description[0][1] == dbapi.STRING
    assert cur.rowcount == 4  # the declared key domain: data-independent
    first = cur.fetchone()
    assert first[0] == "north" and isinstance(first[1], int)
    assert len(cur.fetchmany(2)) == 2 and cur.rownumber == 3
    assert len(cur.fetchall()) == 1 and cur.fetchone() is None and cur.fetchall() == []
    assert cur.intervals[0][0] is None and cur.intervals[0][1][0] < first[1] < cur.intervals[0][1][1]
    assert cur.row_intervals(0) == cur.intervals[0]
    assert cur.cost.epsilon == 0.5 and cur.budget.remaining.epsilon == pytest.approx(2.5)
    assert cur.release.mechanism == "laplace"
    cur.arraysize = 3
    cur.execute("SELECT device, count(*) FROM visits WHERE region IN %s GROUP BY device", [("north", "o'x")])
    assert len(cur.fetchmany()) == 3
    assert [tuple(r) for r in cur.execute("SELECT count(*) FROM visits WHERE age > %s", (30,))][0][0] > 0
    assert conn.budget().spent.epsilon == pytest.approx(1.5)


def test_errors_map_to_pep249(conn):
    cur = conn.cursor()
    with pytest.raises(dbapi.ProgrammingError, match="not aggregated") as info:
        cur.execute("SELECT spend FROM visits")
    assert info.value.dpch_error is not None and info.value.dpch_error.kind == "unsupported"
    with pytest.raises(dbapi.ProgrammingError):
        cur.execute("SELEC 1")
    with pytest.raises(dbapi.OperationalError, match="budget exhausted"):
        cur.execute("SELECT count(*) FROM visits SETTINGS dp_epsilon = 100")
    with pytest.raises(dbapi.ProgrammingError, match="placeholders"):
        cur.execute(Q, {"wrong": 1})
    conn.commit()
    conn.rollback()  # read-only: both are no-ops
    cur.close()
    with pytest.raises(dbapi.InterfaceError):
        cur.execute("SELECT count(*) FROM visits")
    assert conn.budget().spent.epsilon == 0.0  # nothing above was charged


def test_dbapi_through_gateway(store_dsn, database, keeper):
    from dpch.server import ServerConfig, make_server
    from tests.server.conftest import USERS

    engine = Engine(store_dsn, database=database)
    visits.load(engine, "visits", people=1500)
    engine.close()
    config = ServerConfig.from_mapping({"server": {"dsn": store_dsn, "database": database, "access_log": ""},
                                        "users": USERS})
    srv = make_server(config, host="127.0.0.1", port=0)
    srv.start()
    try:
        with dbapi.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="bob", password="bob-pw") as conn:
            cur = conn.cursor()
            cur.execute(Q, {"age": 50})
            assert [d[1] for d in cur.description] == ["LowCardinality(String)", "Int64", "Float64"]
            assert cur.rowcount == 4 and cur.cost.epsilon == 0.5 and cur.budget.analyst == "bob"
            assert cur.intervals[1][2][0] <= cur.fetchall()[1][2] <= cur.intervals[1][2][1]
            with pytest.raises(dbapi.OperationalError, match="budget exhausted"):
                cur.execute("SELECT count(*) FROM visits SETTINGS dp_epsilon = 9")
        with pytest.raises(dbapi.InterfaceError, match="credentials"):
            dbapi.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="bob", password="x")
    finally:
        srv.stop()

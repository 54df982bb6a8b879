"""The SQLAlchemy dialect: pandas.read_sql, Core selects, and reflection from the policy."""

from __future__ import annotations

import pandas as pd
import pytest
import sqlalchemy as sa

from dpch.fixtures import visits
from dpch.store.engine import Engine


@pytest.fixture
def loaded(store_dsn, database, keeper):
    engine = Engine(store_dsn, database=database)
    visits.load(engine, "visits", people=1500)
    engine.command(f"CREATE TABLE {engine.table('plain')} (x UInt8) ENGINE = Memory")
    engine.close()
    return database


def _urls(store_dsn, database, srv):
    path = store_dsn.removeprefix("chdb://")
    return [f"dpch+chdb://{path}?analyst=ana&database={database}",
            f"dpch://ana:ana-pw@127.0.0.1:{srv.port}/{database}"]


@pytest.fixture
def gateway(store_dsn, loaded):
    from dpch.server import ServerConfig, make_server
    from tests.server.conftest import USERS

    config = ServerConfig.from_mapping({"server": {"dsn": store_dsn, "database": loaded, "access_log": ""},
                                        "users": USERS})
    srv = make_server(config, host="127.0.0.1", port=0)
    srv.start()
    yield srv
    srv.stop()


def test_read_sql_core_select_and_inspector(store_dsn, loaded, gateway):
    for url in _urls(store_dsn, loaded, gateway):
        engine = sa.create_engine(url)
        frame = pd.read_sql("SELECT device, count(*) AS n FROM visits GROUP BY device", engine)
        assert list(frame.columns) == ["device", "n"] and list(frame["device"]) == ["mobile", "desktop", "tablet"]
        assert frame["n"].dtype.kind == "i"

        inspector = sa.inspect(engine)
        assert inspector.get_table_names() == ["visits"]  # the unannotated table is not exposed
        columns = {c["name"]: c["type"] for c in inspector.get_columns("visits")}
        assert isinstance(columns["spend"], sa.Float) and isinstance(columns["user_id"], sa.BigInteger)
        assert isinstance(columns["visit_date"], sa.Date) and isinstance(columns["region"], sa.String)
        assert inspector.has_table("visits") and not inspector.has_table("plain")

        table = sa.Table("visits", sa.MetaData(), autoload_with=engine)
        stmt = (sa.select(table.c.region, sa.func.avg(table.c.spend).label("avg_spend"))
                .where(table.c.age > 30).group_by(table.c.region).order_by(table.c.region).limit(2))
        with engine.connect() as conn:
            rows = conn.execute(stmt).all()
        assert [r.region for r in rows] == ["east", "north"]
        assert all(0 <= r.avg_spend <= 500 for r in rows)
        with engine.connect() as conn, pytest.raises(sa.exc.ProgrammingError, match="not aggregated"):
            conn.execute(sa.select(table.c.spend))
        engine.dispose()

"""The SQLAlchemy dialects BI tools use, as real libraries against `dpch serve` on a loopback port:
clickhouse-connect's `clickhousedb://` (Superset's) — inspect() and pandas.read_sql of a DP query —
and clickhouse-sqlalchemy's `clickhouse+http://` — reflection with Table(..., autoload_with=...).
Each answer is checked for values: the table list is the policy tables only, the columns and types
are the table's, and a DP answer has the declared key domain. Skipped, with the reason, where a
library is not installed."""

from __future__ import annotations

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy", reason="sqlalchemy is not installed (pip install -e '.[test]')")

VISITS_COLUMNS = ["user_id", "visit_date", "region", "device", "age", "duration_min", "spend", "pages", "converted"]


def _url(scheme: str, srv, database: str) -> str:
    return f"{scheme}://ana:ana-pw@127.0.0.1:{srv.port}/{database}"


def test_clickhousedb_dialect_inspects_the_policy_tables(serve, small_visits):
    pytest.importorskip("clickhouse_connect.cc_sqlalchemy", reason="clickhouse-connect's SQLAlchemy dialect missing")
    engine = sqlalchemy.create_engine(_url("clickhousedb", serve(), small_visits))
    try:
        inspector = sqlalchemy.inspect(engine)
        assert inspector.get_schema_names() == [small_visits]
        assert inspector.get_table_names() == ["visits"]  # not the unannotated table, not the ledger
        assert inspector.get_table_names(schema=small_visits) == ["visits"]
        columns = inspector.get_columns("visits")
        assert [c["name"] for c in columns] == VISITS_COLUMNS
        assert [str(c["type"]) for c in columns][:3] == ["UInt64", "Date", "LowCardinality(String)"]
        assert columns[6]["comment"] == "dp: bounds=[0, 500]"
        assert inspector.has_table("visits") and not inspector.has_table("unannotated")
        assert inspector.get_table_comment("visits")["text"] == "dp: privacy_unit=user_id, max_rows_per_unit=10"
        with pytest.raises(sqlalchemy.exc.NoSuchTableError):
            inspector.get_columns("unannotated")
    finally:
        engine.dispose()


def test_clickhousedb_dialect_pandas_read_sql_of_a_dp_query(serve, small_visits):
    pytest.importorskip("clickhouse_connect.cc_sqlalchemy", reason="clickhouse-connect's SQLAlchemy dialect missing")
    pandas = pytest.importorskip("pandas", reason="pandas is not installed")
    srv = serve()
    engine = sqlalchemy.create_engine(_url("clickhousedb", srv, small_visits))
    try:
        frame = pandas.read_sql("SELECT region, count(*) AS n FROM visits GROUP BY region SETTINGS dp_epsilon = 0.5",
                                engine)
    finally:
        engine.dispose()
    assert list(frame.columns) == ["region", "n"]
    assert list(frame["region"]) == ["north", "south", "east", "west"]  # the declared domain, in its order
    assert srv.gateway.session(srv.gateway.config.users["ana"], None).budget().spent.epsilon == pytest.approx(0.5)


def test_clickhouse_sqlalchemy_http_reflects_the_table(serve, small_visits):
    pytest.importorskip("clickhouse_sqlalchemy", reason="clickhouse-sqlalchemy is not installed")
    srv = serve()
    engine = sqlalchemy.create_engine(_url("clickhouse+http", srv, small_visits))
    try:
        inspector = sqlalchemy.inspect(engine)
        assert inspector.get_table_names() == ["visits"]
        assert inspector.get_schema_names() == [small_visits]
        table = sqlalchemy.Table("visits", sqlalchemy.MetaData(), autoload_with=engine)
        assert [c.name for c in table.columns] == VISITS_COLUMNS
        assert type(table.c.spend.type).__name__ == "Float64" and type(table.c.user_id.type).__name__ == "UInt64"
        assert not inspector.has_table("unannotated")
        # the dialect DESCRIBEs without asking first: ClickHouse's UNKNOWN_TABLE, as for a missing table
        with pytest.raises(Exception, match=r"Code: 60\. .*unannotated does not exist \(or has no privacy policy\)"):
            sqlalchemy.Table("unannotated", sqlalchemy.MetaData(), autoload_with=engine)
        # the reflected table in an ordinary SQLAlchemy query: a DP count
        query = sqlalchemy.select(sqlalchemy.func.count().label("n")).select_from(table)
        with engine.connect() as conn:
            rows = conn.execute(query).fetchall()
    finally:
        engine.dispose()
    assert len(rows) == 1 and isinstance(rows[0][0], int)
    assert srv.gateway.session(srv.gateway.config.users["ana"], None).budget().spent.epsilon > 0

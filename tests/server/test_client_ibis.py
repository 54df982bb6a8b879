"""ibis's ClickHouse backend — the real library — against `dpch serve` on a loopback port: its
introspection (list_tables, a table's schema), a table-API aggregate answered with noise, and
con.sql(), which creates a view first: refused as READONLY with the table API as the way out.
Skipped, with the reason, where ibis is not installed."""

from __future__ import annotations

import pytest

ibis = pytest.importorskip("ibis", reason="ibis-framework[clickhouse] is not installed (pip install -e '.[test]')")


@pytest.fixture
def con(serve, small_visits):
    pytest.importorskip("ibis.backends.clickhouse", reason="ibis's ClickHouse backend is not installed")
    srv = serve()
    connection = ibis.clickhouse.connect(host="127.0.0.1", port=srv.port, user="ana", password="ana-pw",
                                         database=small_visits)
    yield srv, connection
    connection.disconnect()


def test_ibis_lists_the_policy_tables_and_their_schema(con):
    _, connection = con
    assert connection.list_tables() == ["visits"]  # not the unannotated table, not the ledger
    schema = connection.table("visits").schema()
    assert list(schema.names) == ["user_id", "visit_date", "region", "device", "age", "duration_min", "spend",
                                  "pages", "converted"]
    assert str(schema["user_id"]) == "!uint64" and str(schema["spend"]) == "!float64"
    assert str(schema["visit_date"]) == "!date" and str(schema["region"]) == "!string"


def test_ibis_table_api_aggregates_are_dp_releases(con):
    srv, connection = con
    visits = connection.table("visits")
    n = visits.count().execute()
    assert isinstance(int(n), int)
    by_region = visits.group_by("region").aggregate(n=visits.count()).execute()
    assert sorted(by_region["region"]) == ["east", "north", "south", "west"]  # the declared domain
    assert srv.gateway.session(srv.gateway.config.users["ana"], None).budget().spent.epsilon > 0


def test_ibis_sql_creates_a_view_and_is_told_dpch_is_read_only(con):
    srv, connection = con
    with pytest.raises(Exception) as info:
        connection.sql("SELECT count(*) AS n FROM visits").execute()
    text = str(info.value)
    assert "164" in text and "dpch is read-only" in text and "con.table('visits')" in text
    assert srv.gateway.session(srv.gateway.config.users["ana"], None).budget().spent.epsilon == 0.0


def test_ibis_ordered_aggregate_is_one_release(con):
    """ibis's time-series idiom, ``group_by().aggregate().order_by()``, sends ``SELECT * FROM (<aggregate>)
    ORDER BY …`` (issue 28): a wrapper that only orders the aggregate's rows, answered as the aggregate
    with its ORDER BY — one release, one charge."""
    srv, connection = con
    visits = connection.table("visits")
    expr = visits.group_by("region").aggregate(n=visits.count(), s=visits.spend.sum()).order_by(ibis.desc("region"))
    sql = " ".join(str(ibis.to_sql(expr, dialect="clickhouse")).split())
    assert sql.startswith("SELECT * FROM ( SELECT") and sql.endswith('ORDER BY "t1"."region" DESC')  # ibis 12
    before = srv.gateway.session(srv.gateway.config.users["ana"], None).budget().spent.epsilon
    frame = expr.execute()
    assert list(frame["region"]) == ["west", "south", "north", "east"]
    spent = srv.gateway.session(srv.gateway.config.users["ana"], None).budget().spent.epsilon - before
    assert spent == pytest.approx(0.5)  # one release at the gateway's default ε

"""clickhouse-connect — the real library — as a client of `dpch serve`."""

from __future__ import annotations

import clickhouse_connect
import numpy as np
import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

GROUPED = "SELECT region, count(*) AS n, avg(spend) AS avg_spend FROM visits GROUP BY region"


def _client(srv, database, user="ana", password="ana-pw", **kw):
    return clickhouse_connect.get_client(host="127.0.0.1", port=srv.port, username=user, password=password,
                                         database=database, **kw)


def test_connect_query_types_df_np(serve, database):
    srv = serve()
    client = _client(srv, database)
    assert client.server_version == srv.gateway.version
    result = client.query(GROUPED)
    assert result.column_names == ("region", "n", "avg_spend")
    assert [t.name for t in result.column_types] == ["LowCardinality(String)", "Int64", "Float64"]
    assert [r[0] for r in result.result_rows] == ["north", "south", "east", "west"]  # the declared domain
    assert all(isinstance(r[1], int) and 0 <= r[2] <= 500 for r in result.result_rows)
    assert result.summary["read_rows"] == "0"  # no data-dependent counts leave the gateway

    frame = client.query_df("SELECT count(*) AS n FROM visits SETTINGS dp_epsilon = 1")
    assert list(frame.columns) == ["n"] and len(frame) == 1
    engine = srv.gateway.engine(None)
    true_capped = engine.query_rows(
        f"SELECT count() FROM (SELECT 1 FROM {engine.table('visits')} LIMIT 10 BY user_id)")[0][0]
    assert abs(frame["n"][0] - true_capped) < 10 * np.log(1 / 1e-6), "Laplace(10/ε=1) noise beyond its 1e-6 tail"

    arr = client.query_np("SELECT device, sum(pages) AS p FROM visits GROUP BY device",
                          settings={"dp_epsilon": 0.4})
    assert arr.shape == (3,) and list(arr["device"]) == ["mobile", "desktop", "tablet"]
    assert arr.dtype["p"] == np.int64
    budget = srv.gateway.session(srv.gateway.config.users["ana"], None).budget()
    assert budget.spent.epsilon == pytest.approx(0.5 + 1 + 0.4)


def test_rejected_query_raises_clickhouse_connect_error_with_dpch_message(serve, database):
    srv = serve()
    client = _client(srv, database)
    with pytest.raises(DatabaseError) as info:
        client.query("SELECT user_id, spend FROM visits")
    text = str(info.value)
    assert "497" in text and "ACCESS_DENIED" in text
    assert "not aggregated or grouped by" in text  # dpch's own message
    with pytest.raises(DatabaseError, match="budget exhausted for analyst ana"):
        client.query("SELECT count(*) FROM visits SETTINGS dp_epsilon = 50")
    with pytest.raises(DatabaseError, match="Setting max_memory_usage is not accepted"):
        client.query("SELECT count(*) FROM visits", settings={"max_memory_usage": "1"})
    assert srv.gateway.session(srv.gateway.config.users["ana"], None).budget().spent.epsilon == 0.0


def test_auth_failure(serve, database):
    srv = serve()
    with pytest.raises(DatabaseError) as info:
        _client(srv, database, password="wrong")
    assert "516" in str(info.value) and "Authentication failed" in str(info.value)
    with pytest.raises(DatabaseError, match="516"):
        _client(srv, database, user="nobody", password="")


def test_schema_browsing_shows_only_policy_tables(serve, database):
    client = _client(serve(), database)
    assert client.command("SELECT currentDatabase()") == database
    tables = [r[0] for r in client.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase()").result_rows]
    assert tables == ["visits"]  # not dpch_ledger, not the unannotated table
    rows = client.query("SELECT name, total_rows FROM system.tables").result_rows
    assert rows == [("visits", None)]  # no row counts
    cols = client.query(
        f"SELECT name, type FROM system.columns WHERE database = '{database}' AND table = 'visits' "
        "ORDER BY position").result_rows
    assert cols[:3] == [("user_id", "UInt64"), ("visit_date", "Date"), ("region", "LowCardinality(String)")]
    assert [r[0] for r in client.query("SHOW DATABASES").result_rows] == [database]
    assert client.command("EXISTS TABLE visits") == 1 and client.command("EXISTS TABLE unannotated") == 0
    described = client.query("DESCRIBE TABLE visits").result_rows
    assert described[2][:2] == ("region", "LowCardinality(String)") and "dp: public" in described[2][4]
    with pytest.raises(DatabaseError, match="UNKNOWN_TABLE"):
        client.query("DESCRIBE TABLE unannotated")
    with pytest.raises(DatabaseError, match="mix system tables"):
        client.query("SELECT name FROM system.tables WHERE name IN (SELECT region FROM visits)")
    with pytest.raises(DatabaseError, match="IN <table> is not allowed"):
        client.query(f"SELECT name FROM system.tables WHERE toUInt64(length(name)) IN {database}.visits")
    with pytest.raises(DatabaseError, match="function joinGet is not allowed"):
        client.query("SELECT joinGet('visits', 'spend', 1)")
    with pytest.raises(DatabaseError, match="function file is not allowed"):
        client.query("SELECT file('/etc/passwd')")


def test_compression_and_query_id(serve, database):
    srv = serve()
    for codec in ("gzip", "zstd", "lz4"):
        client = _client(srv, database, compress=codec)
        result = client.query("SELECT name FROM system.tables", settings={"query_id": f"qid-{codec}"})
        assert result.result_rows == [("visits",)]
        assert result.query_id == f"qid-{codec}"

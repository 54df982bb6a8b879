"""`dpch serve --tcp-port` answered to the real clickhouse-driver (PyPI): private queries, settings, parameters,
streaming, compression, refusals with dpch's codes, and one budget with the HTTP front (issue 30)."""

from __future__ import annotations

import json
import re
import threading

import pytest
from clickhouse_driver import Client
from clickhouse_driver.errors import ServerException

from dpch.server.native.wire import string, varint
from tests.server.http_post import post

pytestmark = pytest.mark.engine

#: users with a budget large enough for queries at a large ε (values then close to exact)
RICH = {"ana": {"password": "ana-pw", "epsilon": 1e6}, "bob": {"password": "bob-pw", "epsilon": 1e6}}
#: what a query without dp_epsilon costs (dpch's default)
DEFAULT_EPSILON = 0.5
COUNTS = "SELECT region, count(*) AS n FROM visits GROUP BY region ORDER BY region"


def client(http, listener, *, user: str = "ana", password: str = "ana-pw", **kwargs) -> Client:
    return Client(host="127.0.0.1", port=listener.port, user=user, password=password,
                  database=http.gateway.config.database, connect_timeout=60, send_receive_timeout=120, **kwargs)


def http_json(http, sql: str, *, user: str = "ana", password: str = "ana-pw") -> dict:
    response, body = post(http, sql + " FORMAT JSON", user=user, password=password)
    assert response.status == 200, body
    return json.loads(body)


def spent(http, user: str = "ana", password: str = "ana-pw") -> float:
    return http_json(http, "SELECT spent FROM dpch.budget WHERE dataset = ''", user=user, password=password)[
        "data"][0]["spent"]


def test_private_counts_are_noisy_and_close_to_the_same_query_over_http(native):
    """The same counts at ε = 1000 over native (ana) and HTTP (bob, another analyst: a release of its own).
    Ungrouped counts under the per-unit cap have one exact value whatever rows the cap keeps; a count's
    sensitivity is the table's max_rows_per_unit (10), so each answer carries Laplace noise of scale
    0.01, rounded: the two differ by at most 1 except with probability < 1e-20."""
    http, listener = native(users=RICH)
    sql = ("SELECT count(*) AS n, countIf(age > 30) AS older FROM visits WHERE region != 'west' "
           "SETTINGS dp_epsilon = 1000")
    rows, columns = client(http, listener).execute(sql, with_column_types=True)
    assert columns == [("n", "Int64"), ("older", "Int64")]
    over_http = http_json(http, sql, user="bob", password="bob-pw")["data"][0]
    assert abs(rows[0][0] - int(over_http["n"])) <= 1, (rows, over_http)
    assert abs(rows[0][1] - int(over_http["older"])) <= 1, (rows, over_http)
    assert spent(http) == pytest.approx(1000)
    grouped = client(http, listener).execute(COUNTS + " SETTINGS dp_epsilon = 0.5")
    assert [region for region, _ in grouped] == ["east", "north", "south", "west"]


def test_a_dp_setting_from_the_protocol_and_from_sql_is_charged_to_the_analysts_ledger(native):
    http, listener = native()
    c = client(http, listener)
    c.execute("SELECT avg(spend) FROM visits", settings={"dp_epsilon": 0.25})
    assert spent(http) == pytest.approx(0.25)
    c.execute("SELECT sum(spend) FROM visits SETTINGS dp_epsilon = 0.5")
    assert spent(http) == pytest.approx(0.75)
    # and the other way round: HTTP's spending is what the native client sees in dpch.budget
    post(http, "SELECT count(*) FROM visits", params={"dp_epsilon": "0.125"})
    assert c.execute("SELECT spent FROM dpch.budget WHERE dataset = ''") == [(pytest.approx(0.875),)]


def test_an_identical_query_is_served_from_the_release_cache_with_compression_on_and_off(native):
    """The second and third answers are the first release re-served (free): equal values, and the
    lz4-compressed blocks decode to the same numbers."""
    http, listener = native()
    plain = client(http, listener).execute(COUNTS)
    compressed = client(http, listener, compression="lz4").execute(COUNTS)
    again = client(http, listener, compression=True).execute(COUNTS, settings={"network_compression_method": "lz4"})
    assert plain == compressed == again
    assert spent(http) == pytest.approx(DEFAULT_EPSILON)  # one release, charged once


def test_zstd_blocks_when_the_client_asks_for_them(native):
    """``network_compression_method = 'zstd'`` makes dpch write ZSTD frames (method byte 0x90); clickhouse-driver
    reads them when its optional ``zstd`` module is installed."""
    pytest.importorskip("zstd", reason="clickhouse-driver reads ZSTD frames only with the `zstd` package")
    http, listener = native()
    rows = client(http, listener, compression="lz4").execute(COUNTS, settings={"network_compression_method": "zstd"})
    assert [r for r, _ in rows] == ["east", "north", "south", "west"]


def test_query_parameters_and_streaming(native):
    http, listener = native(users=RICH)
    c = client(http, listener, settings={"server_side_params": True})
    rows = c.execute("SELECT count(*) AS n FROM visits WHERE region = {r:String} SETTINGS dp_epsilon = 1000",
                     params={"r": "north"})
    exact = client(http, listener).execute(
        "SELECT count(*) AS n FROM visits WHERE region = 'north' SETTINGS dp_epsilon = 1000")
    assert abs(rows[0][0] - exact[0][0]) <= 1
    streamed = list(client(http, listener).execute_iter(COUNTS + " SETTINGS dp_epsilon = 1000"))
    assert [r for r, _ in streamed] == ["east", "north", "south", "west"]


def test_dp_intervals_columns_and_metadata_over_native(native):
    http, listener = native()
    c = client(http, listener)
    rows, columns = c.execute("SELECT count(*) AS n FROM visits SETTINGS dp_intervals = 'columns'",
                              with_column_types=True)
    assert [name for name, _ in columns] == ["n", "n_lo", "n_hi"]
    assert rows[0][1] < rows[0][2]
    assert c.execute("SHOW TABLES") == [("visits",)]
    # an empty metadata answer still names its columns (asked again, free, for the header)
    assert c.execute("SELECT name FROM system.tables WHERE name = 'nope'", with_column_types=True) == (
        [], [("name", "String")])
    explained = c.execute("EXPLAIN DP SELECT count(*) FROM visits")
    assert explained and all(isinstance(line, str) for (line,) in explained)
    assert spent(http) == pytest.approx(DEFAULT_EPSILON)  # EXPLAIN DP is free


def test_a_release_with_no_rows_still_names_its_columns(native):
    """A HAVING no noisy count meets leaves no rows: the header block still names and types the columns
    (from the release itself: the query is not asked again, which could charge again)."""
    http, listener = native()
    c = client(http, listener)
    sql = ("SELECT region, count(*) AS n FROM visits GROUP BY region HAVING n < -1e12 "
           "SETTINGS dp_epsilon = 1, dp_intervals = 'columns'")
    assert c.execute(sql, with_column_types=True) == (
        [], [("region", "LowCardinality(String)"), ("n", "Int64"), ("n_lo", "Float64"), ("n_hi", "Float64")])
    assert spent(http) == pytest.approx(1.0)  # one release, charged once


def _http_error(http, sql: str, **params: str) -> tuple[int, str]:
    response, body = post(http, sql, params=params)
    text = body.decode()
    match = re.match(r"Code: (\d+)\. DB::Exception: (.*)\. \([A-Z_]+\) \(version", text, re.S)
    assert match, text
    return int(match.group(1)), match.group(2)


@pytest.mark.parametrize(("sql", "settings", "code"), [
    ("SELECT * FROM visits", {}, 497),
    ("SELECT count(*) FROM nowhere", {}, 60),
    ("SELEC 1", {}, 62),
    ("SELECT * FROM system.parts", {}, 60),
    ("INSERT INTO visits (age) VALUES", {}, 164),
    ("CREATE TABLE t (x UInt8) ENGINE = Memory", {}, 164),
    ("SELECT count(*) FROM visits", {"max_threads_of_mine": "1"}, 115),
], ids=["star", "unknown-table", "syntax", "system-parts", "insert", "create", "setting"])
def test_refusals_keep_dpchs_codes_and_messages(native, sql, settings, code):
    http, listener = native()
    c = client(http, listener)
    with pytest.raises(ServerException) as raised:
        c.execute(sql, settings=settings)
    http_code, http_message = _http_error(http, sql, **settings)
    assert raised.value.code == http_code == code
    assert raised.value.message.startswith(f"DB::Exception: {http_message}. Stack trace:")
    assert "Traceback" not in raised.value.message
    # the connection goes on
    assert c.execute("SELECT spent FROM dpch.budget WHERE dataset = ''") == [(0.0,)]
    assert spent(http) == 0.0


def test_insert_with_rows_is_refused_without_hanging(native):
    """clickhouse-driver sends the INSERT, the empty external-tables block, then waits for the table's
    header before sending rows: dpch answers READONLY there, and the same connection goes on."""
    http, listener = native()
    c = client(http, listener)
    with pytest.raises(ServerException) as raised:
        c.execute("INSERT INTO visits (age) VALUES", [(1,), (2,)])
    assert raised.value.code == 164
    assert c.execute("SHOW TABLES") == [("visits",)]


def test_sign_in_and_database_are_checked_at_hello(native):
    http, listener = native()
    with pytest.raises(ServerException) as raised:
        client(http, listener, password="wrong").execute("SELECT 1")
    assert raised.value.code == 516
    with pytest.raises(ServerException) as raised:
        Client(host="127.0.0.1", port=listener.port, user="ana", password="ana-pw",
               database="no_such_db").execute("SHOW TABLES")
    assert raised.value.code == 81


def test_ping_and_several_queries_on_one_connection(native):
    http, listener = native()
    c = client(http, listener)
    for _ in range(3):
        assert c.execute("SHOW TABLES") == [("visits",)]
        assert c.connection.ping()
    assert c.connection.server_info.used_revision == 54468
    assert c.connection.server_info.timezone == http.gateway.timezone


def test_two_connections_at_once_one_of_them_stalled_mid_packet(native):
    """A client that sent half a packet holds its own thread only: another connection is answered meanwhile,
    and two clients in threads both get their answers."""
    import socket

    http, listener = native()
    stalled = socket.create_connection(("127.0.0.1", listener.port), timeout=60)
    try:
        stalled.sendall(varint(0) + string("half"))  # a Hello cut short: the server waits for the rest
        results: dict[int, object] = {}
        barrier = threading.Barrier(2)

        def ask(i: int) -> None:
            c = client(http, listener)
            barrier.wait(timeout=60)
            results[i] = c.execute(COUNTS)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert results[0] == results[1]  # the same release (the second waited for the first, or was cached)
        assert spent(http) == pytest.approx(DEFAULT_EPSILON)
    finally:
        stalled.close()


def test_a_row_limit_setting_limits_the_rows_written_out(native):
    """The setting ``limit`` (Grafana's row limit) caps the released rows written out, as over HTTP: the same
    release, fewer rows, nothing more charged."""
    http, listener = native()
    rows = client(http, listener).execute(COUNTS)
    assert client(http, listener).execute(COUNTS, settings={"limit": 2}) == rows[:2]
    assert spent(http) == pytest.approx(DEFAULT_EPSILON)

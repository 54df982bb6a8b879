"""Raw HTTP requests (as curl sends them) in each output format, compared with what embedded
ClickHouse itself writes for the same rows; headers, errors and compression."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import re
from urllib.parse import urlencode

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpch.server import block_compression
from tests.server.driver_blocks import read_blocks

QUERY = "SELECT region, count(*) AS n, avg(spend) AS a FROM visits GROUP BY region"
AUTH = {"Authorization": "Basic " + base64.b64encode(b"ana:ana-pw").decode()}
TEXT_FORMATS = ["TabSeparated", "TabSeparatedWithNames", "TabSeparatedWithNamesAndTypes", "CSV", "CSVWithNames",
                "JSON", "JSONCompact", "JSONEachRow", "Native", "RowBinary"]


def request(srv, body: str | None = None, *, params: dict | None = None, headers: dict | None = None,
            method: str = "POST", body_bytes: bytes | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    conn.request(method, "/?" + urlencode(params or {}), body=body.encode() if body else body_bytes,
                 headers={**AUTH, **(headers or {})})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response, data


def _drop_statistics(data: bytes) -> bytes:
    return re.sub(rb',\s*"statistics":\s*\{[^}]*\}', b"", data)


@pytest.fixture
def released(serve, keeper, database):
    """A gateway, one release of QUERY, and the same rows stored in a plain table for comparison."""
    srv = serve(cache_ttl=300)
    response, data = request(srv, QUERY + " FORMAT JSONCompact")
    assert response.status == 200, data
    rows = json.loads(data)["data"]
    keeper.command(f"CREATE TABLE `{database}`.expected (i UInt8, region LowCardinality(String), n Int64, "
                   "a Float64) ENGINE = MergeTree ORDER BY i")
    keeper.command(
        f"INSERT INTO `{database}`.expected VALUES "
        + ", ".join(f"({i}, '{r[0]}', {int(r[1])}, {float(r[2])!r})" for i, r in enumerate(rows)))
    return srv


def expected(keeper, database, fmt: str) -> bytes:
    return keeper.raw_query(f"SELECT region, n, a FROM `{database}`.expected ORDER BY i", fmt)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_format_matches_clickhouse(released, keeper, database, fmt):
    response, data = request(released, QUERY + f" FORMAT {fmt}")
    assert response.status == 200, data
    assert response.getheader("X-ClickHouse-Format") == fmt
    assert response.getheader("X-Dpch-Cache") == "hit"  # same released rows, nothing charged
    assert _drop_statistics(data) == _drop_statistics(expected(keeper, database, fmt))


@pytest.mark.parametrize("fmt", ["Arrow", "Parquet"])
def test_binary_columnar_formats(released, keeper, database, fmt):
    response, data = request(released, QUERY, params={"default_format": fmt})
    assert response.status == 200
    read = (lambda b: pa.ipc.open_file(pa.BufferReader(b)).read_all()) if fmt == "Arrow" else (
        lambda b: pq.read_table(pa.BufferReader(b)))
    assert read(data).equals(read(expected(keeper, database, fmt)))


def test_query_in_url_get_and_headers(released):
    params = {"query": QUERY, "query_id": "abc", "database": released.gateway.config.database}
    response, data = request(released, params=params, method="GET")
    assert response.status == 200
    assert response.getheader("X-ClickHouse-Query-Id") == "abc"
    assert response.getheader("X-ClickHouse-Format") == "TabSeparated"
    assert response.getheader("X-ClickHouse-Timezone") == released.gateway.timezone
    assert response.getheader("X-ClickHouse-Server-Display-Name") == "dpch"
    summary = json.loads(response.getheader("X-ClickHouse-Summary"))
    assert summary["result_rows"] == "4" and summary["read_rows"] == "0"
    assert json.loads(response.getheader("X-Dpch-Cost")) == {"epsilon": 0.0, "delta": 0.0}
    assert json.loads(response.getheader("X-Dpch-Budget-Remaining"))["epsilon"] == pytest.approx(2.5)
    assert len(data.splitlines()) == 4


def test_gzip_when_asked(released):
    params = {"enable_http_compression": "1", "default_format": "JSONEachRow"}
    response, data = request(released, QUERY, params=params, headers={"Accept-Encoding": "gzip"})
    assert response.getheader("Content-Encoding") == "gzip"
    assert len(gzip.decompress(data).splitlines()) == 4
    response, data = request(released, QUERY, params={"default_format": "JSONEachRow"},
                             headers={"Accept-Encoding": "gzip"})
    assert response.getheader("Content-Encoding") is None  # ClickHouse compresses only when enabled


def test_errors_in_clickhouse_shape(serve):
    srv = serve(max_request_bytes=2000)
    response, data = request(srv, "SELECT spend FROM visits")
    assert response.status == 403 and response.getheader("X-ClickHouse-Exception-Code") == "497"
    assert re.match(rb"^Code: 497\. DB::Exception: dpch: .*\(ACCESS_DENIED\) \(version [0-9.]+\)\n$", data), data
    response, data = request(srv, "SELEC count(*) FROM visits")
    assert response.getheader("X-ClickHouse-Exception-Code") == "62" and response.status == 400
    response, _ = request(srv, QUERY + " FORMAT Xml")
    assert response.getheader("X-ClickHouse-Exception-Code") == "73"
    response, _ = request(srv, QUERY + " -- " + "x" * 3000)
    assert response.status == 413 and response.getheader("X-ClickHouse-Exception-Code") == "307"
    response, data = request(srv, QUERY, headers={"Authorization": "Basic " + base64.b64encode(b"ana:no").decode()})
    assert response.status == 401 and b"AUTHENTICATION_FAILED" in data
    response, _ = request(srv, QUERY, headers={"Authorization": "", "X-ClickHouse-User": "bob",
                                                "X-ClickHouse-Key": "bob-pw"})
    assert response.status == 200
    response, _ = request(srv, QUERY, params={"database": "elsewhere"})
    assert response.getheader("X-ClickHouse-Exception-Code") == "81"
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.request("GET", "/ping")
    assert conn.getresponse().read() == b"Ok.\n"


# -- ClickHouse's compressed format (issue 28, part 3): compress=1 on responses, decompress=1 on bodies ------

@pytest.mark.parametrize("fmt", ["TabSeparatedWithNamesAndTypes", "RowBinaryWithNamesAndTypes", "Native"])
def test_compress_1_decompresses_to_clickhouses_output(released, keeper, database, fmt):
    response, data = request(released, QUERY + f" FORMAT {fmt}", params={"compress": "1"})
    assert response.status == 200 and response.getheader("X-Dpch-Cache") == "hit"
    assert data[16] == block_compression.LZ4  # LZ4 unless the client asks otherwise, as ClickHouse
    assert read_blocks(data) == expected(keeper, database, fmt)


def test_compress_1_with_zstd_when_asked(released, keeper, database):
    response, data = request(released, QUERY + " FORMAT CSV",
                             params={"compress": "1", "network_compression_method": "zstd"})
    assert response.status == 200 and data[16] == block_compression.ZSTD
    assert block_compression.decompress(data, limit=10**6) == expected(keeper, database, "CSV")


def test_jdbc_v2_request_replayed(released, keeper, database):
    """What clickhouse-java's client-v2 sends by default (``HttpAPIClientHelper.addQueryParams``, commit
    00e534d1: ``compress=1`` for the response and, when it compresses its request, ``decompress=1`` with
    the body in LZ4 blocks, ``LZ4Entity``): the query arrives compressed and the answer leaves compressed."""
    body = block_compression.compress((QUERY + " FORMAT RowBinaryWithNamesAndTypes").encode())
    conn = http.client.HTTPConnection("127.0.0.1", released.port, timeout=30)
    conn.request("POST", "/?" + urlencode({"compress": "1", "decompress": "1"}), body=body,
                 headers={**AUTH, "Content-Type": "text/plain"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    assert response.status == 200, data
    assert read_blocks(data) == expected(keeper, database, "RowBinaryWithNamesAndTypes")


def test_compressed_errors_and_bodies(released):
    # an error is written into the compressed stream, as ClickHouse does (the JDBC driver reads 400s so)
    response, data = request(released, "SELEC region FROM visits", params={"compress": "1"})
    assert response.status == 400 and read_blocks(data).startswith(b"Code: 62. DB::Exception")
    # a refused sign-in is answered before, uncompressed
    conn = http.client.HTTPConnection("127.0.0.1", released.port, timeout=30)
    conn.request("POST", "/?compress=1", body=b"SELECT 1", headers={"Authorization": "Basic " + base64.b64encode(
        b"ana:wrong").decode()})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    assert response.status == 401 and data.startswith(b"Code: 516")
    # a corrupted compressed body: ClickHouse's code and words, nothing run
    packed = bytearray(block_compression.compress(QUERY.encode()))
    packed[30] ^= 0xFF
    response, data = request(released, None, params={"decompress": "1"}, body_bytes=bytes(packed))
    assert response.status == 400 and data.startswith(b"Code: 40.") and b"CHECKSUM_DOESNT_MATCH" in data

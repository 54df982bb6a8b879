"""Issue 15 part 1: ``EXPLAIN DP`` over the ClickHouse HTTP interface answers one String column,
``explain``, in every output format the gateway serves — the same lines as the Python API's
``explain(...).describe()`` — and charges nothing (the ledger keeps its row count)."""

from __future__ import annotations

import base64
import csv
import http.client
import io
import json
import re
from urllib.parse import urlencode

import clickhouse_connect
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpch.server.formats import FORMATS

Q = "SELECT region, count(*) AS n, avg(spend) AS a FROM visits GROUP BY region SETTINGS dp_epsilon = 0.4"
AUTH = {"Authorization": "Basic " + base64.b64encode(b"ana:ana-pw").decode()}


def post(srv, sql: str, params: dict | None = None) -> tuple[http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    conn.request("POST", "/?" + urlencode(params or {}), body=sql.encode(), headers=AUTH)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response, data


def ledger_rows(keeper, database: str) -> int:
    return keeper.query_rows(f"SELECT count() FROM `{database}`.dpch_ledger")[0][0]


@pytest.fixture
def explained(serve, keeper, database, connect):
    """A gateway; the Python API's explanation lines of Q; a table holding them for ClickHouse to
    write in each format; and the ledger's row count after one real (charged) release."""
    srv = serve(cache_ttl=0)
    lines = connect(analyst="ana").explain(Q).describe().splitlines()
    assert len(lines) > 5 and any("emitted SQL" in line for line in lines)
    keeper.command(f"CREATE TABLE `{database}`.expected (i UInt32, explain String) ENGINE = MergeTree ORDER BY i")
    keeper.command(f"INSERT INTO `{database}`.expected SELECT number, arrayElement({{lines:Array(String)}}, "
                   "number + 1) FROM numbers({n:UInt32})", {"lines": lines, "n": len(lines)})
    # negative control for the ledger count: a real release adds exactly one row
    response, data = post(srv, Q)
    assert response.status == 200, data
    return srv, lines, ledger_rows(keeper, database)


def expected(keeper, database: str, fmt: str) -> bytes:
    return keeper.raw_query(f"SELECT explain FROM `{database}`.expected ORDER BY i", fmt)


def _drop_statistics(data: bytes) -> bytes:
    return re.sub(rb',\s*"statistics":\s*\{[^}]*\}', b"", data)


_COLUMNAR = {
    "Arrow": lambda b: pa.ipc.open_file(pa.BufferReader(b)).read_all(),
    "ArrowStream": lambda b: pa.ipc.open_stream(pa.BufferReader(b)).read_all(),
    "Parquet": lambda b: pq.read_table(pa.BufferReader(b)),
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_explain_in_every_format_is_the_python_explanation_and_free(explained, keeper, database, fmt):
    srv, lines, rows_before = explained
    response, data = post(srv, f"EXPLAIN DP {Q} FORMAT {fmt}")
    assert response.status == 200, data
    assert response.getheader("X-ClickHouse-Format") == fmt
    assert json.loads(response.getheader("X-Dpch-Cost")) == {"epsilon": 0.0, "delta": 0.0}
    want = expected(keeper, database, fmt)
    if fmt in _COLUMNAR:
        got_table, want_table = _COLUMNAR[fmt](data), _COLUMNAR[fmt](want)
        assert got_table.column_names == ["explain"]
        assert got_table.column("explain").to_pylist() == lines
        assert got_table.equals(want_table)
    else:
        # byte for byte what ClickHouse writes for the Python API's lines, in this format
        assert _drop_statistics(data) == _drop_statistics(want), fmt
    assert ledger_rows(keeper, database) == rows_before, "EXPLAIN DP wrote a ledger row"


def test_explain_lines_decoded_independently(explained, keeper, database):
    """Decoded with a parser of each format (not by comparing with ClickHouse): the same lines."""
    srv, lines, rows_before = explained
    _, data = post(srv, f"EXPLAIN DP {Q} FORMAT JSONEachRow")
    assert [json.loads(x) for x in data.splitlines()] == [{"explain": line} for line in lines]
    _, data = post(srv, f"EXPLAIN DP {Q} FORMAT JSON")
    body = json.loads(data)
    assert body["meta"] == [{"name": "explain", "type": "String"}] and [r["explain"] for r in body["data"]] == lines
    _, data = post(srv, f"EXPLAIN DP {Q}", params={"default_format": "CSVWithNames"})
    assert list(csv.reader(io.StringIO(data.decode()))) == [["explain"], *[[line] for line in lines]]
    _, data = post(srv, f"EXPLAIN DP {Q} FORMAT TabSeparatedRaw")
    assert data.decode().splitlines() == lines
    _, data = post(srv, f"EXPLAIN DP {Q} FORMAT PrettyCompact")
    text = data.decode()
    assert "explain" in text.splitlines()[0] and all(line.strip() in text for line in lines)
    # clickhouse-connect reads Native
    client = clickhouse_connect.get_client(host="127.0.0.1", port=srv.port, username="ana", password="ana-pw",
                                           database=database)
    result = client.query(f"EXPLAIN DP {Q}")
    assert result.column_names == ("explain",) and [t.name for t in result.column_types] == ["String"]
    assert [r[0] for r in result.result_rows] == lines
    client.close()
    assert ledger_rows(keeper, database) == rows_before, "EXPLAIN DP wrote a ledger row"


def test_ledger_count_sees_a_charged_release(explained, keeper, database):
    """Negative control: the ledger count used above moves when something is charged."""
    srv, _, rows_before = explained
    response, data = post(srv, Q.replace("0.4", "0.3") + " FORMAT JSONEachRow")
    assert response.status == 200, data
    assert ledger_rows(keeper, database) == rows_before + 1

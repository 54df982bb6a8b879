"""Issue 12 on `dpch serve`, through real HTTP: EXPLAIN DP has no release-cache entry of its own
and never takes its query's (defect 7), metadata rewrites are trees rendered once (7), metadata
queries are allowlisted and stopped by ClickHouse's own limits (8), and bad requests get clear
400s, never a 500 or a dump of internals (9)."""

from __future__ import annotations

import base64
import http.client
import json
import re
import threading
import time
from urllib.parse import urlencode

import pytest

import dpch
from dpch.errors import KINDS

AUTH = {"Authorization": "Basic " + base64.b64encode(b"ana:ana-pw").decode()}
BOB = {"Authorization": "Basic " + base64.b64encode(b"bob:bob-pw").decode()}
COUNT = "SELECT count(*) AS n FROM visits"


def post(srv, body: bytes | str | None, *, path: str = "/", params: dict | None = None,
         headers: dict | None = None) -> tuple[http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    payload = body.encode() if isinstance(body, str) else body
    conn.request("POST", path + ("?" + urlencode(params) if params else ""), body=payload,
                 headers={**AUTH, **(headers or {})})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response, data


def _code(response) -> str | None:
    return response.getheader("X-ClickHouse-Exception-Code")


# -- defect 7: EXPLAIN DP and the release cache ---------------------------------------------------


def test_explain_over_http_answers_string_rows_in_the_requested_format(serve):
    srv = serve(cache_ttl=300)
    response, data = post(srv, f"EXPLAIN DP {COUNT} FORMAT JSONEachRow")
    assert response.status == 200, data
    rows = [json.loads(line) for line in data.splitlines()]
    assert rows and all(list(r) == ["explain"] and isinstance(r["explain"], str) for r in rows), rows
    assert any("ε" in r["explain"] or "epsilon" in r["explain"].lower() for r in rows), rows
    response, data = post(srv, f"EXPLAIN DP {COUNT} FORMAT TabSeparatedWithNamesAndTypes")
    assert response.status == 200, data
    assert data.splitlines()[:2] == [b"explain", b"String"]
    assert json.loads(response.getheader("X-Dpch-Cost")) == {"epsilon": 0.0, "delta": 0.0}


def test_explain_never_poisons_its_querys_cache_entry_over_http(serve):
    srv = serve(cache_ttl=300)
    assert post(srv, f"EXPLAIN DP {COUNT}")[0].status == 200
    response, data = post(srv, COUNT + " FORMAT JSONEachRow")
    assert response.status == 200, data
    assert response.getheader("X-Dpch-Cache") == "miss", "the query must not be served the explanation"
    assert json.loads(response.getheader("X-Dpch-Cost"))["epsilon"] > 0
    (row,) = [json.loads(line) for line in data.splitlines()]
    assert list(row) == ["n"] and int(row["n"]) > 1000, row  # ~7k visits: a count, not explain text
    # explained after the release: still the explanation, not the cached release
    response, data = post(srv, f"EXPLAIN DP {COUNT} FORMAT JSONEachRow")
    assert response.status == 200 and all(list(json.loads(x)) == ["explain"] for x in data.splitlines())
    response, _ = post(srv, COUNT)
    assert response.getheader("X-Dpch-Cache") == "hit"  # the release's own entry is intact


def test_explain_and_query_are_separate_over_dpch_protocol(serve, database):
    srv = serve(cache_ttl=300)
    with dpch.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="ana", password="ana-pw") as session:
        explained = session.query(f"EXPLAIN DP {COUNT}")
        assert explained.columns == ["explain"] and explained.cost.epsilon == 0.0
        released = session.query(COUNT)
        assert released.columns == ["n"] and released.cost.epsilon > 0
        assert isinstance(released.rows[0][0], int) and released.rows[0][0] > 1000
        again = session.query(f"EXPLAIN DP {COUNT}")
        assert again.columns == ["explain"] and all(isinstance(r[0], str) for r in again.rows)


# -- defect 7: no placeholder text lands in the client's literals ---------------------------------


@pytest.mark.parametrize("literal", ["__dpch_system_0", "__dpch_system_1", "it's \\ a 'quote'",
                                     "format(JSONEachRow, 'x', '')"])
def test_metadata_literals_reach_clickhouse_as_written(serve, literal):
    srv = serve()
    quoted = "'" + literal.replace("\\", "\\\\").replace("'", "\\'") + "'"
    response, data = post(srv, f"SELECT {quoted} AS s, count() AS n FROM system.one "
                               f"WHERE {quoted} != '' FORMAT JSONEachRow")
    assert response.status == 200, data
    assert json.loads(data) == {"s": literal, "n": 1}
    response, data = post(srv, f"SELECT name FROM system.tables WHERE name != {quoted} "
                               "AND database = currentDatabase() FORMAT JSONEachRow")
    assert response.status == 200, data
    assert [json.loads(x)["name"] for x in data.splitlines()] == ["visits"]


@pytest.mark.parametrize(("statement", "names"), [
    ("SHOW TABLES LIKE 'vis%'", ["visits"]),
    ("SHOW TABLES NOT LIKE 'vis%'", []),
    ("SHOW TABLES ILIKE 'VIS%'", ["visits"]),
    ("SHOW TABLES LIKE 'x\\' OR 1 = 1 OR name = \\''", []),  # the pattern stays one literal
    ("SHOW TABLES LIKE '__dpch_system_0'", []),
])
def test_show_patterns_are_literals_in_the_tree(serve, statement, names):
    srv = serve()
    response, data = post(srv, statement + " FORMAT JSONEachRow")
    assert response.status == 200, data
    assert [json.loads(x)["name"] for x in data.splitlines()] == names


def test_bound_parameters_are_substituted_only_where_clickhouse_would(serve):
    srv = serve(users={"ana": {"password": "ana-pw", "epsilon": 1000}}, cache_ttl=0)
    param = {"param_r": "north"}
    response, data = post(srv, "SELECT '{r:String}' AS s, {r:String} AS t FROM system.one -- {r:String}\n"
                               "FORMAT JSONEachRow", params=param)
    assert response.status == 200, data
    assert json.loads(data) == {"s": "{r:String}", "t": "north"}

    def count(where: str) -> float:
        response, data = post(srv, f"SELECT count(*) AS n FROM visits WHERE {where} "
                                   "SETTINGS dp_epsilon = 100 FORMAT JSONEachRow", params=param)
        assert response.status == 200, data
        return float(json.loads(data)["n"])

    # ε 100: the noise scale is (cap 10)/100 = 0.1, so the counts below are exact to ±3
    north = count("region = {r:String}")
    assert north > 100
    assert count("region = '{r:String}'") < 5, "a literal '{r:String}' names no region"
    assert abs(count("region = {r:String} AND region != '{r:String}'") - north) < 5


# -- defect 8: metadata allowlist and limits --------------------------------------------------------


@pytest.mark.parametrize(("sql", "named"), [
    ("SELECT count() FROM system.one ARRAY JOIN [1, 2, 3] AS a ARRAY JOIN [1, 2, 3] AS b", "ARRAY JOIN"),
    ("SELECT arrayJoin([1, 2, 3]) AS a", "arrayJoin"),
    ("SELECT count() FROM system.tables WHERE name IN (SELECT arrayJoin([1, 2]))", "arrayJoin"),
    ("SELECT * FROM system.one, numbers(10)", "table function"),
    ("SELECT uniq(name) FROM system.tables", "uniq"),
    ("SELECT sum(x) OVER () FROM system.one", "window"),
])
def test_metadata_row_generators_are_refused_with_a_clear_error(serve, sql, named):
    srv = serve()
    response, data = post(srv, sql)
    assert response.status == 403 and _code(response) == "497", data
    assert named.encode() in data, data
    assert b"approx_distinct" not in data and b"Explode" not in data


def test_heavy_metadata_query_is_stopped_by_clickhouse_and_a_release_completes_meanwhile(serve):
    """A cross join of system.columns 14 times (9 rows each: 2·10¹³ rows) would hold the shared
    engine for hours; ClickHouse's max_execution_time stops it, so bob's release completes."""
    srv = serve(metadata_timeout=1, cache_ttl=0)
    gateway = srv.gateway
    started = threading.Event()
    original = gateway.metadata

    def observed(*args, **kwargs):
        started.set()
        return original(*args, **kwargs)

    gateway.metadata = observed  # instruments (does not replace) the metadata path
    heavy = ("SELECT count() FROM " + ", ".join(f"system.columns AS c{i}" for i in range(14))
             + " FORMAT JSONEachRow")
    outcome: dict = {}

    def run_heavy():
        outcome["heavy"] = post(srv, heavy)

    thread = threading.Thread(target=run_heavy)
    thread.start()
    assert started.wait(60), "the metadata query never started"
    t0 = time.monotonic()
    response, data = post(srv, COUNT + " FORMAT JSONEachRow", headers=BOB)
    waited = time.monotonic() - t0
    thread.join(120)
    assert response.status == 200, data
    assert int(json.loads(data)["n"]) > 1000
    assert waited < 30, f"bob's release waited {waited:.1f} s behind a metadata query (limit 1 s)"
    heavy_response, heavy_body = outcome["heavy"]
    assert _code(heavy_response) == "159", heavy_body
    assert b"stopped after the limit of 1 s" in heavy_body and b"format(" not in heavy_body, heavy_body


# -- defect 9: malformed requests are 400s -----------------------------------------------------------


@pytest.mark.parametrize(("endpoint", "body", "field"), [
    ("release", b"{not json", b"not valid JSON"),
    ("release", b"\xff\xfe", b"not valid JSON"),
    ("release", b"[1, 2]", b"not a JSON array"),
    ("release", b'"SELECT 1"', b"not a JSON string"),
    ("release", b'{"sql": 5}', b"'sql' must be a string"),
    ("release", b'{"sql": "SELECT count(*) FROM visits", "options": [1]}', b"'options' must be an object"),
    ("release", b'{"sql": "SELECT count(*) FROM visits", "options": {"epsilon": [1]}}', b"'epsilon'"),
    ("explain", b'{"sql": ["SELECT 1"]}', b"'sql' must be a string"),
    ("budget", b'{"recent": "x"}', b"'recent' must be an integer"),
    ("budget", b'{"recent": true}', b"'recent' must be an integer"),
    ("budget", b'{"recent": 100000000}', b"'recent' must be between 0 and 1000"),
    ("refine", b'{"accuracy": "tight"}', b"'accuracy' must be a number"),
    ("release", b'{"sql": "SELECT 1", "sql2": 1}', b"unknown field 'sql2'"),
])
def test_malformed_dpch_bodies_are_400_naming_the_problem(serve, endpoint, body, field):
    srv = serve()
    response, data = post(srv, body, path=f"/dpch/v1/{endpoint}")
    assert response.status == 400 and _code(response) == "36", data
    assert field in data, data


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT $__timeInterval(visit_date) AS t, count(*) FROM visits GROUP BY t", b"$__timeInterval"),
    ("SELECT count(*) FROM visits WHERE $__timeFilter(visit_date)", b"$__timeFilter"),
    ("SELECT count(*) FROM visits WHERE region = 'north", b"quote"),
    ("SELECT name FROM system.tables WHERE name = 'visits", b"quote"),
])
def test_tokenizer_failures_are_syntax_errors(serve, sql, expected):
    srv = serve()
    response, data = post(srv, sql)
    assert response.status == 400 and _code(response) == "62", data
    assert expected in data, data
    body = json.dumps({"sql": sql}).encode()
    for endpoint in ("release", "explain"):
        response, data = post(srv, body, path=f"/dpch/v1/{endpoint}")
        assert response.status == 400 and _code(response) == "62", data


# -- defect 9: no internals in any message ------------------------------------------------------------

#: text that must never appear in an answer: sqlglot's names, Python and ClickHouse internals
FORBIDDEN = [b"sqlglot", b"<class", b"Traceback", b"exp.", b"Expression", b"format(JSONEachRow",
             b"while processing query", b"Stack trace", b"DB::Exception: Code", b"approx_distinct",
             b"Anonymous", b"Explode", b"Error tokenizing", b"TokenType", b"<Token", b"\n"]
_SHAPE = re.compile(rb"^Code: \d+\. DB::Exception: (.*)\. \([A-Z_]+\) \(version [0-9.]+\)\n$", re.DOTALL)

BAD_QUERIES = [
    "SELECT $__timeInterval(visit_date) FROM visits",
    "SELECT 'open",
    "SELECT count() FROM system.one ARRAY JOIN range(10) AS a",
    "SELECT uniq(name) FROM system.tables",
    "SELECT nosuchcolumn FROM system.tables",
    "SELECT nosuchfunction(name) FROM system.tables",
    "SELECT name + 1 FROM system.tables",
    "SELECT count() FROM " + ", ".join(f"system.columns AS c{i}" for i in range(14)),
    "SELECT * FROM system.one, numbers(10)",
    "SHOW GRANTS",
    "SELECT count(*) FROM nosuchtable",
]
BAD_BODIES = [("release", b"{"), ("release", b"[]"), ("release", b'{"sql": 1}'),
              ("explain", b'{"sql": "SELECT \'x"}'), ("budget", b'{"recent": "ten"}'),
              ("release", b'{"sql": "SELECT count(*) FROM visits", "options": {"x": 1}}')]


def test_no_error_body_names_internals(serve):
    srv = serve(metadata_timeout=0.5)
    answers = [post(srv, sql) for sql in BAD_QUERIES]
    answers += [post(srv, body, path=f"/dpch/v1/{endpoint}") for endpoint, body in BAD_BODIES]
    for (response, data), what in zip(answers, BAD_QUERIES + [b for _, b in BAD_BODIES], strict=True):
        assert response.status != 500 or _code(response) == "159", (what, data)
        assert response.status >= 400, (what, data)
        text = _error_text(response, data)
        leaked = [f for f in FORBIDDEN if f in text]
        assert not leaked, (what, leaked, data)
        assert len(data) < 600, (what, data)


def _error_text(response, data: bytes) -> bytes:
    """The words of an error answer: ClickHouse's shape on ``/``; on ``/dpch/v1/`` dpch's JSON, whose
    kind is a row of the kinds table and whose code is the header's."""
    if response.getheader("Content-Type", "").startswith("application/json"):
        error = json.loads(data)["error"]
        assert error["kind"] in KINDS and str(error["code"]) == _code(response), data
        return (error["message"] + " " + (error["hint"] or "")).encode()
    shape = _SHAPE.match(data)
    assert shape, data
    return shape.group(1)


#: errors of the DP path whose text comes from dpch/sql and calibration (issue 12, defect 9): they
#: are the lead's to fix there; strict xfail, so the fix shows up here as a pass to unmark
DP_PATH_QUERIES = [
    pytest.param("SELECT uniq(region) FROM visits", id="uniq-named-approx_distinct"),
    pytest.param("SELECT region, count(*) AS n FROM visits GROUP BY region HAVING region > 2", id="having-typeerror"),
    pytest.param("SELECT count(*) FROM visits SETTINGS dp_epsilon = 1e-320", id="tiny-epsilon"),
    pytest.param("SELECT count(*) FROM visits WHERE age > 'x'", id="type-mismatch"),
    pytest.param("SELECT spend FROM visits", id="not-aggregated"),
    pytest.param("SELECT count(*) FROM visits WHERE", id="empty-where"),  # sqlglot's class in the text
    pytest.param("SELECT count(*) FROM (", id="open-subquery"),  # sqlglot's token in the text
    pytest.param("SELECT region, count(*) FROM visits GROUP BY region HAVING", id="empty-having"),
]


@pytest.mark.parametrize("sql", DP_PATH_QUERIES)
def test_dp_path_errors_name_no_internals(serve, sql):
    srv = serve()
    response, data = post(srv, sql)
    assert 400 <= response.status < 500, data
    shape = _SHAPE.match(data)
    assert shape, data
    leaked = [f for f in FORBIDDEN if f in shape.group(1)]
    assert not leaked, (leaked, data)

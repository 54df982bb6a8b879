"""Replays of the exact metadata SQL that BI tools and drivers send (taken from their source; each
fixture in tests/server/replays/ cites repository, commit, file and lines), over HTTP against
`dpch serve`: each is answered with the right column names and the right rows — only tables that
have a policy (never the unannotated table or dpch's ledger), and only public metadata."""

from __future__ import annotations

import base64
import json
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

REPLAYS = Path(__file__).parent / "replays"
FIXTURES = sorted(REPLAYS.glob("*.toml"))


def _cases() -> list:
    cases = []
    for path in FIXTURES:
        for query in tomllib.loads(path.read_text())["query"]:
            cases.append(pytest.param(query, id=f"{path.stem}:{query['name']}"))
    return cases


def post(port: int, sql: str, *, user: str = "ana", password: str = "ana-pw", fmt: str = "JSONCompact",
         **params: str) -> tuple[int, bytes, dict[str, str]]:
    """POSTs ``sql`` as a ClickHouse HTTP client does; (status, body, headers)."""
    query = urllib.parse.urlencode({"default_format": fmt, **params})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/?{query}", data=sql.encode(), method="POST")
    request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


def answer(port: int, sql: str) -> tuple[list[str], list[str], list[list]]:
    """(column names, column types, rows) of a query that must succeed."""
    status, body, _ = post(port, sql)
    assert status == 200, body.decode()[:2000]
    data = json.loads(body)
    return [m["name"] for m in data["meta"]], [m["type"] for m in data["meta"]], data["data"]


def _text(value) -> str:
    return "" if value is None else str(value)


@pytest.mark.parametrize("query", _cases())
def test_replayed_metadata_query_is_answered_with_the_right_rows(serve, small_visits, query):
    srv = serve()
    sql = query["sql"].replace("{db}", small_visits)
    names, types, rows = answer(srv.port, sql)
    assert names == query["columns"]
    for column, expected in query.get("types", {}).items():
        assert types[names.index(column)] == expected, column
    for column, expected in query.get("expect", {}).items():
        got = [_text(r[names.index(column)]) for r in rows]
        assert got == [e.replace("{db}", small_visits) for e in expected], column
    for column, expected in query.get("contains", {}).items():
        got = {_text(r[names.index(column)]) for r in rows}
        assert set(expected) <= got, (column, set(expected) - got)
    for column, refused in query.get("excludes", {}).items():
        got = {_text(r[names.index(column)]) for r in rows}
        assert not got & set(refused), (column, got & set(refused))
    flat = json.dumps(rows)
    assert "unannotated" not in flat and "dpch_" not in flat  # no table without a policy, no ledger


def test_every_fixture_cites_its_source():
    for path in FIXTURES:
        text = path.read_text()
        assert "commit " in text and "repo " in text, path.name
        for query in tomllib.loads(text)["query"]:
            assert query.get("lines") and (query.get("path") or "file " in text), (path.name, query["name"])

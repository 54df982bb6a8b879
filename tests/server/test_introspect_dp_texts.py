"""The gateway remembers texts it found to be for the DP path and does not parse them again; that
decision depends on the text alone, so a remembered text is still sent to the DP path under any
catalog, and an introspection text is never remembered."""

from __future__ import annotations

import pytest

from dpch.server import introspection
from dpch.server.errors import GatewayError
from dpch.server.introspection import Catalog, introspect


def _catalog(database: str = "db", tables: tuple[str, ...] = ("visits",)) -> Catalog:
    return Catalog(user="ana", database=database, databases=[database],
                   tables=lambda db: [(t, "MergeTree", "", "", "", [("x", "Float64", "")]) for t in tables],
                   settings=lambda: [])


def test_a_dp_text_is_parsed_once(monkeypatch):
    sql = "SELECT count(*) FROM visits WHERE x > 41 -- remembered"
    parses = []
    original = introspection.sqlglot.parse_one
    monkeypatch.setattr(introspection.sqlglot, "parse_one", lambda *a, **k: parses.append(a) or original(*a, **k))
    assert introspect(sql, _catalog()) is None
    assert introspect(sql, _catalog("other", ())) is None  # any catalog: the decision is the text's
    assert len(parses) == 1


def test_introspection_texts_are_answered_every_time():
    sql = "SELECT name FROM system.tables -- never remembered"
    for _ in range(2):
        found = introspect(sql, _catalog())
        assert found is not None and found.kind == "introspection:tables"


def test_a_refused_metadata_statement_is_refused_every_time():
    for _ in range(2):
        with pytest.raises(GatewayError):
            introspect("SHOW GRANTS", _catalog())

"""``[server] ledger_fsync`` in the gateway's TOML: a boolean, absent by default (the ledger table keeps
its setting)."""

from __future__ import annotations

import pytest

from dpch.errors import ConfigError
from dpch.server.config import ServerConfig


def test_ledger_fsync_is_a_boolean_and_absent_by_default():
    assert ServerConfig.from_mapping({}).ledger_fsync is None
    assert ServerConfig.from_mapping({"server": {"ledger_fsync": True}}).ledger_fsync is True
    assert ServerConfig.from_mapping({"server": {"ledger_fsync": False}}).ledger_fsync is False
    with pytest.raises(ConfigError, match="ledger_fsync must be true or false"):
        ServerConfig.from_mapping({"server": {"ledger_fsync": "yes"}})


def _engine_full(store_dsn: str, database: str) -> str:
    from dpch.store.engine import Engine

    with Engine(store_dsn, database=database) as engine:
        rows = engine.query_rows("SELECT engine_full FROM system.tables WHERE database = {d:String} "
                                 "AND name = 'dpch_ledger'", {"d": database})
    return rows[0][0] if rows else ""


@pytest.mark.parametrize("fsync", [True, False])
def test_the_gateway_passes_ledger_fsync_to_its_sessions(serve, store_dsn, small_visits, fsync, monkeypatch):
    import base64
    import http.client

    monkeypatch.delenv("DPCH_LEDGER_FSYNC", raising=False)
    server = serve(ledger_fsync=fsync)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    auth = "Basic " + base64.b64encode(b"ana:ana-pw").decode()
    conn.request("POST", "/", body=b"SELECT count(*) FROM visits SETTINGS dp_epsilon = 0.1",
                 headers={"Authorization": auth})
    assert conn.getresponse().status == 200
    conn.close()
    assert ("fsync_after_insert = 1" in _engine_full(store_dsn, small_visits)) is fsync

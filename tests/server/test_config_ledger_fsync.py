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

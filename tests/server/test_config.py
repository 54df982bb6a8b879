"""Server config and FORMAT/parameter handling (the docker configs: tests/test_docker_files.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpch.errors import ConfigError
from dpch.server.config import ServerConfig
from dpch.server.errors import GatewayError
from dpch.server.formats import split_format
from dpch.server.gateway import bind_parameters

ROOT = Path(__file__).resolve().parents[2]


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="unknown \\[server\\] key"):
        ServerConfig.from_mapping({"server": {"prot": 1}})
    with pytest.raises(ConfigError, match="users.x"):
        ServerConfig.from_mapping({"users": {"x": {"pasword": "a"}}})
    config = ServerConfig.from_mapping({"server": {"database": "b", "databases": ["a", "b"]},
                                        "users": {"u": {"password_sha256": "AB"}}})
    assert config.databases == ("b", "a") and config.users["u"].analyst == "u"


def test_split_format_and_parameters():
    assert split_format("SELECT 1\n FORMAT Native") == ("SELECT 1", "Native")
    assert split_format("SELECT 1 FORMAT JSON SETTINGS dp_epsilon = 1;") == ("SELECT 1 SETTINGS dp_epsilon = 1", "JSON")
    assert split_format("SELECT 'FORMAT' AS f") == ("SELECT 'FORMAT' AS f", None)
    sql = bind_parameters("SELECT count(*) FROM t WHERE a > {age:UInt8} AND r = {r:String}", {"age": "40", "r": "n'o"})
    assert sql == "SELECT count(*) FROM t WHERE a > 40 AND r = 'n\\'o'"
    with pytest.raises(GatewayError, match="not a UInt8"):
        bind_parameters("SELECT {a:UInt8}", {"a": "1; DROP"})

"""`dpch serve --tcp-port 0` as a process: both listeners start, clickhouse-driver is answered, SIGTERM stops
both (an idle native connection does not hold the process), and ``tcp_port`` is read from ``[server]``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest
from clickhouse_driver import Client

from dpch.errors import ConfigError
from dpch.server.config import ServerConfig


def test_serve_with_a_tcp_port_answers_native_clients_and_stops_on_sigterm(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpch.cli.main", "--dsn", f"chdb://{tmp_path}/store", "serve", "--host", "127.0.0.1",
         "--port", "0", "--tcp-port", "0", "--user", "ana:pw"],
        stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert "http://127.0.0.1:" in proc.stderr.readline()
        banner = proc.stderr.readline()
        match = re.search(r"native protocol 127\.0\.0\.1:(\d+)", banner)
        assert match, banner
        client = Client(host="127.0.0.1", port=int(match.group(1)), user="ana", password="pw", connect_timeout=30)
        rows = client.execute("SELECT version() AS v, currentUser() AS u")
        assert rows[0][1] == "ana"
        proc.send_signal(signal.SIGTERM)  # the client's connection is open and idle
        assert proc.wait(timeout=60) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_tcp_port_in_the_server_config():
    assert ServerConfig.from_mapping({"server": {"tcp_port": 9000}}).tcp_port == 9000
    assert ServerConfig.from_mapping({"server": {}}).tcp_port is None
    with pytest.raises(ConfigError, match="tcp_port must not be negative"):
        ServerConfig.from_mapping({"server": {"tcp_port": -1}})
    with pytest.raises(ConfigError, match="tcp_port must be a number"):
        ServerConfig.from_mapping({"server": {"tcp_port": "nine"}})

"""`dpch serve` as a process of its own: binds a free loopback port, answers, stops on SIGTERM."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import signal
import subprocess
import sys


def test_serve_command_and_graceful_shutdown(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpch.cli.main", "--dsn", f"chdb://{tmp_path}/store", "serve", "--host", "127.0.0.1",
         "--port", "0", "--user", "ana:pw"],
        stderr=subprocess.PIPE, text=True, env=env)
    try:
        banner = proc.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", banner)
        assert match, banner
        console = proc.stderr.readline()  # the web console's address, on the same port
        assert f"console http://127.0.0.1:{match.group(1)}/play" in console, console
        conn = http.client.HTTPConnection("127.0.0.1", int(match.group(1)), timeout=30)
        auth = {"Authorization": "Basic " + base64.b64encode(b"ana:pw").decode()}
        conn.request("POST", "/", body=b"SELECT version() AS v, currentUser() AS u FORMAT JSONEachRow", headers=auth)
        response = conn.getresponse()
        assert response.status == 200 and json.loads(response.read())["u"] == "ana"
        conn.request("POST", "/", body=b"SELECT count(*) FROM nowhere", headers=auth)
        response = conn.getresponse()
        assert response.getheader("X-ClickHouse-Exception-Code") == "60", response.read()
        response.read()  # the keep-alive connection stays open while the server stops
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        rest = proc.stderr.read()
        assert "SIGTERM" in rest and "stopped" in rest
        access = [json.loads(line) for line in rest.splitlines() if line.startswith("{")]
        assert [a["status"] for a in access] == [200, 404] and access[0]["user"] == "ana"
    finally:
        if proc.poll() is None:
            proc.kill()

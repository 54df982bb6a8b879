"""The official Node.js client, @clickhouse/client 1.23.1 (npm), against `dpch serve` — the tool
itself, not a replay: it always sends chunked request bodies on keep-alive connections, so before
the gateway read them its second query on a connection failed and a wrong password was never
reported (issue 15). Skipped, with the reason, where node or npm is missing or the package cannot
be installed (no network)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

VERSION = "1.23.1"
SCRIPT = """
import { createClient } from '@clickhouse/client'
const [url, password] = process.argv.slice(2)
const client = createClient({ url, username: 'ana', password })
const out = []
try {
  for (let i = 0; i < 3; i++) {  // three queries on the client's keep-alive connection
    const rs = await client.query({ query: 'SELECT count(*) AS n FROM visits SETTINGS dp_epsilon = 0.5',
                                    format: 'JSONEachRow' })
    out.push(await rs.json())
  }
} catch (e) { out.push({ error: String(e.code ?? ''), message: String(e.message).slice(0, 300) }) }
await client.close()
console.log(JSON.stringify(out))
"""


@pytest.fixture(scope="session")
def node_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    root = tmp_path_factory.mktemp("node-client")
    (root / "package.json").write_text(json.dumps({"type": "module", "private": True}))
    install = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", f"@clickhouse/client@{VERSION}"],
                             cwd=root, capture_output=True, text=True, timeout=300)
    if install.returncode != 0:
        pytest.skip(f"npm could not install @clickhouse/client@{VERSION}: {install.stderr.strip()[:200]}")
    (root / "q.mjs").write_text(SCRIPT)
    return root


def _run(node_client: Path, port: int, password: str) -> list:
    out = subprocess.run(["node", "q.mjs", f"http://127.0.0.1:{port}", password], cwd=node_client,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-1000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_node_client_queries_on_a_keep_alive_connection(serve, node_client):
    srv = serve(cache_ttl=0)
    results = _run(node_client, srv.port, "ana-pw")
    assert len(results) == 3 and all(len(r) == 1 and set(r[0]) == {"n"} for r in results), results


def test_the_node_client_reports_a_wrong_password(serve, node_client):
    srv = serve(cache_ttl=0)
    (failure,) = _run(node_client, srv.port, "wrong")
    assert failure["error"] == "516" and "Authentication failed" in failure["message"], failure

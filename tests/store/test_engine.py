"""Engine: opening and closing embedded stores."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_failed_open_releases_the_embedded_store(tmp_path):
    """A failed ``Engine()`` (bad database name) must not keep the embedded client: the same
    store, and another one, open afterwards in the same process. Run in a fresh process, since
    chdb holds one store per process and the test session's store stays open."""
    script = textwrap.dedent(f"""
        from dpch.errors import ConfigError
        from dpch.store.engine import Engine

        first, second = "chdb://{tmp_path / 'a'}", "chdb://{tmp_path / 'b'}"
        try:
            Engine(first, database="not a name")
        except ConfigError as exc:
            assert "not a plain identifier" in str(exc), exc
        else:
            raise AssertionError("a bad database name was accepted")
        with Engine(second, database="db") as engine:  # another store: the failed one is closed
            assert engine.query_rows("SELECT 1") == [(1,)]
        with Engine(first, database="db") as engine:   # the same store, with a good name
            assert engine.list_tables() == []
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")

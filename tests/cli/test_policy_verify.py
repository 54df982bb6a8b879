"""``dpch policy verify TABLE``: the owner's verification of a table's rows per unit, through the CLI
(each command a new process on its own embedded store, as a data owner runs it)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def dpch(store, *args, check=True):
    env = {k: v for k, v in os.environ.items() if k != "DPCH_ALLOW_FIXED_SEED"}
    proc = subprocess.run([sys.executable, "-m", "dpch.cli.main", "--dsn", f"chdb://{store}", *args],
                          capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _load(tmp_path, store, name: str, rows_per_unit) -> None:
    csv = tmp_path / f"{name}.csv"
    lines = ["uid,x"] + [f"{i},{(i + j) % 10}" for i in range(50) for j in range(rows_per_unit(i))]
    csv.write_text("\n".join(lines) + "\n")
    dpch(store, "load", str(csv), "--table", name, "--privacy-unit", "uid", "--max-rows-per-unit", "2",
         "--bounds", "x=0:10")


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    _load(tmp_path, path, "within", lambda i: 1 + i % 2)  # 1 or 2 rows per unit: within the bound
    _load(tmp_path, path, "over", lambda i: 3 if i == 7 else 1)  # unit 7 has 3 rows
    return path


def _checksums(store) -> list[str]:
    code = ("import sys; from dpch.store.engine import Engine; e = Engine(sys.argv[1]); "
            "print('\\n'.join(str(r[0]) for r in e.query_rows(\"SELECT hash_of_all_files FROM system.parts "
            "WHERE table = 'within'\"))); e.close()")
    out = subprocess.run([sys.executable, "-c", code, f"chdb://{store}"], capture_output=True, text=True,
                         timeout=120, check=True)
    return out.stdout.split()


def test_verify_reports_what_was_checked_and_the_cap_is_skipped(store):
    assert "rows per unit verified" not in dpch(store, "policy", "show", "within").stdout
    out = dpch(store, "policy", "verify", "within").stdout
    assert "checked 75 rows of 50 units (uid)" in out
    assert "no unit has more than max_rows_per_unit = 2 rows" in out
    assert "Any later write" in out and "brings the cap" in out and "dpch policy verify within" in out
    shown = dpch(store, "policy", "show", "within").stdout
    assert "rows per unit verified (current: the cap is skipped)" in shown
    explained = dpch(store, "explain", "SELECT sum(x) FROM within").stdout
    assert "__verified" in explained  # the guarded form
    checksums = _checksums(store)
    assert checksums
    for text in (out, shown, explained):
        assert not any(c in text for c in checksums)


def test_verify_refuses_a_table_over_the_bound(store):
    proc = dpch(store, "policy", "verify", "over", check=False)
    assert proc.returncode == 1
    assert "more than max_rows_per_unit = 2 rows; the cap stays" in proc.stderr
    assert "rows per unit verified" not in dpch(store, "policy", "show", "over").stdout


def test_verify_refuses_a_table_without_a_cap_or_policy(store):
    proc = dpch(store, "policy", "verify", "nosuch", check=False)
    assert proc.returncode == 1 and "does not exist" in proc.stderr

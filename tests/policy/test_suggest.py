"""``dpch policy suggest`` (issue 27, item 3): the owner's exact report of rows per unit, groups per unit and
rows per group, and the share of rows each candidate bound drops, checked against a reference computed
here from the same rows."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter, defaultdict

import numpy as np
import pytest

from dpch.errors import PolicyError
from dpch.policy.suggest import CAP_CANDIDATES, PER_GROUP_CANDIDATES, suggest


def _rows() -> list[tuple[int, int]]:
    rng = random.Random(9)
    return [(u, rng.randrange(1, 13)) for u in range(200) for _ in range(rng.choice([1, 1, 2, 3, 8, 30]))]


@pytest.fixture
def session(connect):
    s = connect(analyst="owner")
    engine = s.engine
    engine.command(f"CREATE TABLE {engine.table('v')} (uid UInt32, month UInt8) ENGINE = MergeTree ORDER BY uid "
                   "COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=4'")
    engine.insert("v", _rows(), ["uid", "month"])
    engine.command(f"CREATE TABLE {engine.table('one')} (uid UInt32) ENGINE = MergeTree ORDER BY uid "
                   "COMMENT 'dp: privacy_unit=uid, unique_units'")
    s.policy.reload()
    return s


def test_rows_per_unit_and_the_row_caps_drop(session):
    report = suggest(session.engine, session.policy, "v")
    per_unit = Counter(u for u, _ in _rows())
    counts = np.array(sorted(per_unit.values()))
    total = int(counts.sum())
    assert (report.units, report.rows) == (len(per_unit), total)
    assert report.rows_per_unit[-1] == counts.max()
    assert report.rows_per_unit[0] == pytest.approx(np.quantile(counts, 0.5, method="inverted_cdf"), abs=1)
    expected = {k: sum(max(0, n - k) for n in counts) / total for k in {*CAP_CANDIDATES, 4}}
    assert dict(report.caps) == pytest.approx(expected)
    assert report.cap == 4 and "← max_rows_per_unit now" in report.describe()
    assert report.by is None and "grouped by" not in report.describe()


def test_groups_per_unit_and_the_per_group_bounds_drop(session):
    report = suggest(session.engine, session.policy, "v", by="month")
    cells = Counter(_rows())
    by_unit = defaultdict(list)
    for (u, _), n in cells.items():
        by_unit[u].append(n)
    total = sum(cells.values())
    assert report.groups_per_unit[-1] == max(len(v) for v in by_unit.values())
    assert report.rows_per_group[-1] == max(cells.values())
    shares = {(g, c): share for g, c, share in report.per_group}
    assert {c for _, c in shares} == set(PER_GROUP_CANDIDATES)
    for (g, c), share in shares.items():
        kept = sum(sum(min(n, c) for n in sorted(v, reverse=True)[:g]) for v in by_unit.values())
        assert share == pytest.approx(1 - kept / total), (g, c)
    text = report.describe()
    assert "grouped by month" in text and "ℓ2" in text and "at random" in text


def test_refusals(session):
    with pytest.raises(PolicyError, match="several rows per unit"):
        suggest(session.engine, session.policy, "one")


def test_the_cli_is_the_owners_only(tmp_path):
    """Through a gateway DSN the command is refused (the owner runs it on the store itself)."""
    proc = subprocess.run([sys.executable, "-m", "dpch.cli.main", "--dsn", "dpch://127.0.0.1:1", "policy", "suggest",
                           "v"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "for the data owner" in proc.stderr

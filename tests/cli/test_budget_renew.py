"""``dpch budget set --renew daily|weekly|monthly [--lifetime-epsilon E]`` and what ``dpch budget``
and ``dpch budget list`` then say: the guarantee per period, and over the lifetime — unbounded, or
capped at E (the wall clock here is the real one; periods themselves are tested with an injected
clock in tests/accounting/test_renewal.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from click.testing import CliRunner

from dpch.accounting.periods import period_of
from dpch.cli.main import cli
from tests.helpers import make_table

COLUMNS = "uid UInt64, x Float64 COMMENT 'dp: bounds=[0, 1]'"


def run(store_dsn, database, *args, code=0):
    result = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, *args])
    assert result.exit_code == code, result.output
    return result.output


def test_renewing_budget_with_a_lifetime_cap(connect, store_dsn, database):
    owner = connect(analyst="owner")
    make_table(owner, COLUMNS, [(i, i / 10) for i in range(10)], ["uid", "x"])
    out = run(store_dsn, database, "budget", "set", "--analyst", "dash", "--epsilon", "1", "--renew", "daily",
              "--lifetime-epsilon", "30")
    assert out.strip() == ("budget of dash: ε 1, δ 1e-06 per day (UTC), renewed daily; over the lifetime: "
                           "capped at ε 30, δ 1e-06")
    run(store_dsn, database, "--analyst", "dash", "query", "SELECT count(*) FROM t", "--epsilon", "0.25")
    before = period_of("daily", datetime.now(UTC))
    text = run(store_dsn, database, "budget", "--analyst", "dash")
    after = period_of("daily", datetime.now(UTC))  # a run across midnight UTC may see either day
    assert any(f"in period {p.label} (UTC; renews {p.end:%Y-%m-%d} 00:00 UTC)" in text for p in (before, after)), text
    assert "per day (UTC)" in text and "over the lifetime: capped at ε 30" in text
    assert "lifetime cap (all periods) — 1 releases" in text
    data = json.loads(run(store_dsn, database, "budget", "--analyst", "dash", "--json"))
    assert data["renewal"]["schedule"] == "daily" and data["renewal"]["lifetime"] == "capped"
    assert data["spent"]["epsilon"] in (0.25, 0.0)  # 0 only if midnight UTC fell between query and status
    assert data["lifetime"]["spent"]["epsilon"] == 0.25
    assert data["lifetime"]["budget"] == {"epsilon": 30.0, "delta": 1e-06}
    listed = run(store_dsn, database, "budget", "list")
    assert "dash: ε 1, δ 1e-06 per day (UTC), renewed daily; over the lifetime: capped at ε 30" in listed


def test_renewing_budget_without_a_cap_says_the_lifetime_is_unbounded(store_dsn, database):
    out = run(store_dsn, database, "budget", "set", "--analyst", "dash", "--epsilon", "2", "--delta", "1e-7",
              "--renew", "weekly")
    assert "per week (UTC), renewed weekly; over the lifetime: unbounded" in out
    text = run(store_dsn, database, "budget", "--analyst", "dash")
    assert "over the lifetime: unbounded" in text and "lifetime cap" not in text
    assert "-W" in text  # the ISO week label, e.g. 2026-W48
    # a budget that does not renew says so too
    out = run(store_dsn, database, "budget", "set", "--analyst", "dash", "--epsilon", "2")
    assert "over the lifetime (no renewal)" in out
    assert "renewal" not in json.loads(run(store_dsn, database, "budget", "--analyst", "dash", "--json"))


def test_lifetime_options_need_a_renewing_budget(store_dsn, database):
    out = run(store_dsn, database, "budget", "set", "--analyst", "dash", "--epsilon", "1",
              "--lifetime-epsilon", "5", code=1)
    assert "cap a renewing budget" in out and "--renew" in out
    out = run(store_dsn, database, "budget", "set", "--analyst", "dash", "--epsilon", "1", "--renew", "monthly",
              "--lifetime-delta", "1e-5", code=1)
    assert "--lifetime-delta needs --lifetime-epsilon" in out
    out = run(store_dsn, database, "budget", "set", "--analyst", "dash", "--epsilon", "1", "--renew", "monthly",
              "--lifetime-epsilon", "0.5", code=1)
    assert "smaller than one period" in out
    out = run(store_dsn, database, "budget", "set", "--analyst", "dash", "--epsilon", "1", "--renew", "hourly",
              code=2)
    assert "hourly" in out

"""Issue 28's aim for the release store: a 6-panel Grafana dashboard on "Last 24 hours" spends, over a
simulated day with data arriving, at most 1.2× what releasing each panel's buckets once costs — where
released as written it pays once per refresh (tests/pipeline/grafana_replay.py has the panels and the
day; tests/bench/bench_dashboard_replay.py replays it at Grafana's 30 s refresh)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dpch import Budget
from tests.helpers import make_table
from tests.pipeline.grafana_replay import COMMENT, DDL, LATE, PANELS, expand, replay, rows

START = 1_772_323_200 + 10 * 86400 + 1234  # 2026-03-11 00:20:34 UTC: not on an hour
EPSILON = 0.05


@pytest.fixture
def dashboard(connect):
    s = connect(analyst="grafana", default_budget=Budget(1e6, 0.5))
    make_table(s, DDL, rows(START - 2 * 86400, START - LATE), ["uid", "ts", "region", "amount"], name="events",
               comment=COMMENT)
    return s


def test_hours_of_refreshes_cost_each_bucket_once(dashboard):
    """6 hours at a 20-minute refresh here (the bench replays 24 hours at 30 s: the count is the same, one
    release per panel per hour, whatever the refresh)."""
    day = replay(dashboard, start=START, hours=6, refresh_s=1200, epsilon=EPSILON)
    assert day.queries == 18 * len(PANELS)
    # one release per panel when it is first drawn, then one each hour, when a bucket becomes final 5 minutes
    # after its end (the open buckets are released again in the same release): 1 + 5 per panel
    assert day.releases == 6 * len(PANELS)
    assert day.ratio == pytest.approx(1.0) and day.ratio <= 1.2


def test_released_as_written_every_refresh_pays_again(dashboard):
    """The negative control: the same refreshes with the store off cost one release each."""
    day = replay(dashboard, start=START, hours=2, refresh_s=1200, epsilon=EPSILON,
                 settings=" SETTINGS dp_store = 'off'")
    assert day.releases == day.queries == 6 * len(PANELS)
    assert day.epsilon == pytest.approx(day.queries * EPSILON)


def test_each_panel_shows_every_hour_of_its_range_whole(dashboard):
    replay(dashboard, start=START, hours=2, refresh_s=1800, epsilon=EPSILON)
    now = START + 2 * 3600
    dashboard.clock = lambda: now
    answer = dashboard.query(expand(PANELS[0], now), epsilon=EPSILON)
    # every hour the range touches, whole, in order: yesterday's 02:00 (the range begins at 02:20) to today's
    expected = [datetime.fromtimestamp(h, UTC).replace(tzinfo=None)
                for h in range((now - 86400) // 3600 * 3600, now // 3600 * 3600 + 1, 3600)]
    assert [r[0] for r in answer.rows] == expected and len(expected) == 25
    assert answer.cost.epsilon == EPSILON  # 01:00 became final at 02:05: released with the open 02:00
    truth = dict(dashboard.engine.query_rows(
        f"SELECT toStartOfInterval(ts, INTERVAL 3600 second) AS h, count() FROM {dashboard.engine.table('events')} "
        f"WHERE h >= toDateTime({(now - 86400) // 3600 * 3600}) GROUP BY h"))
    assert set(truth) <= set(expected)

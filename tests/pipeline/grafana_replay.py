"""A Grafana dashboard replayed over a simulated day (issue 28, part 1): six panels on "Last 24 hours",
refreshed every ``refresh_s`` seconds, with the session's clock moved by the replay and rows arriving as
time passes. Used by tests/pipeline/test_dashboard_replay.py (a day at a slow refresh) and
tests/bench/bench_dashboard_replay.py (a day at Grafana's 30 s).

The panels' SQL is the plugin's: grafana/clickhouse-datasource at commit
1d04063a31fb30f9582cd0b3aeaacb7d350b0dcf, src/data/sqlGenerator.ts (generateAggregateTimeSeriesQuery: the
query builder's time series) and pkg/macros/macros.go (the macros, expanded below as it expands them:
``$__timeFilter(c)`` → ``c >= toDateTime(<from>) AND c <= toDateTime(<to>)``, ``$__fromTime`` →
``toDateTime(<from>)``, ``$__timeInterval(c)`` → ``toStartOfInterval(toDateTime(c), INTERVAL <s> second)``),
as cited in tests/sql/fixtures/bi_time.toml. "Last 24 hours" is ``now-24h`` to ``now`` in whole seconds;
the panels' "Min interval" is 1h, so ``$__timeInterval`` is 3600 seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

#: the table the panels read: one row every 30 s, 500 people, final 5 minutes after a bucket ends
DDL = ("uid UInt64, ts DateTime COMMENT 'dp: bounds=[\"2026-01-01\", \"2026-12-31\"]', "
       "region String COMMENT 'dp: public, values=[\"north\", \"south\"]', "
       "amount Float64 COMMENT 'dp: bounds=[0, 100]'")
COMMENT = "dp: privacy_unit=uid, max_rows_per_unit=200, final_after=300"
ROW_EVERY = 30
#: rows reach the table this long after their time (within final_after)
LATE = 60

PANELS = (
    'SELECT $__timeInterval(ts) as "time", count(*) FROM events WHERE ( ts >= $__fromTime AND ts <= $__toTime ) '
    'GROUP BY time ORDER BY time ASC LIMIT 1000',
    "SELECT $__timeInterval(ts) AS time, sum(amount) AS total FROM events WHERE $__timeFilter(ts) GROUP BY time "
    "ORDER BY time",
    "SELECT $__timeInterval(ts) AS time, avg(amount) FROM events WHERE $__timeFilter(ts) GROUP BY time ORDER BY time",
    "SELECT $__timeInterval(ts) AS time, region, count() FROM events WHERE $__timeFilter(ts) GROUP BY time, region "
    "ORDER BY time",
    "SELECT $__timeInterval(ts) AS time, count() FROM events WHERE $__timeFilter(ts) AND region = 'north' "
    "GROUP BY time ORDER BY time",
    "SELECT $__timeInterval(ts) AS time, region, sum(amount) FROM events WHERE $__timeFilter(ts) "
    "GROUP BY time, region ORDER BY time",
)


def expand(sql: str, now: int, *, range_s: int = 86400, interval_s: int = 3600) -> str:
    """``sql`` with the macros expanded as macros.go does, for the range ``now - range_s`` to ``now``."""
    start = now - range_s
    sql = re.sub(r"\$__timeFilter\((\w+)\)", rf"\1 >= toDateTime({start}) AND \1 <= toDateTime({now})", sql)
    sql = re.sub(r"\$__timeInterval\((\w+)\)", rf"toStartOfInterval(toDateTime(\1), INTERVAL {interval_s} second)",
                 sql)
    return sql.replace("$__fromTime", f"toDateTime({start})").replace("$__toTime", f"toDateTime({now})")


def rows(first: int, last: int) -> list[tuple]:
    """The rows whose time is in ``[first, last)``: one every :data:`ROW_EVERY` seconds."""
    begin = -(-first // ROW_EVERY) * ROW_EVERY
    return [((t // ROW_EVERY) % 500, datetime.fromtimestamp(t, UTC).replace(tzinfo=None),
             ("north", "south")[(t // ROW_EVERY) % 2], float((t // ROW_EVERY) % 97))
            for t in range(begin, last, ROW_EVERY)]


@dataclass(frozen=True)
class Replay:
    queries: int
    releases: int
    epsilon: float
    #: what releasing each panel's buckets once costs: one release per panel per bucket that becomes final
    once: float

    @property
    def ratio(self) -> float:
        return self.epsilon / self.once


def replay(session, *, start: int, hours: int, refresh_s: int, epsilon: float, settings: str = "",
           progress=None) -> Replay:
    """Moves ``session``'s clock from ``start`` through ``hours`` hours, asking every panel every
    ``refresh_s`` seconds, inserting the rows that arrived since the last refresh (each :data:`LATE`
    seconds after its time). ``start`` and the table's rows before it are the caller's."""
    now = start
    session.clock = lambda: now
    spent = session.budget().spent.epsilon
    arrived = start - LATE
    queries = releases = 0
    for step in range(hours * 3600 // refresh_s):
        now = start + step * refresh_s
        if now - LATE > arrived:
            fresh = rows(arrived, now - LATE)
            if fresh:
                session.engine.insert("events", fresh, ["uid", "ts", "region", "amount"])
            arrived = now - LATE
        for sql in PANELS:
            answer = session.query(expand(sql, now) + settings, epsilon=epsilon)
            queries += 1
            releases += answer.cost.epsilon > 0
        if progress is not None:
            progress(step)
    return Replay(queries, releases, session.budget().spent.epsilon - spent, len(PANELS) * hours * epsilon)


__all__ = ["COMMENT", "DDL", "PANELS", "Replay", "expand", "replay", "rows"]

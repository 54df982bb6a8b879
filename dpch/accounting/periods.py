"""Budget periods: the UTC calendar windows a renewing budget restarts in (``dpch budget set --renew``).

A renewing budget's filter restarts at each period boundary: only the releases *admitted* in the
current period count toward it (docs/filters-and-ledger.md, "Budgets that renew"). Periods are UTC
calendar periods — ``daily`` (midnight to midnight), ``weekly`` (ISO weeks, Monday 00:00 to the next
Monday), ``monthly`` (the 1st 00:00 to the next month's 1st) — chosen from the wall clock at
admission, never from data (docs/design.md rule 1: the clock is public).

The clock is injected (:data:`Clock`, a callable returning an aware datetime), so tests move time
without sleeping; :func:`utc_now` is the production clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dpch.errors import ConfigError

#: a wall clock: returns the current time (timezone-aware; naive datetimes are read as UTC)
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The production clock."""
    return datetime.now(UTC)


def as_utc(t: datetime) -> datetime:
    """``t`` as an aware UTC datetime (a naive one is taken to be UTC already, as ClickHouse's
    ``DateTime64(6, 'UTC')`` columns may read back)."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


@dataclass(frozen=True)
class Period:
    """One renewal window ``[start, end)`` of a schedule, with its label (``2026-11-24``,
    ``2026-W48``, ``2026-11``)."""

    schedule: str
    start: datetime
    end: datetime
    label: str

    def contains(self, t: datetime) -> bool:
        return self.start <= t < self.end

    @property
    def unit(self) -> str:
        """The period in words ("day", "week", "month")."""
        return SCHEDULES[self.schedule].unit


def _day(t: datetime) -> tuple[datetime, datetime, str]:
    start = t.replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1), f"{start:%Y-%m-%d}"


def _week(t: datetime) -> tuple[datetime, datetime, str]:
    day, _, _ = _day(t)
    start = day - timedelta(days=day.weekday())  # ISO weeks start on Monday
    year, week, _ = start.isocalendar()
    return start, start + timedelta(days=7), f"{year}-W{week:02d}"


def _month(t: datetime) -> tuple[datetime, datetime, str]:
    start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start, end, f"{start:%Y-%m}"


@dataclass(frozen=True)
class Schedule:
    """A renewal schedule: its unit in words and the window of a time."""

    unit: str
    window: Callable[[datetime], tuple[datetime, datetime, str]]


#: renewal schedule name → its unit and window function (``--renew``)
SCHEDULES: dict[str, Schedule] = {
    "daily": Schedule("day", _day),
    "weekly": Schedule("week", _week),
    "monthly": Schedule("month", _month),
}


def check_schedule(schedule: str) -> str:
    """``schedule`` if it names a renewal schedule ("" = none), else a ConfigError."""
    if schedule and schedule not in SCHEDULES:
        raise ConfigError(f"unknown budget renewal {schedule!r}", hint=f"choose one of {', '.join(SCHEDULES)}")
    return schedule


def period_of(schedule: str, t: datetime) -> Period:
    """The period of ``schedule`` holding time ``t`` (UTC calendar)."""
    start, end, label = SCHEDULES[check_schedule(schedule)].window(as_utc(t))
    return Period(schedule, start, end, label)

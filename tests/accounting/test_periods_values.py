"""Renewal periods' edges (issue 31, the campaign's survivors in ``accounting/periods.py``).

An unknown schedule asked of :func:`period_of` is refused in words (a ``ConfigError`` naming the choices),
not a ``KeyError`` from the table; and a schedule in the table cannot be changed once defined.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from dpch.accounting.periods import SCHEDULES, period_of
from dpch.errors import ConfigError


def test_an_unknown_schedule_is_refused_in_words():
    with pytest.raises(ConfigError, match="unknown budget renewal 'hourly'"):
        period_of("hourly", datetime(2026, 11, 27, 12, tzinfo=UTC))


def test_a_known_schedule_gives_its_window():
    period = period_of("monthly", datetime(2026, 11, 27, 12, tzinfo=UTC))
    assert (period.start, period.end, period.label) == (
        datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC), "2026-11")


def test_schedules_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SCHEDULES["daily"].unit = "hour"  # type: ignore[misc]

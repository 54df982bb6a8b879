"""Setting names: dpch's ``dp_*`` names match in any case, and a setting given twice in one place, in
any spelling, is refused before anything is charged (issue 24, item 4: ``SETTINGS DP_EPSILON = 1,
dp_epsilon = 0.1`` was accepted, and one of the two was silently kept)."""

from __future__ import annotations

import pytest

from tests.helpers import make_table, refused_uncharged

COLUMNS = "uid UInt64, x Float64 COMMENT 'dp: bounds=[0, 10]'"


@pytest.fixture
def session(connect):
    s = connect()
    make_table(s, COLUMNS, [(i, float(i % 10)) for i in range(50)], ["uid", "x"])
    return s


@pytest.mark.parametrize("settings", [
    "DP_EPSILON = 1, dp_epsilon = 0.1",
    "dp_epsilon = 0.1, Dp_Epsilon = 1",
    "dp_epsilon = 0.1, dp_epsilon = 1",
])
def test_a_setting_given_twice_in_any_case_is_refused_uncharged(session, settings):
    err = refused_uncharged(session, f"SELECT count() FROM t SETTINGS {settings}")
    assert "dp_epsilon is given twice" in err.message
    assert "once" in (err.hint or "")


def test_one_spelling_in_upper_case_is_the_setting(session):
    release = session.query("SELECT count() FROM t SETTINGS DP_EPSILON = 0.25")
    assert release.cost.epsilon == pytest.approx(0.25)

"""No test's verdict depends on the machine's speed: every hypothesis profile the suite registers has no
deadline (issue 25, "A flake": the default 200 ms deadline failed a single-process run on a loaded machine)."""

from __future__ import annotations

import pytest
from hypothesis import settings


@pytest.mark.parametrize("profile", ["ci", "dev"])
def test_every_profile_has_no_deadline(profile):
    assert settings.get_profile(profile).deadline is None


def test_the_loaded_profile_has_no_deadline():
    assert settings.default.deadline is None

"""A small annotated table for the stage tests: 4 units, ≤ 2 rows each, a public key with
declared values and a bounded measure."""

from __future__ import annotations

import pytest

from tests.helpers import make_table

COLUMNS = ("uid UInt32, region String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', "
           "x Float64 COMMENT 'dp: bounds=[0, 10]'")
ROWS = [(1, "a", 1.0), (1, "a", 2.0), (2, "b", 3.0), (3, "b", 4.0), (3, "a", 9.0), (4, "b", 5.0)]


@pytest.fixture
def session(connect):
    s = connect(analyst="stages")
    make_table(s, COLUMNS, ROWS, ["uid", "region", "x"], comment="dp: privacy_unit=uid, max_rows_per_unit=2")
    make_table(s, "region String, name String", [("a", "Alpha"), ("b", "Beta"), ("c", "Gamma")],
               ["region", "name"], name="dim", comment="dp: public")
    return s

"""``Session.tables()`` (the catalog of the SQLAlchemy dialect, the gateway and the shell): the tables
with a policy, private or public; a table whose annotation is invalid is left out (querying it says
what is wrong), an unannotated one and dpch's own are not listed."""

from __future__ import annotations

import pytest

import dpch
from tests.helpers import make_table


def test_tables_lists_annotated_tables_and_leaves_out_an_invalid_one(connect):
    s = connect(analyst="lister")
    make_table(s, "uid UInt32, x Float64 COMMENT 'dp: bounds=[0, 1]'", [], ["uid", "x"], name="private_t")
    make_table(s, "k String", [], ["k"], name="public_t", comment="dp: public")
    make_table(s, "k String", [], ["k"], name="plain_t", comment="")
    make_table(s, "uid UInt32, x Float64 COMMENT 'dp: bounds=[1, 0]'", [], ["uid", "x"], name="broken_t")
    assert sorted(p.table for p in s.tables()) == ["private_t", "public_t"]
    with pytest.raises(dpch.PolicyError) as info:
        s.query("SELECT sum(x) FROM broken_t")
    assert "broken_t" in str(info.value) or "bounds" in str(info.value)

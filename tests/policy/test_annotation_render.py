"""A policy rendered back as ``dp:`` COMMENTs (what SHOW CREATE TABLE shows for a TOML policy) reads
back as the same policy (tests/server/test_metadata_toml.py: the gateway shows it)."""

from __future__ import annotations

from datetime import date

from dpch.policy.annotations import parse_annotation
from dpch.policy.model import ColumnPolicy, TablePolicy, build_table_policy


def reread(policy: TablePolicy) -> TablePolicy:
    types = {name: c.type for name, c in policy.columns.items()}
    return build_table_policy(
        policy.table, types, parse_annotation(policy.annotation(), where="t"),
        {name: parse_annotation(c.annotation(), where=name) for name, c in policy.columns.items()})


def test_every_annotation_reads_back_as_the_same_policy():
    columns = {
        "uid": ColumnPolicy("uid", "UInt64"),
        "region": ColumnPolicy("region", "LowCardinality(String)", public=True, values=("n", "s, \"quoted\"", "é")),
        "age": ColumnPolicy("age", "UInt8", bounds=(18.0, 90.0)),
        "spend": ColumnPolicy("spend", "Float64", bounds=(-0.5, 1e9)),
        "day": ColumnPolicy("day", "Date", date_bounds=(date(2026, 1, 1), date(2026, 12, 31))),
        "ok": ColumnPolicy("ok", "UInt8", public=True, values=(0, 1)),
        "note": ColumnPolicy("note", "String"),
    }
    for table in (TablePolicy("t", columns, privacy_unit="uid", max_rows_per_unit=10, max_groups_per_unit=3,
                              split_cap=True),
                  TablePolicy("t", columns, privacy_unit="uid", unique_units=True),
                  TablePolicy("t", {"k": ColumnPolicy("k", "String", public=True, values=("a",))}, public=True)):
        again = reread(table)
        assert again.columns == table.columns
        assert (again.privacy_unit, again.max_rows_per_unit, again.unique_units, again.max_groups_per_unit,
                again.public, again.split_cap) == (table.privacy_unit, table.max_rows_per_unit, table.unique_units,
                                                   table.max_groups_per_unit, table.public, table.split_cap)
    assert columns["note"].annotation() == ""  # no policy, no annotation (negative control)


def test_final_after_reads_back_and_bad_values_are_refused_in_words():
    """``final_after=N`` (the release store, issue 28): whole seconds, 0 or more, on a table with a unit."""
    import pytest

    from dpch.errors import PolicyError

    columns = {"uid": ColumnPolicy("uid", "UInt64"), "day": ColumnPolicy("day", "Date")}
    table = TablePolicy("t", columns, privacy_unit="uid", max_rows_per_unit=5, final_after=3600)
    assert table.annotation() == "dp: privacy_unit=uid, max_rows_per_unit=5, final_after=3600"
    assert reread(table).final_after == 3600 and reread(TablePolicy("t", columns, privacy_unit="uid",
                                                                       max_rows_per_unit=5)).final_after is None
    assert reread(TablePolicy("t", columns, privacy_unit="uid", max_rows_per_unit=5, final_after=0)).final_after == 0
    assert "final 3600 s after their end" in table.describe()
    types = {"uid": "UInt64", "day": "Date"}
    for value, words in (("-1", "final_after must be a whole number of seconds"), ("1.5", "whole number"),
                         ("true", "whole number")):
        with pytest.raises(PolicyError, match=words):
            build_table_policy("t", types, parse_annotation(f"dp: privacy_unit=uid, max_rows_per_unit=5, "
                                                            f"final_after={value}", where="t"), {})
    with pytest.raises(PolicyError, match="final_after needs a privacy_unit"):
        build_table_policy("t", types, parse_annotation("dp: public, final_after=60", where="t"), {})

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

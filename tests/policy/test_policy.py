"""Policy: dp: annotations and TOML overrides, with precise validation errors."""

from __future__ import annotations

import pytest

from dpch import Policy, PolicyError
from dpch.policy.annotations import parse_annotation
from tests.helpers import make_table

COLUMNS = (
    "uid UInt64, region String COMMENT 'dp: public, values=[\"a\", \"b\"]', "
    "x Float64 COMMENT 'dp: bounds=[0, 10]', note String COMMENT 'free text'"
)


def test_parse_annotation_flags_lists_and_words():
    spec = parse_annotation('dp: public, values=["a, b", "c"], bounds=[0, 1.5], privacy_unit=user_id',
                            where="t")
    assert spec == {"public": True, "values": ["a, b", "c"], "bounds": [0, 1.5], "privacy_unit": "user_id"}
    assert parse_annotation("just a comment", where="t") == {}


@pytest.mark.parametrize(
    "comment, message",
    [
        ("dp: bounds=[0, 1", "unclosed"),
        ("dp: bounds=[0, 1], bounds=[2, 3]", "given twice"),
        ("dp: values=['a']", "cannot read the value"),
    ],
)
def test_parse_annotation_errors(comment, message):
    with pytest.raises(PolicyError, match=message):
        parse_annotation(comment, where="t")


def test_policy_from_annotations(connect):
    s = connect()
    make_table(s, COLUMNS, [], [])
    p = s.table_policy("t")
    assert p.private and p.privacy_unit == "uid" and p.max_rows_per_unit == 3
    assert p.column("x").bounds == (0.0, 10.0)
    assert p.column("region").public and p.column("region").values == ("a", "b")
    assert p.column("note").bounds is None and not p.column("note").public
    assert "privacy unit: uid" in p.describe()


@pytest.mark.parametrize(
    "columns, comment, message",
    [
        ("uid UInt64, x Float64 COMMENT 'dp: bounds=[5, 1]'", "dp: privacy_unit=uid, max_rows_per_unit=1",
         r"lo > hi"),
        ("uid UInt64", "dp: privacy_unit=user, max_rows_per_unit=1", "privacy_unit 'user' is not a column"),
        ("uid UInt64", "dp: privacy_unit=uid", "no max_rows_per_unit"),
        ("uid UInt64", "dp: max_rows_per_unit=2", "names no privacy_unit"),
        ("uid UInt64", "dp: privacy_unit=uid, max_rows_per_unit=0", "positive whole number"),
        ("uid UInt64", "dp: privacy_unit=uid, max_rows_per_unit=1000000001", r"must be at most 10\^9, got 1000000001"),
        ("uid UInt64", "dp: privacy_unit=uid, max_rows_per_unit=1, max_rows_per_group=" + "9" * 400,
         r"max_rows_per_group must be at most 10\^9"),
        ("uid UInt64", "dp: privacy_unit=uid, max_rows_per_unit=1, max_groups_per_unit=10000000000",
         r"max_groups_per_unit must be at most 10\^9"),
        ("uid UInt64, s String COMMENT 'dp: bounds=[0, 1]'", "dp: privacy_unit=uid, max_rows_per_unit=1",
         "need a numeric column"),
        ("uid UInt64", "dp: privacy_unit=uid, max_rows_per_unit=1, colour=red", "unknown policy key"),
        ("uid UInt64, x Float64 COMMENT 'dp: values=[1, 1]'", "dp: privacy_unit=uid, max_rows_per_unit=1",
         "duplicates"),
    ],
)
def test_invalid_policies_are_refused_precisely(connect, columns, comment, message):
    s = connect()
    make_table(s, columns, [], [], comment=comment)
    with pytest.raises(PolicyError, match=message):
        s.table_policy("t")


def test_a_contribution_bound_of_exactly_10_to_the_9_is_accepted(connect):
    s = connect()
    make_table(s, "uid UInt64", [], [], comment="dp: privacy_unit=uid, max_rows_per_unit=1000000000")
    assert s.table_policy("t").max_rows_per_unit == 10**9


def test_toml_overrides_annotations_key_by_key(connect, tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(
        "[tables.t]\nmax_rows_per_unit = 7\n\n[tables.t.columns]\n"
        "x = { bounds = [1, 2] }\nnote = { public = true, values = [\"n1\"] }\n"
    )
    s = connect(policy=str(path))
    make_table(s, COLUMNS, [], [])
    p = s.table_policy("t")
    assert p.max_rows_per_unit == 7 and p.privacy_unit == "uid"
    assert p.column("x").bounds == (1.0, 2.0)
    assert p.column("note").values == ("n1",)
    assert p.column("region").values == ("a", "b")  # untouched annotation survives
    assert str(path) in p.sources


def test_toml_naming_unknown_column_is_refused(connect):
    s = connect(policy=Policy.from_mapping({"tables": {"t": {"columns": {"nope": {"bounds": [0, 1]}}}}}))
    make_table(s, COLUMNS, [], [])
    with pytest.raises(PolicyError, match="does not have"):
        s.table_policy("t")


def test_missing_table(connect):
    with pytest.raises(PolicyError, match="does not exist"):
        connect().table_policy("nope")


def test_policy_file_chooses_the_filter(connect, tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('[privacy]\nfilter = "zcdp"\n\n[tables.t]\nmax_rows_per_unit = 2\n')
    s = connect(policy=str(path), analyst="toml-filter")
    make_table(s, COLUMNS, [(1, "a", 1.0, "n")], ["uid", "region", "x", "note"])
    s.query("SELECT count(*) FROM t", epsilon=0.1)
    assert s.budget().filter == "zcdp"


def test_policy_file_rejects_unknown_privacy_keys(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('[privacy]\nfiltre = "zcdp"\n')
    with pytest.raises(PolicyError, match="unknown \\[privacy\\] key"):
        Policy.from_toml(path)


class _Clock:
    """A hand-moved monotonic clock: the cache's expiry is tested without sleeping."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_table_policies_are_read_again_after_their_ttl(connect):
    clock = _Clock()
    s = connect(policy=Policy(ttl=10.0, clock=clock))
    make_table(s, COLUMNS, [], [])
    assert s.table_policy("t").column("x").bounds == (0.0, 10.0)
    s.engine.command(f"ALTER TABLE {s.engine.table('t')} COMMENT COLUMN x 'dp: bounds=[0, 5]'")
    clock.now += 9.0  # within the TTL: the cached policy (the comment is not read per query)
    assert s.table_policy("t").column("x").bounds == (0.0, 10.0)
    clock.now += 1.0  # expired: the data owner's change is seen without reload() or a restart
    assert s.table_policy("t").column("x").bounds == (0.0, 5.0)
    s.engine.command(f"ALTER TABLE {s.engine.table('t')} COMMENT COLUMN x 'dp: bounds=[0, 2]'")
    s.policy.reload()  # what `dpch load` does after writing comments: at once
    assert s.table_policy("t").column("x").bounds == (0.0, 2.0)

"""Key release (issue 16, part 1) through the whole pipeline, on real chdb.

- Keys with a declared domain are free: no ledger row, no aggregate run, no noise drawn, and the
  answer is the same on two tables with different data. The negative control is a variant that
  returns the declared keys *present in the data*: the same comparison catches it.
- Private keys go through partition selection at (ε, δ): only keys that clear the threshold appear
  (keys of many units always, keys of one unit never at δ 1e-6), no counts are released, the charge
  is the full (ε, δ) that EXPLAIN states, and EXPLAIN names the mechanism.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import dpch
from dpch import Budget, QueryRejected
from dpch.pipeline import release as release_stage
from dpch.pipeline.release import domain_rows
from dpch.store.engine import Engine
from tests.helpers import ledger_rows, make_table

COLUMNS = ("uid UInt32, region String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', "
           "age UInt8 COMMENT 'dp: bounds=[20, 23]', name String")
#: two tables of different data: B has no row in region c and no age 23, and other names
DATA_A = [(1, "a", 20, "ann"), (2, "b", 21, "bob"), (3, "c", 23, "cyd"), (4, "a", 22, "ann")]
DATA_B = [(7, "a", 21, "dan"), (8, "a", 21, "dan"), (9, "b", 20, "eve")]

FREE_QUERIES = [
    "SELECT region FROM {t} GROUP BY region",
    "SELECT DISTINCT region FROM {t}",
    "SELECT region, age FROM {t} GROUP BY region, age",
    "SELECT DISTINCT age AS a FROM {t} WHERE name = 'ann' ORDER BY a DESC LIMIT 3",
    "SELECT region FROM {t} GROUP BY region HAVING region != 'b'",
    "SELECT DISTINCT intDiv(age, 2) FROM {t}",
    "SELECT DISTINCT d.label FROM {t} JOIN dim AS d ON {t}.region = d.region",
]


@pytest.fixture
def session(connect):
    s = connect(analyst="keys", default_budget=Budget(10, 1e-3))
    for name, rows in (("ta", DATA_A), ("tb", DATA_B)):
        make_table(s, COLUMNS, rows, ["uid", "region", "age", "name"], name=name,
                   comment="dp: privacy_unit=uid, max_rows_per_unit=2")
    make_table(s, "region String, label String", [("a", "Alpha"), ("b", "Beta"), ("c", "Gamma")],
               ["region", "label"], name="dim", comment="dp: public")
    return s


def declared_domain(session: dpch.Session, sql: str) -> list[tuple]:
    """The answer dpch gives (its rows)."""
    return session.query(sql).rows


def present_keys_only(session: dpch.Session, sql: str) -> list[tuple]:
    """A leaking variant, the negative control: the declared domain cut to the keys some row has
    (what ClickHouse itself would answer). Reads the private table directly."""
    plan, _ = session.plan(sql)
    table = session.engine.table(plan.table.table)
    labels = ", ".join(k.label.replace(f"{plan.table.table}.", "") for k in plan.keys)
    present = {tuple(str(v) for v in r) for r in session.engine.query_rows(f"SELECT DISTINCT {labels} FROM {table}")}
    return [row for row in domain_rows(plan)[1] if tuple(str(v) for v in row) in present]


def differs_between_tables(session: dpch.Session, answer: Callable[[dpch.Session, str], list[tuple]]) -> list[str]:
    """The queries whose answer by ``answer`` differs between tables ta and tb (empty: none does)."""
    return [q for q in FREE_QUERIES[:3] if answer(session, q.format(t="ta")) != answer(session, q.format(t="tb"))]


def test_free_key_release_is_the_domain_whatever_the_data(session):
    before = ledger_rows(session)
    assert declared_domain(session, "SELECT DISTINCT region FROM ta") == [("a",), ("b",), ("c",)]
    assert differs_between_tables(session, declared_domain) == []
    for query in FREE_QUERIES:
        assert session.query(query.format(t="ta")).rows == session.query(query.format(t="tb")).rows, query
    assert ledger_rows(session) == before, "a free key release writes no ledger row"
    assert session.budget().spent.epsilon == 0


def test_negative_control_a_release_of_present_keys_is_caught(session):
    """The comparison above detects the leak: region c and age 23 occur only in ta."""
    assert differs_between_tables(session, present_keys_only) == FREE_QUERIES[:3]


def test_free_key_release_reads_nothing_and_draws_no_noise(session, monkeypatch):
    runs: list[str] = []
    real = Engine.run_private

    def counting(self: Engine, sql: str, parameters: dict | None = None) -> list[tuple]:
        runs.append(sql)
        return real(self, sql, parameters)

    monkeypatch.setattr(Engine, "run_private", counting)
    state = session.context.noise.source.generator.bit_generator.state
    release = session.query("SELECT region, age FROM ta GROUP BY region, age ORDER BY age, region LIMIT 5")
    assert runs == [], "no private SQL runs for a free key release"
    assert session.context.noise.source.generator.bit_generator.state == state, "no noise is drawn"
    assert release.rows == [("a", 20), ("b", 20), ("c", 20), ("a", 21), ("b", 21)]
    assert release.cost.epsilon == 0 and release.cost.delta == 0 and release.release_id == ""
    assert release.intervals == [[None, None]] * 5
    assert any("whether or not a row has the key" in n for n in release.notes)
    # the control: a query with a count runs the aggregate and draws noise
    session.query("SELECT region, count() FROM ta GROUP BY region")
    assert len(runs) == 1 and session.context.noise.source.generator.bit_generator.state != state


def test_free_key_release_explain_shows_no_cost(session):
    text = session.explain("SELECT DISTINCT region FROM ta").describe()
    assert "cost: ε 0" in text and "groups: 3 (region: declared values)" in text
    assert "emitted SQL: none" in text and "mechanism: none (keys only, no values)" in text
    release = session.query("EXPLAIN DP SELECT DISTINCT region FROM ta")
    assert release.cost.epsilon == 0


def test_keys_with_an_aggregate_in_having_are_an_ordinary_charged_release(session):
    before = ledger_rows(session)
    release = session.query("SELECT region FROM ta GROUP BY region HAVING count() > -100")
    assert release.columns == ["region"] and release.cost.epsilon == 0.5
    assert ledger_rows(session) == before + 1


@pytest.fixture
def private(connect):
    s = connect(analyst="private-keys", default_budget=Budget(10, 0.95), seed=5)
    rows = [(u, f"solo{u:02d}") for u in range(30)]                      # 30 keys of one unit each
    rows += [(100 + u, ("common", "usual")[u % 2]) for u in range(400)]  # 2 keys of 200 units each
    make_table(s, "uid UInt32, name String", rows, ["uid", "name"], name="p",
               comment="dp: privacy_unit=uid, max_rows_per_unit=1")
    return s


def test_private_keys_release_only_the_selected_keys_at_the_stated_cost(private):
    sql = "SELECT DISTINCT name FROM p SETTINGS dp_epsilon = 1, dp_delta = 1e-6"
    explained = private.explain(sql)
    text = explained.describe()
    assert "mechanism: partition selection (keys only, no values)" in text and "cost: ε 1, δ 1e-06" in text
    assert explained.as_dict()["mechanism"] == "partition selection"
    assert "only the selected keys are released" in text
    before = ledger_rows(private)
    for _ in range(5):
        release = private.query(sql)
        # solo keys: each appears with probability ≤ δ = 1e-6; the two common keys always clear τ
        assert release.rows == [("common",), ("usual",)], "sorted, and only keys that cleared the threshold"
        assert release.columns == ["name"] and release.intervals == [[None], [None]]
        assert release.cost == explained.cost
        assert (release.cost.epsilon, release.cost.delta) == (1.0, 1e-6), "the whole (ε, δ) on the selection"
        assert release.mechanism == "partition selection"
    assert ledger_rows(private) == before + 5
    entry = private.budget().recent[0]
    assert entry.mechanism == "partition selection" and entry.cost == explained.cost


def test_selection_releases_keys_that_clear_the_threshold_only(private):
    """At a large δ the threshold is low enough for some single-unit keys to pass: the released keys
    are always keys of the data, in sorted order, never a count."""
    sql = "SELECT name FROM p GROUP BY name SETTINGS dp_epsilon = 1, dp_delta = 0.3"
    seen = set()
    for _ in range(3):
        names = [r[0] for r in private.query(sql).rows]
        assert names == sorted(names) and {"common", "usual"} <= set(names)
        seen.update(names)
    assert seen <= {"common", "usual"} | {f"solo{u:02d}" for u in range(30)}
    assert seen - {"common", "usual"}, "at δ 0.3 some single-unit keys clear the threshold"


def test_private_keys_need_delta_and_take_no_accuracy_target(private):
    before = ledger_rows(private)
    with pytest.raises(QueryRejected, match="listing the keys of name needs dp_delta > 0"):
        private.query("SELECT DISTINCT name FROM p")
    with pytest.raises(QueryRejected, match="listing the keys of name needs dp_delta > 0"):
        private.explain("SELECT name FROM p GROUP BY name")
    with pytest.raises(QueryRejected, match="a query listing keys has none"):
        private.query("SELECT DISTINCT name FROM p SETTINGS dp_delta = 1e-6, dp_accuracy = 5")
    assert ledger_rows(private) == before


def test_release_stage_refuses_domain_rows_of_a_private_key(private):
    plan, _ = private.plan("SELECT DISTINCT name FROM p SETTINGS dp_delta = 1e-6")
    assert plan.key_release and not plan.free
    with pytest.raises(ValueError):
        release_stage.domain_rows(plan)


def test_duplicate_column_names_carry_one_value(session):
    release = session.query("SELECT count(*) AS n, count(*) AS n, region AS r, region AS r FROM ta GROUP BY region")
    assert release.columns == ["n", "n", "r", "r"]
    for row, ivs in zip(release.rows, release.intervals, strict=True):
        assert row[0] == row[1] and ivs[0] == ivs[1] and row[2] == row[3]
    assert release.cost.epsilon == 0.5, "one count, charged once"
    frame = release.to_pandas()
    assert list(frame.columns)[:2] == ["n", "n_lo"]
    with pytest.raises(QueryRejected, match="two different result columns are both named n"):
        session.query("SELECT count(*) AS n, sum(age) AS n FROM ta")

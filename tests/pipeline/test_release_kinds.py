"""Release kinds (issue 25): :func:`dpch.pipeline.kinds.release_kind` is the one place that reads the
release-kind options, and each kind is one class the session, gateway, DB-API, audit and CLI call.

- Which kind each query is, on values: one query of each kind, the precedence between them (a watch's
  question and a top-k selection whatever else is set; a declared domain is free before accuracy-first),
  and what each kind says of itself (cacheable, estimates, column types).
- Through the session, each kind answers as before: the cost and mechanism of its release and EXPLAIN.
- No module outside the registry and the kinds' own implementations branches on those options: a
  scan of dpch/ fails naming file and line (negative control: the scan finds a branch in a snippet).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dpch
from dpch.pipeline.kinds import AccuracyFirst, Free, KeyRelease, Ordinary, ThresholdWatch, TopK, release_kind
from tests.helpers import ledger_rows, make_kinds_table


@pytest.fixture
def session(connect):
    s = connect(analyst="kinds", default_budget=dpch.Budget(50.0, 1e-3), seed=5)
    make_kinds_table(s)
    return s


TOP = "SELECT g, count() AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 2 SETTINGS dp_select = 'top'"
KINDS = [
    ("SELECT g, count(*), sum(x) FROM t GROUP BY g", Ordinary),
    ("SELECT count(*) FROM t SETTINGS dp_accuracy = 50", AccuracyFirst),
    ("SELECT occupation FROM t GROUP BY occupation SETTINGS dp_delta = 1e-6", KeyRelease),
    # private keys with measures: the measures' release, its keys chosen by partition selection
    ("SELECT occupation, count(*) FROM t GROUP BY occupation SETTINGS dp_delta = 1e-6", Ordinary),
    ("SELECT g FROM t GROUP BY g", Free),
    (TOP, TopK),
    (TOP.replace("'top'", "'top', dp_accuracy = 50"), TopK),  # top-k first (then refused by its own checks)
    ("SELECT g FROM t GROUP BY g SETTINGS dp_accuracy = 50", Free),  # free before accuracy-first
    ("SELECT count() FROM t SETTINGS dp_watch = 'w'", ThresholdWatch),
    ("SELECT count() FROM t SETTINGS dp_threshold = 10", ThresholdWatch),
    (TOP.replace("'top'", "'top', dp_watch = 'w'"), ThresholdWatch),  # a watch's question before all
]


@pytest.mark.parametrize(("sql", "kind"), KINDS, ids=[f"{k.__name__}-{i}" for i, (_, k) in enumerate(KINDS)])
def test_each_query_is_its_kind(session, sql, kind):
    assert type(release_kind(*session.plan(sql))) is kind


def test_what_each_kind_says_of_itself(session):
    assert [k.cacheable for k in (Ordinary, KeyRelease, TopK, Free, AccuracyFirst)] == [True] * 5
    assert not ThresholdWatch.cacheable and not ThresholdWatch.estimates
    # only an ordinary release (and a key release, one) carries dp_report_dropped's fixed-cost report
    assert [k.reports_dropped for k in (Ordinary, KeyRelease, TopK, Free, AccuracyFirst, ThresholdWatch)] == \
        [True, True, False, False, False, False]
    # a watch's and an accuracy run's costs are settled after they run (a series limit refuses them)
    assert [k.fixed_cost for k in (Ordinary, KeyRelease, TopK, Free, AccuracyFirst, ThresholdWatch)] == \
        [True, True, True, True, False, False]
    assert all(k.estimates for k in (Ordinary, KeyRelease, TopK, Free, AccuracyFirst))
    plan, opts = session.plan("SELECT count() FROM t SETTINGS dp_watch = 'w'")
    assert release_kind(plan, opts).column_types(plan, opts) == ["String"]
    plan, opts = session.plan("SELECT g, count(*), avg(x) FROM t GROUP BY g")
    assert release_kind(plan, opts).column_types(plan, opts) == ["String", "Int64", "Float64"]
    assert len({k.name for k in (Ordinary, KeyRelease, TopK, Free, AccuracyFirst, ThresholdWatch)}) == 6


def test_each_kind_answers_through_the_session(session):
    """Mechanism and charge of each kind's release, and its EXPLAIN's, from the session."""
    before = ledger_rows(session)
    ordinary = session.query("SELECT count(*) FROM t SETTINGS dp_epsilon = 0.75")
    assert ordinary.mechanism == "laplace" and ordinary.cost.epsilon == 0.75
    keys = session.query("SELECT occupation FROM t GROUP BY occupation SETTINGS dp_delta = 1e-6")
    assert keys.mechanism == "partition selection" and keys.cost.delta == 1e-6
    measured = session.query("SELECT occupation, count(*) FROM t GROUP BY occupation SETTINGS dp_delta = 1e-6")
    assert measured.mechanism == "laplace"
    top = session.query(TOP)
    assert "noisy max" in top.mechanism or "top" in top.mechanism
    free = session.query("SELECT g FROM t GROUP BY g")
    assert free.cost.epsilon == 0 and sorted(r[0] for r in free.rows) == ["a", "b", "c"]
    assert ledger_rows(session) == before + 4  # the free release wrote no row
    assert session.explain("SELECT g FROM t GROUP BY g").mechanism == "none"
    assert session.explain("SELECT occupation FROM t GROUP BY occupation SETTINGS dp_delta = 1e-6").mechanism \
        == "partition selection"
    assert session.explain("SELECT count(*) FROM t").mechanism == "laplace"
    accurate = session.query("SELECT count(*) FROM t SETTINGS dp_accuracy = 50")
    assert accurate.accuracy is not None and accurate.accuracy.met and accurate.accuracy.accuracy == 50


# -- the guard: no branch on release-kind options outside the registry ------------------------------------

DPCH = Path(__file__).resolve().parents[2] / "dpch"
#: the registry, the kinds' own implementations (each kind's plan checks refuse option combinations it
#: cannot answer), and the modules that define and validate the options or compute ``plan.free``
ALLOWED = {"pipeline/kinds.py", "pipeline/watch.py", "pipeline/top_k.py", "pipeline/release.py",
           "pipeline/accuracy_first.py", "sql/settings.py", "sql/accuracy_target.py", "sql/analyze.py"}
#: the options that tell the kinds apart (and ``plan.free``)
KIND_ATTRIBUTES = {"watch", "threshold", "accuracy_first", "free"}
HOLDERS = {"opts", "options", "plan", "first_opts", "query_options"}


def _holder(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def branches_on_kind_options(source: str) -> list[int]:
    """Lines where ``source`` tests a release-kind option: ``opts.select == 'top'``, ``opts.watch`` /
    ``opts.threshold`` against None, ``opts.accuracy_first`` or ``plan.free`` in a condition."""
    found = []
    for node in ast.walk(ast.parse(source)):
        tests: list[ast.expr] = []
        if isinstance(node, ast.If | ast.IfExp | ast.While | ast.Assert):
            tests.append(node.test)
        elif isinstance(node, ast.comprehension):
            tests.extend(node.ifs)
        elif isinstance(node, ast.BoolOp | ast.Compare):
            tests.append(node)
        for test in tests:
            for sub in ast.walk(test):
                if isinstance(sub, ast.Attribute) and _holder(sub.value) in HOLDERS and (
                        sub.attr in KIND_ATTRIBUTES
                        or sub.attr == "select" and isinstance(test, ast.Compare)):
                    found.append(sub.lineno)
    return sorted(set(found))


def test_no_module_outside_the_registry_branches_on_release_kind_options():
    offending = []
    for path in sorted(DPCH.rglob("*.py")):
        name = path.relative_to(DPCH).as_posix()
        if name in ALLOWED:
            continue
        offending += [f"dpch/{name}:{line}" for line in branches_on_kind_options(path.read_text())]
    assert offending == [], f"branch on the release kind through dpch.pipeline.kinds instead: {offending}"


def test_the_scan_finds_such_branches():
    """Negative control: each form of a branch on the options is found; the kinds' own attributes are not."""
    assert branches_on_kind_options("if opts.select == 'top':\n    pass\n") == [1]
    assert branches_on_kind_options("x = 1\nif opts.watch is not None or opts.threshold is not None:\n    pass\n") \
        == [2]
    assert branches_on_kind_options("y = a if plan.free else b\n") == [1]
    assert branches_on_kind_options("assert not first_opts.accuracy_first\n") == [1]
    assert branches_on_kind_options("if self.plan.free:\n    pass\n") == [1]
    assert branches_on_kind_options("if kind.cacheable and kind.estimates:\n    pass\n") == []
    assert branches_on_kind_options("rows = plan.select(x)\n") == []


@pytest.mark.parametrize("sql", ["SELECT g, count(*) FROM t GROUP BY g", TOP])
def test_a_datasets_own_budget_is_what_admits_it(session, sql):
    """Each kind is admitted by the budget of the dataset it reads (db.t), not only the analyst's: ε 0.3 left
    on t refuses a release of ε 0.5 though the analyst has ε 50, before anything is charged; ε 0.75 admits
    it (negative control)."""
    dataset = f"{session.engine.database}.t"
    session.accountant.set_budget(dpch.Budget(0.3, 1e-3), dataset=dataset)
    before = ledger_rows(session)
    assert not session.explain(sql, epsilon=0.5).admissible
    with pytest.raises(dpch.BudgetExceeded, match="t"):
        session.query(sql, epsilon=0.5)
    assert ledger_rows(session) == before
    session.accountant.set_budget(dpch.Budget(0.75, 1e-3), dataset=dataset)
    assert session.query(sql, epsilon=0.5).cost.epsilon == pytest.approx(0.5)


@pytest.mark.parametrize("sql", ["SELECT g, count(*) FROM t GROUP BY g", TOP, "SELECT g FROM t GROUP BY g"])
def test_the_reported_time_is_within_the_calls(session, sql):
    """A release reports the time it took: positive, and no more than the call took (true on any machine)."""
    import time

    started = time.perf_counter()
    release = session.query(sql, epsilon=0.5)
    took_ms = (time.perf_counter() - started) * 1000.0
    assert 0.0 < release.elapsed_ms <= took_ms


def test_a_free_key_release_that_cannot_run_is_refused(session):
    """A declared domain is released without reading data, but its emitted SQL is still probed: a WHERE
    ClickHouse cannot run (an invalid regular expression, which only ClickHouse's probe finds) is refused,
    as for any kind, and nothing is written; the same query without it is free (negative control)."""
    before = ledger_rows(session)
    with pytest.raises(dpch.DpchError):
        session.query("SELECT g FROM t WHERE match(occupation, '(') GROUP BY g")
    assert ledger_rows(session) == before
    assert sorted(r[0] for r in session.query("SELECT g FROM t GROUP BY g").rows) == ["a", "b", "c"]


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT occupation FROM t GROUP BY occupation SETTINGS dp_accuracy = 50, dp_delta = 1e-6",
     "a query listing keys has none"),
    ("SELECT occupation FROM t GROUP BY occupation", "listing the keys of occupation needs dp_delta > 0"),
])
def test_a_key_listing_that_cannot_run_is_refused_in_words_by_explain_and_query(session, sql, words):
    for ask in (session.explain, session.query):
        before = ledger_rows(session)
        with pytest.raises(dpch.QueryRejected, match=words):
            ask(sql)
        assert ledger_rows(session) == before


def test_top_k_explains_and_answers_with_its_own_sql_and_notes(session):
    explanation = session.explain(TOP, epsilon=1.0)
    assert isinstance(explanation.sql, str) and "FROM" in explanation.sql and "count()" in explanation.sql
    release = session.query(TOP, epsilon=1.0)
    assert release.notes == explanation.notes and all(isinstance(n, str) for n in release.notes)

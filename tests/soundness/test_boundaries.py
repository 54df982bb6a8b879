"""Boundary fuzzer (issue 24): no row can make a registry function raise, checked on real ClickHouse.

For every function the registry admits on a row, every argument it does not require to be constant,
and every type of the vocabulary (:mod:`tests.soundness.vocabulary`: each Int/UInt width's extremes,
±inf/NaN/±1e308, empty/1 MB/invalid UTF-8/metacharacter strings, bogus zones, every Date/DateTime/
DateTime64 scale at its edges and at Int64's ticks, Decimal32–256 at full precision, NULL), the
extremes are put in the argument, chosen per row, and the query goes through dpch's own path
(:mod:`tests.soundness.boundaries`). It must be refused before the charge or run without an error:
never fail after the checks that precede the charge. Constant-only arguments get bogus constants and
must be refused before the charge, or run.

The cases are generated from the registry, one parametrized test per function (so the two CI workers
share them). The default run pairs each argument with one partner value; ``DPCH_BOUNDARY_FULL=1`` runs
every partner and every literal (docs/soundness.md reports that run).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict

import pytest

import dpch
from dpch.sql import functions, guards
from dpch.sql.expression_types import Family
from dpch.store.engine import Engine
from tests.soundness import boundaries

FULL = os.environ.get("DPCH_BOUNDARY_FULL") == "1"
DATABASE = "boundary_fuzzer"

#: one test per row entry, by its template (two entries may share a name: toDayOfWeek's two forms)
ROW_ENTRIES = {e.template: e for e in functions.ENTRIES if e.row and e.template}
CASES: dict[str, list[boundaries.Case]] = defaultdict(list)
for _case in boundaries.cases(full=FULL):
    CASES[_case.entry].append(_case)


@pytest.fixture(scope="module")
def session(store_dsn: str, keeper: Engine):
    engine = Engine(store_dsn, database=DATABASE)
    for name, ddl in boundaries.tables().items():
        engine.command(f"DROP TABLE IF EXISTS {engine.table(name)}")
        engine.command(f"CREATE TABLE {engine.table(name)} ({ddl}) ENGINE = MergeTree ORDER BY tuple() "
                       f"COMMENT '{boundaries.COMMENT}'")
    for statement in boundaries.load_sql(DATABASE):
        engine.command(statement)
    engine.close()
    s = dpch.connect(store_dsn, database=DATABASE, analyst="boundary", seed=1, default_budget=dpch.Budget())
    yield s
    s.close()


def _outcomes(session, cases: list[boundaries.Case]) -> list[boundaries.Outcome]:
    return [boundaries.run(session, c) for c in cases]


def _raised(outcomes: list[boundaries.Outcome]) -> list[str]:
    return [f"{o.case.function}({o.case.argument}) {o.case.form} {o.case.value}: {o.detail}\n    {o.case.sql[:300]}"
            for o in outcomes if o.verdict == "raised"]


@pytest.mark.parametrize("template", list(ROW_ENTRIES))
def test_no_row_makes_the_function_raise(session, template):
    """Every case of the function is refused before the charge or runs; each argument that is not
    constant-only runs on some type (a fuzzer whose cases are all refused would test nothing)."""
    outcomes = _outcomes(session, CASES[template])
    raised = _raised(outcomes)
    assert not raised, f"{len(raised)} case(s) raised after the pre-charge checks:\n" + "\n".join(raised[:10])
    entry = ROW_ENTRIES[template]
    name = entry.name
    ran = Counter(o.case.argument for o in outcomes if o.verdict == "ran")
    fuzzed = {entry.args[i].what for i in boundaries.slots(entry)
              if entry.args[i].accepts is not functions.Accepts.CONSTANT}
    assert all(ran[a] > 0 for a in fuzzed), f"{name}: arguments never admitted: {fuzzed - set(ran)}"


def test_every_row_function_is_fuzzed():
    """A function the registry admits on a row has a template naming each argument that is not
    constant-only, so the fuzzer tries it: a new function cannot go unchecked."""
    for entry in functions.ENTRIES:
        if not entry.row or not entry.args:
            continue
        assert entry.template, f"{entry.name}: give it a template so the boundary fuzzer tries it"
        slots = set(boundaries.slots(entry))
        missing = [a.what for i, a in enumerate(entry.args) if a.accepts is not functions.Accepts.CONSTANT
                   and i not in slots]
        assert not missing, f"{entry.name}: arguments the template leaves out: {missing}"
        assert CASES[entry.template], f"{entry.name}: no case generated"


def test_the_vocabulary_reaches_every_family():
    """The vocabulary holds numbers, strings and dates at their extremes, and NULL (each type as a
    column of the fuzzer's tables)."""
    kinds = Counter(boundaries.family_of(t) for t in boundaries.TYPES)
    assert kinds[Family.NUMBER] >= 20 and kinds[Family.STRING] >= 3 and kinds[Family.DATE] >= 14, kinds
    assert any(t.startswith("Nullable(") for t in boundaries.TYPES)
    assert {f"DateTime64({s})" for s in range(10)} <= set(boundaries.TYPES)
    assert {"Decimal(9, 9)", "Decimal(18, 18)", "Decimal(38, 38)", "Decimal(76, 76)"} <= set(boundaries.TYPES)


# -- negative controls: the fuzzer finds each oracle once its defence is taken away -------------------


def test_negative_control_substring_without_its_guard(session, monkeypatch):
    """Without the clamp on substring's length, Int64's minimum raises after the checks."""
    monkeypatch.setattr(guards, "substring_argument", lambda node, type_: node)
    session.plans = type(session.plans)()
    raised = _raised(_outcomes(session, [c for c in CASES["substring({0}, {1}, {2})"] if c.argument == "length"]))
    assert raised and any("ARGUMENT_OUT_OF_BOUND" in r for r in raised), raised[:3]


def test_negative_control_datetime64_read_without_its_clamp(session, monkeypatch):
    """Without the clamp on DateTime64 columns, comparing one holding Int64's ticks with a scale-9
    constant overflows after the checks."""
    monkeypatch.setattr(guards, "read_datetime64", lambda node, type_: node)
    session.plans = type(session.plans)()
    cases = [c for c in CASES["{0} < {1}"] if c.form == "column" and "DateTime64" in c.value and "9)" in c.value]
    raised = _raised(_outcomes(session, cases))
    assert raised and any("DECIMAL_OVERFLOW" in r for r in raised), raised[:3]


def test_negative_control_variant_as_common_type(session, monkeypatch):
    """With ``use_variant_as_common_type`` left to the server (1 in ClickHouse 26), ``NOT(if(c, '', 1 = 1))``
    types as a Variant and raises only on the rows taking the string branch."""
    from dpch.sql import expression_types, nodes, rewrite

    unpinned = [s for s in nodes.pinned_settings() if s.this.name != "use_variant_as_common_type"]
    monkeypatch.setattr(rewrite, "pinned_settings", lambda: unpinned)
    monkeypatch.setattr(expression_types, "pinned_settings", lambda: unpinned)
    session.plans = type(session.plans)()
    raised = _raised(_outcomes(session, [c for c in CASES["NOT ({0})"] if c.form == "literal"]))
    assert raised and any("ILLEGAL_TYPE_OF_ARGUMENT" in r for r in raised), raised[:3]


def test_negative_control_date_arithmetic_without_its_guard(session, monkeypatch):
    """Without the clamp on a shifted DateTime64, ``c + INTERVAL 9000000000 SECOND`` overflows after the checks."""
    monkeypatch.setattr(guards, "date_arithmetic", lambda node, side, type_, result: node)
    session.plans = type(session.plans)()
    cases = [c for c in CASES["{0} + {1}"] if c.form == "column" and "DateTime64(9)" in c.value]
    raised = _raised(_outcomes(session, cases))
    assert raised and any("DECIMAL_OVERFLOW" in r for r in raised), raised[:3]


def test_negative_control_argument_families_unchecked(session, monkeypatch):
    """Without the check of the arguments' types, toDayOfWeek parses a string per row and raises on the
    row whose text is not a date (``if(uid = 1, 'Bad/Zone', '2021-03-04')``: the probe's row parses)."""
    monkeypatch.setattr(functions, "check_families", lambda node, type_of, where="": None)
    session.plans = type(session.plans)()
    cases = [c for c in CASES["toDayOfWeek({0})"] if c.form == "literal" and c.value.startswith("'")]
    raised = _raised(_outcomes(session, cases))
    assert raised and any("CANNOT_PARSE" in r for r in raised), raised[:3]

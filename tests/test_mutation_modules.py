"""The mutation run (tools/mutate.py) covers every privacy-critical module (issue 31): each module of the
packages that compute sensitivity, caps, clamps, keys, thresholds, calibration, conversions, costs,
admission and periods is mutated, or listed as outside with a reason, so a new module cannot go
unmeasured."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("dpch_mutate_tool", ROOT / "tools" / "mutate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def test_every_privacy_critical_module_is_mutated_or_explained():
    tool = _tool()
    found = {str(p.relative_to(ROOT)) for package in tool.PACKAGES for p in (ROOT / package).glob("*.py")
             if p.name != "__init__.py"}
    forgotten = sorted(found - set(tool.TESTS) - set(tool.OUTSIDE))
    assert not forgotten, f"add to tools/mutate.py's TESTS (with the tests that cover them) or OUTSIDE: {forgotten}"
    assert not set(tool.TESTS) & set(tool.OUTSIDE), "a module is both mutated and listed outside"
    assert all(len(reason) > 20 for reason in tool.OUTSIDE.values()), "each module outside says why"
    # a module outside the packages may be mutated too (the release store's table, dpch/store): it must exist
    gone = sorted(m for m in (set(tool.TESTS) | set(tool.OUTSIDE)) - found if not (ROOT / m).is_file())
    assert not gone, f"tools/mutate.py names modules that no longer exist: {gone}"


def test_functions_left_out_exist_and_are_left_out():
    """Each function :data:`OUTSIDE_FUNCTIONS` names is still in its mutated module, says why, and has no mutant;
    the module's other functions keep theirs (negative control: ``build`` of an aggregate is mutated)."""
    import ast

    tool = _tool()
    for module, functions in tool.OUTSIDE_FUNCTIONS.items():
        assert module in tool.TESTS, f"{module}: leave out functions of a mutated module only"
        tree = ast.parse((ROOT / module).read_text())
        spans = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                spans.setdefault(node.name, []).append(range(node.lineno, node.end_lineno + 1))
        for name, reason in functions.items():
            assert name in spans, f"{module}: no function {name} (remove it from OUTSIDE_FUNCTIONS)"
            assert len(reason) > 20
        mutated = {m.line for m in tool.mutants_of(module)}
        left_out = {n for name in functions for span in spans[name] for n in span}
        assert not mutated & left_out, f"{module}: mutants on lines left out: {sorted(mutated & left_out)[:5]}"
        kept = {n for name in set(spans) - set(functions) for span in spans[name] for n in span}
        assert mutated & kept, f"{module}: its other functions must keep their mutants"


def test_every_mutated_module_names_tests_that_exist():
    tool = _tool()
    for module, tests in {**tool.TESTS, **tool.SLOW_TESTS}.items():
        assert tests, module
        for test in tests:
            assert (ROOT / test.split("::")[0]).exists(), f"{module}: {test} does not exist"


def test_the_operators_an_outsider_uses_are_there():
    """Each operator of issue 31 yields mutants on a small function written for it."""
    tool = _tool()
    source = '''
import math


def f(x, flag=True):
    """doc"""
    if not flag and x > 0.5:
        x += clamp(x, 0.0, 1.0)
    return -math.ceil(x) or False


def g(y):
    check(y)
'''
    kinds = {m.description.split(" in ")[0] for m in tool.mutants_of("module.py", source)}
    for expected in ("drop clamp() keeping its argument", "constant 0.5 doubled", "True → False", "False → True",
                     "and → or", "or → and", "drop unary not", "drop unary -", "ceil() → floor()", "early return",
                     "operator += → -="):
        assert expected in kinds, (expected, sorted(kinds))


def test_the_campaign_adds_up_runs_and_carries_results_across_edits(tmp_path, monkeypatch):
    """The full campaign is split over many runs: every judged mutant is appended to the ledger, a resumed
    run skips it, and the per-module table counts killed, argued-equivalent and open survivors. A result
    is kept across an edit only for the same change on the same line text (elsewhere it is not judged)."""
    tool = _tool()
    monkeypatch.setattr(tool, "RESULTS", tmp_path / "results.jsonl")
    monkeypatch.setattr(tool, "EQUIVALENT", tmp_path / "equivalent.json")
    module = "dpch/privacy/example.py"
    source = "def f(x):\n    if x < 1:\n        return x * 2.0\n    return x\n"
    sources = {module: source}
    mutants = tool.mutants_of(module, source)
    assert len(mutants) >= 4
    first, second, third = mutants[0], mutants[1], mutants[2]
    tool.record(tool.Outcome(first, "killed", 1.0), sources)
    tool.record(tool.Outcome(second, "survived", 2.0), sources)
    tool.record(tool.Outcome(third, "survived", 3.0), sources)
    tool.EQUIVALENT.write_text(json.dumps([{"module": module, "description": third.description,
                                            "context": tool._context(third, sources), "reason": "the same value"}]))
    done = tool.recorded(sources, mutants)
    assert set(done) == {first.key, second.key, third.key}
    table = tool.campaign(sources, mutants)
    row = next(line for line in table.splitlines() if "privacy/example.py" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:7] == [str(len(mutants)), "3", "1", "1", "1", "33.3%"], cells
    assert cells[7] == "50.0%"  # killed among the mutants not argued equivalent
    assert second.description in table.split("open survivors")[1] and third.description not in table.split(
        "open survivors")[1]
    # a later run of the same mutant wins: the survivor killed by a new test
    tool.record(tool.Outcome(second, "killed", 2.0), sources)
    assert tool.recorded(sources, mutants)[second.key]["status"] == "killed"
    # an edit above moves every line: results follow their line's text, marked carried; a changed line loses them
    edited = {module: "import math\n\n\n" + source.replace("x * 2.0", "x * 3.0")}
    moved = tool.mutants_of(module, edited[module])
    carried = tool.recorded(edited, moved)
    lines_with_results = {moved_m.line for moved_m in moved if moved_m.key in carried}
    assert carried and all(row.get("carried") for row in carried.values())
    assert all(edited[module].splitlines()[n - 1].strip() != "return x * 3.0" for n in lines_with_results)


def test_every_early_return_mutant_parses():
    """The early-return operator on one-line bodies (``def f(): ...``, overloads, protocol stubs) once made
    source that did not parse, and the campaign stopped there (privacy/cost.py's ``compose`` overloads)."""
    mutate = _tool()
    for module in mutate.TESTS:
        source = (mutate.ROOT / module).read_text()
        early = mutate.mutants_of(module, source, early_returns_only=True)
        assert all(m.description.startswith("early return") for m in early)
        for mutant in early:
            mutate.apply(source, mutant)  # raises SyntaxError if it does not parse
    every = mutate.mutants_of("dpch/accounting/filters.py")  # the shortcut keeps every early return
    assert [m for m in every if m.description.startswith("early return")] == \
        mutate.mutants_of("dpch/accounting/filters.py", early_returns_only=True)


def test_a_test_past_its_limit_fails_and_is_marked(tmp_path):
    """The per-test limit of the mutation run's plugin: a test that runs past its limit (a mutant that
    loops) fails at once and leaves the mark the run reads as a timeout; a test within its limit, or
    one the limits file does not name, runs as usual (negative controls)."""
    import subprocess

    tool = _tool()
    (tmp_path / "mutation_profile.py").write_text(tool._PLUGIN)
    (tmp_path / "test_loop.py").write_text(
        "def test_loops():\n    while True:\n        pass\n\n\n"
        "def test_quick():\n    assert sum(range(10)) == 45\n")
    (tmp_path / ".mutation-limits.json").write_text(json.dumps(
        {"test_loop.py::test_loops": 0.5, "test_loop.py::test_quick": 60.0}))
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutation_profile",
           "-o", "addopts=", "test_loop.py"]
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "1 failed, 1 passed" in out.stdout and "_TooSlow" in out.stdout
    assert (tmp_path / ".mutation-too-slow").exists()
    (tmp_path / ".mutation-too-slow").unlink()
    out = subprocess.run([*run, "-k", "quick"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and not (tmp_path / ".mutation-too-slow").exists()
    assert tool.per_test_limit(2.0) == 30.0 and tool.per_test_limit(None) == 120.0

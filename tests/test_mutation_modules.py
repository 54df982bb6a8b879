"""The mutation run (tools/mutate.py) covers every privacy-critical module (issue 31): each module of the
packages that compute sensitivity, caps, clamps, keys, thresholds, calibration, conversions, costs,
admission and periods is mutated, or listed as outside with a reason, so a new module cannot go
unmeasured."""

from __future__ import annotations

import importlib.util
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
    gone = sorted((set(tool.TESTS) | set(tool.OUTSIDE)) - found)
    assert not gone, f"tools/mutate.py names modules that no longer exist: {gone}"


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

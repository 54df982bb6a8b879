#!/usr/bin/env python3
"""A small AST mutator for dpch's privacy-critical modules (issue 12, "Mutation score").

    python tools/mutate.py --sample 200 --seed 1 --report mutation-report.txt
    python tools/mutate.py --full --jobs 2 --report mutation-report.txt
    python tools/mutate.py --list                       # count the mutants, run nothing
    python tools/mutate.py --rerun mutation-report.json # only the survivors of a past run
    python tools/mutate.py --full --resume --module M    # the campaign: skip what a past run already judged
    python tools/mutate.py --campaign                   # the campaign's per-module table so far

Each mutant is one small change to one module (a flipped comparison, a dropped ``abs()``, ``*``
for ``/``, ``+`` for ``-``, a numeric constant moved by one, a negated condition, a ``raise``
replaced by ``pass``, ``min`` for ``max``). It is written into a private copy of the repository
under a temporary directory — the working tree is never touched, so Ctrl-C is always safe —
and only the tests that cover that module run against it (``pytest -x``, a per-mutant
timeout, Hypothesis derandomized). A mutant is *killed* when those tests fail, *timeout* when
they run past the limit (counted as killed), and *survived* otherwise.

Why not mutmut: it mutates in place and runs the whole suite per mutant; this must run on two
shared cores within minutes, so the test selection below (``TESTS``) is what makes it cheap.
"""

from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SQL_TESTS = [
    "tests/sql/test_sensitivity_mutants.py",
    "tests/sql/test_sensitivity.py",
    "tests/sql/test_sensitivity_grammar.py",
    "tests/sql/test_rejections.py",
    "tests/sql/test_partition_selection.py",
    "tests/sql/test_corpus.py",
]
_MECHANISM_TESTS = [
    "tests/mechanisms/test_calibration_guards.py",
    "tests/mechanisms",
    "tests/e2e/test_calibration.py",
]
_ACCOUNTING_TESTS = [
    "tests/accounting/test_filters_mutants.py",
    "tests/accounting",
]

#: issue 24's registry, guards and typing: their unit tests, the attacks replayed, and the boundary fuzzer on
#: the functions each guard or check protects (the whole fuzzer takes a minute a mutant)
_BOUNDARY = "tests/soundness/test_boundaries.py::"
_REGISTRY_TESTS = [
    "tests/sql/test_registry.py",
    "tests/soundness/test_rows_cannot_fail.py",
    "tests/sql/test_rejections.py",
    "tests/sql/test_functions_doc.py",
    _BOUNDARY + "test_no_row_makes_the_function_raise[substring({0}, {1}, {2})]",
    _BOUNDARY + "test_no_row_makes_the_function_raise[{0} < {1}]",
    _BOUNDARY + "test_no_row_makes_the_function_raise[{0} + {1}]",
    _BOUNDARY + "test_no_row_makes_the_function_raise[toDayOfWeek({0})]",
    _BOUNDARY + "test_no_row_makes_the_function_raise[NOT ({0})]",
    "tests/soundness/test_totality_overflow.py",
    *_SQL_TESTS,
]

#: issue 26's shared admission, targeted tests first
_ADMISSION_TESTS = [
    "tests/accounting/test_chain_state.py", "tests/accounting/test_group_admission.py",
    "tests/accounting/test_shared_budget.py", "tests/accounting/test_shared_failures.py", "tests/store/test_keeper.py",
    *_ACCOUNTING_TESTS,
]

#: module → slow generated tests run only for the mutants that survive the fast lane (``TESTS``): the
#: neighbour fuzzer (minutes) for the analysis, the whole boundary fuzzer for the registry and its guards
#: (with a coverage map, a mutant's covering tests run fastest first, which orders them the same way)
_NEIGHBOURS = ["tests/soundness/test_neighbours.py"]
#: seconds the slow lane may take (it has no unmutated baseline: running it for every module first would
#: cost more than the survivors it judges)
SLOW_TIMEOUT = 1800.0


def per_test_limit(seconds: float | None) -> float:
    """How long one covering test may run under a mutant before it counts as a timeout: five times its
    unmutated time (from the map) plus 20 s, which absorbs a session fixture's start-up (chdb) landing on
    the first test and a loaded machine; a test the map did not time gets 120 s."""
    return 120.0 if seconds is None else 20.0 + 5.0 * seconds
SLOW_TESTS: dict[str, list[str]] = {
    **{f"dpch/sql/{name}.py": _NEIGHBOURS for name in (
        "analyze", "aggregates", "bounds", "cap", "grouping", "relation", "rewrite", "value_rules", "time_buckets",
        "time_constants")},
    **{f"dpch/sql/{name}.py": ["tests/soundness/test_boundaries.py", *_NEIGHBOURS] for name in (
        "functions", "guards", "expression_types", "intervals")},
}

#: module → the tests that cover it, fastest and most targeted first (pytest stops at the first failure)
TESTS: dict[str, list[str]] = {
    "dpch/sql/functions.py": _REGISTRY_TESTS,
    "dpch/sql/guards.py": _REGISTRY_TESTS,
    "dpch/sql/expression_types.py": _REGISTRY_TESTS,
    "dpch/sql/value_rules.py": [*_SQL_TESTS, "tests/sql/test_registry.py"],
    "dpch/sql/analyze.py": [*_SQL_TESTS, "tests/soundness/test_rows_cannot_fail.py"],
    # issue 31: every module that computes sensitivity, caps, clamps, keys, thresholds, calibration,
    # conversions, costs, admission and periods (without a coverage map: these lanes)
    "dpch/sql/intervals.py": ["tests/sql/test_registry.py", *_SQL_TESTS],
    # issue 27's per-group bound: its arithmetic and choice, the emitted SQL's values, the groups kept at random
    "dpch/sql/contribution.py": ["tests/sql/test_per_group_bound.py", "tests/soundness/test_groups_unbiased.py",
                                 *_SQL_TESTS],
    "dpch/sql/cap.py": ["tests/sql/test_sensitivity_mutants.py", "tests/sql/test_corpus.py",
                        "tests/sql/test_cap_rewrites.py", "tests/soundness/test_values.py",
                        "tests/policy/test_verified_rows.py", "tests/store/test_distributed_tables.py"],
    # a WHERE list narrows a key's domain, so the groups a unit can reach (the sensitivity)
    "dpch/sql/where_lists.py": ["tests/sql/test_where_lists.py", *_SQL_TESTS],
    # Superset's series limit: which keys the second release is limited to, and the composed cost it reports
    "dpch/sql/series_limit.py": ["tests/pipeline/test_series_limit.py", "tests/server/test_superset_series_limit.py"],
    "dpch/pipeline/series.py": ["tests/pipeline/test_series_limit.py", "tests/server/test_superset_series_limit.py"],
    # issue 28's release store: which buckets are re-served (per analyst), which are released and charged
    "dpch/sql/bucketed.py": ["tests/pipeline/test_bucket_store.py", "tests/sql/test_bucketed.py",
                             "tests/pipeline/test_dashboard_replay.py"],
    "dpch/pipeline/bucket_store.py": ["tests/pipeline/test_bucket_store.py", "tests/sql/test_bucketed.py",
                                      "tests/pipeline/test_dashboard_replay.py"],
    # the store's table: whose releases a read returns (the analyst's only), and which of a bucket's
    "dpch/store/release_store.py": ["tests/pipeline/test_bucket_store.py", "tests/pipeline/test_dashboard_replay.py"],
    "dpch/sql/grouping.py": ["tests/sql/test_key_release.py", "tests/sql/test_partition_selection.py",
                             "tests/sql/test_time.py", *_SQL_TESTS, "tests/soundness/test_rows_cannot_fail.py"],
    "dpch/sql/rewrite.py": ["tests/sql/test_emit_trees.py", *_SQL_TESTS, "tests/soundness/test_values.py"],
    "dpch/sql/nodes.py": ["tests/sql/test_emit_trees.py", "tests/sql/test_registry.py", *_SQL_TESTS],
    "dpch/sql/pins.py": ["tests/sql/test_pinned_settings.py", "tests/sql/test_registry.py"],
    "dpch/sql/settings.py": ["tests/sql/test_settings_names.py", "tests/sql/test_pinned_settings.py",
                             "tests/sql/test_rejections.py", "tests/pipeline/test_plan.py"],
    "dpch/sql/shape.py": ["tests/pipeline/test_check.py", "tests/soundness/test_totality_overflow.py"],
    "dpch/sql/time_buckets.py": ["tests/sql/test_time.py", "tests/soundness/test_rows_cannot_fail.py", *_SQL_TESTS],
    "dpch/sql/time_constants.py": ["tests/sql/test_time_constants_folding.py", "tests/sql/test_time.py", *_SQL_TESTS],
    "dpch/sql/accuracy_target.py": ["tests/accuracy/test_accuracy_first.py", "tests/sql/test_rejections.py"],
    "dpch/privacy/conversions.py": ["tests/privacy", "tests/mechanisms/test_zcdp.py", *_ACCOUNTING_TESTS],
    "dpch/privacy/cost.py": ["tests/privacy", "tests/pipeline/test_cost_audit.py", *_ACCOUNTING_TESTS],
    **{f"dpch/mechanisms/{name}.py": _MECHANISM_TESTS for name in (
        "boundaries", "brownian", "exact", "exponential", "grid", "lnr", "normal", "partition_selection", "rat",
        "representable", "sampling", "selection", "selection_bounds", "svt", "zcdp")},
    **{f"dpch/accounting/{name}.py": _ACCOUNTING_TESTS for name in (
        "budget", "commit", "ledger", "locks", "odometers", "periods", "tally")},
    **{f"dpch/pipeline/{name}.py": ["tests/pipeline", "tests/accuracy"] for name in (
        "accuracy_first", "admit", "check", "execute", "plan", "release")},
    **{f"dpch/accuracy/{name}.py": ["tests/accuracy", "tests/mechanisms/test_noise_reduction.py"] for name in (
        "bounds", "planner", "rules")},
    "dpch/sql/bounds.py": _SQL_TESTS,
    "dpch/sql/aggregates.py": ["tests/sql/test_aggregate_kinds.py", "tests/sql/test_dialect_aggregates.py",
                               *_SQL_TESTS],
    "dpch/sql/aggregate_kinds.py": ["tests/sql/test_aggregate_kinds.py", "tests/sql/test_dialect_aggregates.py",
                                    *_SQL_TESTS],
    "dpch/sql/relation.py": _SQL_TESTS,
    "dpch/accounting/filters.py": _ACCOUNTING_TESTS,
    "dpch/accounting/accountant.py": _ACCOUNTING_TESTS,
    "dpch/mechanisms/laplace.py": _MECHANISM_TESTS,
    "dpch/mechanisms/gaussian.py": _MECHANISM_TESTS,
    "dpch/mechanisms/calibration.py": _MECHANISM_TESTS,
    "dpch/mechanisms/discrete.py": _MECHANISM_TESTS,
    "dpch/pipeline/calibrate.py": ["tests/mechanisms/test_calibration_guards.py", *_SQL_TESTS[:1],
                                   "tests/sql/test_corpus.py", "tests/sql/test_partition_selection.py",
                                   "tests/e2e/test_calibration.py", "tests/accounting/test_budget.py"],
    # issue 16's selections: top-k and threshold watches
    "dpch/mechanisms/top_k.py": ["tests/pipeline/test_top_k.py", "tests/sql/test_top_k_corpus.py",
                                 "tests/audit/test_top_k_audit.py"],
    "dpch/pipeline/top_k.py": ["tests/pipeline/test_top_k.py", "tests/sql/test_top_k_corpus.py",
                               "tests/audit/test_top_k_audit.py"],
    "dpch/accounting/watches.py": ["tests/accounting/test_watches_mutants.py", "tests/pipeline/test_watch_mutants.py",
                                   "tests/accounting/test_watches.py", "tests/pipeline/test_watch.py"],
    "dpch/pipeline/watch.py": ["tests/pipeline/test_watch_mutants.py", "tests/accounting/test_watches_mutants.py",
                               "tests/pipeline/test_watch.py", "tests/accounting/test_watches.py"],
    # issue 24's independent cost check
    "dpch/pipeline/cost_audit.py": ["tests/pipeline/test_cost_audit.py", "tests/sql/test_top_k_corpus.py",
                                    "tests/soundness/test_cost_consistency.py"],
    # issue 25's release kinds: which kind a query is decides its mechanism, its charge and whether it is cached
    "dpch/pipeline/kinds.py": ["tests/pipeline/test_release_kinds.py", "tests/pipeline/test_cost_audit.py",
                               "tests/pipeline/test_top_k.py", "tests/pipeline/test_bound_report.py",
                               "tests/sql/test_key_release.py", "tests/accuracy/test_accuracy_first.py",
                               "tests/pipeline/test_series_limit.py", "tests/pipeline/test_check.py",
                               "tests/server/test_cache_and_remote.py", "tests/pipeline/test_watch.py"],
    # issue 27's report of what the bound dropped: its mechanisms' ε and sensitivity, and its release
    "dpch/pipeline/bound_report.py": ["tests/pipeline/test_bound_report.py", "tests/pipeline/test_cost_audit.py"],
    # issue 26's shared admission: the decision state, its chain of compare-and-set writes, the admission store
    **{f"dpch/accounting/{name}.py": _ADMISSION_TESTS for name in ("state", "chain", "admission")},
}

#: privacy-critical packages: every module in them is mutated (``TESTS``) or listed here with the reason it
#: is not (tests/test_mutation_modules.py checks that none is forgotten)
PACKAGES = ("dpch/sql", "dpch/privacy", "dpch/mechanisms", "dpch/accounting", "dpch/pipeline", "dpch/accuracy")
OUTSIDE: dict[str, str] = {
    "dpch/sql/parse.py": "parses text into a tree and splits off SETTINGS; whatever it parses is then checked node "
                         "by node by the analysis, so a wrong parse is refused or bounded as what it is",
    "dpch/sql/limits.py": "the planner's size and depth limits: refusals of large text, no privacy computation",
    "dpch/sql/wrappers.py": "reads an outer SELECT over one aggregate as that aggregate; the tree it gives is analysed "
                            "and bounded like any query (a wrong rewrite changes an answer's meaning, not its cost)",
    "dpch/sql/sqlglot_log.py": "routes sqlglot's log records",
    "dpch/sql/result_types.py": "the column types a client is told (presentation of released values)",
    "dpch/sql/rewrite_literals.py": "re-exports a literal constructor",
    "dpch/sql/aliases.py": "refuses an alias that shadows a column name (a clearer error); which column a name "
                           "reads is resolved, and bounded, by the relation",
    "dpch/sql/outputs.py": "post-processing of released values (HAVING, ORDER BY, derived columns): it changes "
                           "what is shown, never what is private",
    "dpch/sql/post_functions.py": "post-processing functions of released values (as outputs.py)",
    "dpch/sql/text_form.py": "ClickHouse's text of released values and keys, for ORDER BY and HAVING (as outputs.py); "
                             "tested against ClickHouse's own toString",
    "dpch/pipeline/context.py": "a record of the stages' dependencies",
    "dpch/pipeline/postprocess.py": "post-processing of released values into rows",
    "dpch/pipeline/report.py": "the release's presentation (its cost is the ledger's, checked elsewhere)",
    "dpch/accuracy/doubling.py": "the doubling baseline of the benchmarks, never used to release",
}
_STATISTIC = ("a statistic's released value or interval from its noisy measures: post-processing, which changes "
              "what is shown, never what is private (statistics.py, where it lived before issue 25, was outside)")
#: functions of a mutated module that are not mutated, each with the reason (a module mixing privacy-critical
#: code with post-processing: issue 25's one class per aggregate holds both an aggregate's sensitivities and its
#: released value); tests/test_mutation_modules.py checks that each still exists
OUTSIDE_FUNCTIONS: dict[str, dict[str, str]] = {
    "dpch/pipeline/kinds.py": {"_ms_since": "a release's reported wall time: no value, noise or charge (and no test "
                                            "may depend on the machine's speed)"},
    **{f"dpch/pipeline/{name}.py": {"_elapsed_ms": "the answer's reported wall time: no value, noise or charge "
                                                    "(and no test may depend on the machine's speed)"}
       for name in ("series", "bucket_store")},
    "dpch/pipeline/bound_report.py": {"shown": "the dropped share and its interval from the two noisy counts: "
                                               "post-processing (the counts' noise and sensitivity are mutated)"},
    "dpch/sql/aggregate_kinds.py": {name: _STATISTIC for name in (
        "value_bounds", "_level", "values", "intervals", "interval_arrays", "_critical_counts", "stat_values",
        "stat_intervals")},
}

#: where ``--map`` writes which tests reach each line (generated; not in git)
MAP = ROOT / ".mutation" / "coverage-map.json"
#: the tests ``--map`` runs to learn who reaches what (the slow CLI and server process tests add little: their
#: work runs in child processes, which the map does not see)
#: every outcome of every run, one JSON line each, appended as it is judged: the full campaign is split over
#: many runs (``--resume`` skips what is recorded; ``--campaign`` adds it up), and a run stopped half-way
#: loses only the mutants in progress. Kept in git: the campaign spans many sittings on machines that do
#: not keep untracked files, and a verdict lost is hours of two cores to judge again
RESULTS = ROOT / "tools" / "mutation_results.jsonl"
#: survivors judged equivalent, each with its reason (kept in git: the argued part of the campaign)
EQUIVALENT = ROOT / "tools" / "mutation_equivalent.json"

#: the map's mark for a line run at import time (coverage's empty context)
IMPORTED = "<import>"

MAP_TESTS = ["tests/sql", "tests/privacy", "tests/mechanisms", "tests/accounting", "tests/pipeline", "tests/accuracy",
             "tests/soundness", "tests/audit", "tests/policy", "tests/dbapi", "tests/store", "tests/server",
             "tests/cli"]

#: a pytest plugin for ``--map``: each test's duration, so a mutant's covering tests run fastest first
_TIMER = '''
import json, os, time
_times, _failed = {}, set()
def pytest_runtest_logreport(report):
    _times[report.nodeid] = _times.get(report.nodeid, 0.0) + report.duration
    if report.failed:
        _failed.add(report.nodeid)
def pytest_sessionfinish(session):
    with open(os.environ["DPCH_MUTATION_TIMES"], "w") as out:
        json.dump({"times": _times, "failed": sorted(_failed)}, out)
'''

#: a worker in each sandbox: the heavy third-party imports are done once, and each mutant's pytest run is
#: a fork of it (about 2 s of imports saved per mutant; dpch itself is never imported here, so each fork
#: imports the mutated copy). Commands are JSON lines (pytest's arguments); answers are JSON lines.
_WORKER = '''
import json, os, sys
import numpy, scipy.integrate, scipy.optimize, scipy.special, scipy.stats, sqlglot, clickhouse_connect, hypothesis
import pytest
for line in sys.stdin:
    args = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()  # its own process group: a timeout kills the run and whatever it started
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0), os.dup2(null, 1), os.dup2(null, 2)
        os._exit(int(pytest.main(args)))
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
'''

#: a pytest plugin loaded into every run: Hypothesis derandomized, so verdicts do not depend on the run
_PLUGIN = '''
from hypothesis import HealthCheck, settings
settings.register_profile("mutation", derandomize=True, deadline=None, print_blob=False,
                          suppress_health_check=list(HealthCheck))
settings.load_profile("mutation")

import json, pathlib, signal
import pytest
_SELECTION = pathlib.Path(".mutation-selection.json")
_LIMITS, _SLOW = pathlib.Path(".mutation-limits.json"), pathlib.Path(".mutation-too-slow")


class _TooSlow(BaseException):
    """Raised by the alarm: a BaseException, so that no ``except Exception`` in the code under test
    swallows it."""


def _alarm(signum, frame):
    _SLOW.write_text("")
    raise _TooSlow("the mutant made this test run far longer than unmutated")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With a limits file (seconds per node id), a test that runs past its limit fails, so a mutant that
    loops is judged in seconds, not at the whole run's timeout."""
    limits = json.loads(_LIMITS.read_text()) if _LIMITS.exists() else {}
    limit = limits.get(item.nodeid)
    if limit:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def pytest_collection_modifyitems(config, items):
    """With a selection file (a mutant's covering tests by node id), keep those tests in its order: node
    ids are matched after collection, so an id pytest could not parse back from the command line (a
    parameter holding a quote, a bracket, '::') still runs, and one no longer collected is skipped."""
    if not _SELECTION.exists():
        return
    order = {nodeid: i for i, nodeid in enumerate(json.loads(_SELECTION.read_text()))}

    def place(item):  # a node id, or a whole test file (``--tests``)
        return order.get(item.nodeid, order.get(item.nodeid.split("::")[0]))

    kept = sorted((item for item in items if place(item) is not None), key=place)
    config.hook.pytest_deselected(items=[item for item in items if place(item) is None])
    items[:] = kept
'''

_FLIP = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_BINOP = {ast.Mult: ast.Div, ast.Div: ast.Mult, ast.Add: ast.Sub, ast.Sub: ast.Add, ast.FloorDiv: ast.Mult}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
           ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Mult: "*",
           ast.Div: "/", ast.Add: "+", ast.Sub: "-", ast.FloorDiv: "//"}
_SWAP_CALL = {"min": "max", "max": "min"}
_CEIL_FLOOR = {"ceil": "floor", "floor": "ceil"}
#: calls whose first argument is not a stand-in for their result (a type, a count, a message): dropping
#: them is a crash, not a test of the logic, so the "drop a call, keep its argument" operator skips them
_KEEP_ARG_SKIP = frozenset({
    "isinstance", "issubclass", "len", "str", "repr", "print", "type", "getattr", "setattr", "hasattr", "delattr",
    "super", "id", "hash", "range", "enumerate", "zip", "list", "dict", "set", "tuple", "frozenset", "sorted",
    "reversed", "iter", "next", "any", "all", "callable", "vars", "format", "map", "filter", "open", "dataclass",
    "field", "replace", "cast", "join", "startswith", "endswith", "split", "strip", "lower", "upper", "append",
    "extend", "add", "update", "get", "pop", "setdefault", "items", "keys", "values", "copy", "encode", "decode",
    "warn", "debug", "info", "warning", "error", "exception", "echo", "sub", "search", "match", "compile"})


@dataclass(frozen=True)
class Mutant:
    """One change: replace source span [start, end) (line, col pairs) of ``module`` by ``text``."""

    module: str
    line: int
    col: int
    end_line: int
    end_col: int
    text: str
    description: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.line}:{self.col}:{self.description}"


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | timeout | error
    seconds: float


# ------------------------------------------------------------------ generating mutants


def _unparse(node: ast.AST) -> str:
    return ast.unparse(ast.fix_missing_locations(node))


def _skipped_lines(source: str) -> set[int]:
    return {i for i, line in enumerate(source.splitlines(), 1) if "pragma: no mutate" in line}


def _non_code(tree: ast.AST) -> set[int]:
    """ids of nodes that are not executed logic: docstrings, annotations, f-string parts."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                mark(body[0])
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            mark(node.returns)
            for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                mark(arg.annotation)
        if isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        if isinstance(node, ast.JoinedStr):
            mark(node)
        if isinstance(node, ast.Raise):
            mark(node.exc)  # the message of an error is not logic; the raise itself is mutated
    return skip


def _replace(node: ast.AST, text: str, description: str, module: str, lines: list[str]) -> Mutant:
    """A mutant replacing ``node`` by ``text``, keeping line numbers (newlines go inside parentheses)."""
    extra = node.end_lineno - node.lineno
    if extra and not isinstance(node, ast.stmt):
        text = "(" + text + "\n" * extra + ")"
    elif extra:
        text = text + "\n" * extra
    return Mutant(module, node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, text, description)


def _copy(node: ast.AST) -> ast.AST:
    return ast.parse(ast.unparse(node), mode="eval").body if isinstance(node, ast.expr) else node


def _mutations(node: ast.AST) -> Iterator[tuple[ast.AST | str, str]]:
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for table, kind in ((_FLIP, "flip"), (_BOUNDARY, "boundary")):
                if type(op) in table:
                    new = _copy(node)
                    new.ops[i] = table[type(op)]()
                    yield new, f"{kind} comparison {_SYMBOL[type(op)]} → {_SYMBOL[table[type(op)]]}"
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
        new = _copy(node)
        new.op = _BINOP[type(node.op)]()
        yield new, f"operator {_SYMBOL[type(node.op)]} → {_SYMBOL[type(new.op)]}"
    elif isinstance(node, ast.AugAssign) and type(node.op) in _BINOP:
        target = ast.unparse(node.target)
        yield (f"{target} {_SYMBOL[_BINOP[type(node.op)]]}= {ast.unparse(node.value)}",
               f"operator {_SYMBOL[type(node.op)]}= → {_SYMBOL[_BINOP[type(node.op)]]}=")
    elif isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else \
            node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name == "abs" and len(node.args) == 1:
            yield "(" + ast.unparse(node.args[0]) + ")", "drop abs()"
        elif isinstance(node.func, ast.Name) and name in _SWAP_CALL:
            new = _copy(node)
            new.func.id = _SWAP_CALL[name]
            yield new, f"{name}() → {_SWAP_CALL[name]}()"
        elif name in _CEIL_FLOOR:
            new = _copy(node)
            if isinstance(new.func, ast.Name):
                new.func.id = _CEIL_FLOOR[name]
            else:
                new.func.attr = _CEIL_FLOOR[name]
            yield new, f"{name}() → {_CEIL_FLOOR[name]}()"
        elif (node.args and name and name not in _KEEP_ARG_SKIP and not name[:1].isupper()
              and not isinstance(node.args[0], ast.Starred)):
            # an outsider's operator: the call dropped, its first argument kept (a clamp, a cap, a rounding)
            yield "(" + ast.unparse(node.args[0]) + ")", f"drop {name}() keeping its argument"
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield repr(not node.value), f"{node.value!r} → {not node.value!r}"
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = node.value
        new_value = 1 if value == 0 else value + 1
        yield repr(new_value), f"constant {value!r} → {new_value!r}"
        if type(value) is float and value != 0.0:
            yield repr(value * 2.0), f"constant {value!r} doubled"
    elif isinstance(node, ast.BoolOp):
        new = _copy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield new, f"{'and → or' if isinstance(node.op, ast.And) else 'or → and'}"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        yield "(" + ast.unparse(node.operand) + ")", f"drop unary {'not' if isinstance(node.op, ast.Not) else '-'}"
    elif isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
        test = node.test
        yield _NegatedTest(test), f"negate condition `{_short(ast.unparse(test))}`"
    elif isinstance(node, ast.Raise):
        yield "pass", "raise → pass"


@dataclass
class _NegatedTest:
    """Marker: replace the *test* of a node (not the node) by ``not (test)``."""

    test: ast.expr


def _short(text: str, limit: int = 50) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _early_return(func: ast.FunctionDef | ast.AsyncFunctionDef, source: str) -> Mutant | None:
    """An outsider's operator: ``return`` before the first statement of a function that returns no value
    (a check that raises, a step that records): everything it does is skipped. Functions that return a
    value are left out (returning None from them is a crash, not a test of the logic)."""
    if any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(func)) or \
            any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(func)):
        return None
    body = func.body
    docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)
    if docstring and len(body) == 1:
        return None  # a docstring-only body
    first = body[1] if docstring else body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and first.value.value is Ellipsis:
        return None  # a stub (an overload, a protocol's method): it does nothing to skip
    if source.splitlines()[first.lineno - 1][:first.col_offset].strip():
        return None  # a body on the def's own line (``def f(): ...``): a return there would not parse
    segment = ast.get_source_segment(source, first)
    if segment is None:
        return None
    text = "return\n" + " " * first.col_offset + segment
    return Mutant("", first.lineno, first.col_offset, first.end_lineno, first.end_col_offset, text,
                  f"early return in {func.name}()")


def mutants_of(module: str, source: str | None = None, *, early_returns_only: bool = False) -> list[Mutant]:
    """Every mutant of ``module`` (a path relative to the repository), in source order (``early_returns_only``:
    only the early-return operator's, which is what a check that they all parse needs)."""
    source = (ROOT / module).read_text() if source is None else source
    tree = ast.parse(source)
    lines = source.splitlines()
    skip_nodes, skip_lines = _non_code(tree), _skipped_lines(source)
    outside = OUTSIDE_FUNCTIONS.get(module, {})
    skip_lines |= {n for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name in outside
                   for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
    out: list[Mutant] = []
    for node in ast.walk(tree):
        if id(node) in skip_nodes or getattr(node, "lineno", None) in skip_lines:
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            early = _early_return(node, source)
            if early is not None and early.line not in skip_lines:
                out.append(Mutant(module, early.line, early.col, early.end_line, early.end_col, early.text,
                                  early.description))
        if early_returns_only:
            continue
        for new, description in _mutations(node):
            if isinstance(new, _NegatedTest):
                out.append(_replace(new.test, f"not ({ast.unparse(new.test)})", description, module, lines))
            else:
                text = new if isinstance(new, str) else _unparse(new)
                out.append(_replace(node, text, description, module, lines))
    out.sort(key=lambda m: (m.line, m.col, m.description))
    return out


def apply(source: str, mutant: Mutant) -> str:
    """``source`` with the mutant's span replaced; the result must still parse."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def pos(line: int, col: int) -> int:
        # ast columns are UTF-8 byte offsets
        text = lines[line - 1]
        return offsets[line - 1] + len(text.encode()[:col].decode())

    start, end = pos(mutant.line, mutant.col), pos(mutant.end_line, mutant.end_col)
    mutated = source[:start] + mutant.text + source[end:]
    ast.parse(mutated)
    return mutated


# ------------------------------------------------------------------ choosing and running


def choose(mutants: list[Mutant], sample: int | None, seed: int) -> list[Mutant]:
    """A stratified random sample: each module gets a share proportional to its mutant count."""
    if sample is None or sample >= len(mutants):
        return mutants
    by_module: dict[str, list[Mutant]] = defaultdict(list)
    for m in mutants:
        by_module[m.module].append(m)
    rng = random.Random(seed)
    chosen: list[Mutant] = []
    for module in sorted(by_module):
        group = by_module[module]
        share = max(1, round(sample * len(group) / len(mutants)))
        chosen += rng.sample(group, min(share, len(group)))
    return sorted(chosen, key=lambda m: (m.module, m.line, m.col, m.description))


#: the sandboxes alive, so that a SIGTERM can stop their runs and remove them at once
_OPEN: list[Sandbox] = []


class Sandbox:
    """A private copy of the repository in which one mutant at a time is written."""

    def __init__(self, sources: dict[str, str]) -> None:
        _OPEN.append(self)
        #: the module texts the mutants were made from; the sandbox never reads the working tree again
        self.sources = sources
        self.dir = Path(tempfile.mkdtemp(prefix="dpch-mutate-"))
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".venv", ".git", "*.egg-info", ".hypothesis")
        for name in ("dpch", "tests", "docs"):  # docs: tests check them against the code
            shutil.copytree(ROOT / name, self.dir / name, ignore=ignore)
        for name in ("pyproject.toml", "README.md"):  # README.md: tests check what it says too
            shutil.copy(ROOT / name, self.dir / name)
        for module, text in sources.items():
            (self.dir / module).write_text(text)
        (self.dir / "mutation_profile.py").write_text(_PLUGIN)
        self.env = dict(os.environ, PYTHONPATH=str(self.dir), PYTHONDONTWRITEBYTECODE="1",
                        PYTHONHASHSEED="0", DPCH_ALLOW_FIXED_SEED="1")
        self.worker: subprocess.Popen[bytes] | None = None
        self.running: int | None = None  # the process group of the pytest run in progress
        self._pending = b""
        # the copy, not an installed dpch, must be what the tests import
        where = subprocess.run([sys.executable, "-c", "import dpch; print(dpch.__file__)"], cwd=self.dir,
                               env=self.env, capture_output=True, text=True, check=True).stdout.strip()
        if not where.startswith(str(self.dir)):
            raise RuntimeError(f"tests would import dpch from {where}, not from the sandbox {self.dir}")

    def _worker_process(self) -> subprocess.Popen[bytes]:
        if self.worker is None or self.worker.poll() is not None:
            self.worker = subprocess.Popen([sys.executable, "-c", _WORKER], cwd=self.dir, env=self.env,
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            self._pending = b""
        return self.worker

    def _answer(self, worker: subprocess.Popen[bytes], timeout: float | None) -> dict[str, int] | None:
        """The worker's next JSON line, or None when ``timeout`` seconds pass first (read unbuffered, so
        that select() sees every byte the worker wrote)."""
        assert worker.stdout is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([worker.stdout.fileno()], [], [], left)
            if not ready:
                return None
            chunk = os.read(worker.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError("the mutation worker died")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        answer: dict[str, int] = json.loads(line)
        return answer

    def _pytest(self, tests: list[str], timeout: float) -> str:
        """One pytest run, forked from the worker: killed, survived, timeout or error."""
        args = ["-x", "-q", "-p", "no:cacheprovider", "-p", "mutation_profile", "--no-header",
                "-o", "addopts=--import-mode=importlib", *tests]
        worker = self._worker_process()
        assert worker.stdin is not None
        worker.stdin.write((json.dumps(args) + "\n").encode())
        worker.stdin.flush()
        started = self._answer(worker, None)
        assert started is not None
        self.running = started["pid"]
        done = self._answer(worker, timeout)
        self.running = None
        if done is None:
            try:
                os.killpg(started["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._answer(worker, None)  # the worker reports the killed run
            return "timeout"
        code = done["code"]
        if code == 0:
            return "survived"
        return "killed" if code in (1, 2) or code < 0 else "error"  # 2: interrupted/collection error

    def run(self, mutant: Mutant | None, module: str, timeout: float, lane: str = "fast",
            covering: list[str] | None = None, test_times: dict[str, float] | None = None) -> tuple[str, float]:
        """The mutant's tests: those the coverage map says reach its lines (``covering``, fastest first), or
        without a map the fast lane (``TESTS``) then, if it survived there, the slow lane (``SLOW_TESTS``:
        generated tests that take minutes), so a mutant is judged on targeted tests first. A mutant no test
        reaches is ``uncovered`` (a survivor) without running anything."""
        if covering is not None and not covering:
            return "uncovered", 0.0
        path = self.dir / module
        original = self.sources[module]
        if mutant is not None:
            path.write_text(apply(original, mutant))
        selection, limits = self.dir / ".mutation-selection.json", self.dir / ".mutation-limits.json"
        too_slow = self.dir / ".mutation-too-slow"
        for stale in (selection, limits, too_slow):
            stale.unlink(missing_ok=True)
        if covering is not None:
            # by file, filtered to the covering node ids after collection (mutation_profile's hook)
            selection.write_text(json.dumps(covering))
            if test_times:
                limits.write_text(json.dumps({t: per_test_limit(test_times.get(t)) for t in covering}))
            lanes = [list(dict.fromkeys(t.split("::")[0] for t in covering))]
        else:
            lanes = [TESTS[module]] + ([SLOW_TESTS[module]] if lane == "both" and module in SLOW_TESTS else [])
        start = time.monotonic()
        status = "survived"
        try:
            for i, chosen in enumerate(lanes):
                tests = [t for t in chosen if (self.dir / t.split("::")[0]).exists()]
                status = self._pytest(tests, timeout if i == 0 else max(timeout, SLOW_TIMEOUT))
                if status == "killed" and too_slow.exists():
                    status = "timeout"  # one test ran past its limit (mutation_profile's alarm)
                if status != "survived":
                    break
        finally:
            path.write_text(original)
        return status, time.monotonic() - start

    def close(self) -> None:
        if self.running is not None:  # a run in its own process group outlives the worker: stop it too
            try:
                os.killpg(self.running, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.worker is not None and self.worker.poll() is None:
            self.worker.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def _baseline(sandbox: Sandbox, modules: list[str]) -> dict[str, float]:
    """Runs each distinct test set (both lanes) once unmutated: it must pass, and its time sets the timeout."""
    times: dict[str, float] = {}
    seen: dict[tuple[str, ...], float] = {}
    for module in modules:
        key = tuple(TESTS[module]) + tuple(SLOW_TESTS.get(module, ()))
        if key not in seen:
            # the fast lane only: the slow lane runs for survivors alone, under its own generous timeout
            status, seconds = sandbox.run(None, module, timeout=1800, lane="fast")
            if status != "survived":
                sys.exit(f"the unmutated tests for {module} do not pass ({status}); fix them first")
            seen[key] = seconds
        times[module] = seen[key]
    return times


def run_all(mutants: list[Mutant], sources: dict[str, str], jobs: int, timeout_factor: float,
            extra: list[str] | None = None) -> list[Outcome]:
    coverage_map = json.loads(MAP.read_text()) if MAP.exists() else None
    covering = {m.key: covering_tests(m, coverage_map, sources) for m in mutants}
    if extra:
        # tests written after the map (the ones that target a rerun's survivors): run first, for every mutant
        # the map judges (a mutant on the lanes runs them too: they are prepended to its fast lane below)
        covering = {key: (None if tests is None else [*extra, *(t for t in tests if t not in extra)])
                    for key, tests in covering.items()}
    # modules the map does not cover as they are now run their lanes; those need a baseline (a test set
    # that fails unmutated would kill every mutant)
    unmapped = sorted({m.module for m in mutants if covering[m.key] is None})
    if coverage_map is not None:
        print(f"map: {len(mutants) - sum(covering[m.key] is None for m in mutants)} of {len(mutants)} mutants run "
              f"the tests that reach their lines; {sum(covering[m.key] == [] for m in mutants)} reached by none",
              flush=True)
    sandboxes = [Sandbox(sources) for _ in range(jobs)]
    try:
        base: dict[str, float] = {}
        if unmapped:
            print(f"baseline: running the unmutated tests of {len(unmapped)} module(s)…", flush=True)
            base = _baseline(sandboxes[0], unmapped)
        times = coverage_map["times"] if coverage_map is not None else {}
        free = list(sandboxes)
        outcomes: list[Outcome] = []
        counts: dict[str, int] = defaultdict(int)
        start = time.monotonic()

        def work(mutant: Mutant) -> Outcome:
            box = free.pop()
            tests = covering[mutant.key]
            try:
                expected = base[mutant.module] if tests is None else 3.0 + sum(times.get(t, 5.0) for t in tests)
                status, seconds = box.run(mutant, mutant.module, max(30.0, expected * timeout_factor), lane="both",
                                          covering=tests, test_times=times)
            finally:
                free.append(box)
            return Outcome(mutant, status, seconds)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for outcome in pool.map(work, mutants):
                outcomes.append(outcome)
                record(outcome, sources)
                counts[outcome.status] += 1
                done = len(outcomes)
                eta = (time.monotonic() - start) / done * (len(mutants) - done)
                killed = counts["killed"] + counts["timeout"]
                print(f"[{done}/{len(mutants)}] {outcome.status:9} {outcome.mutant.module}:{outcome.mutant.line} "
                      f"{outcome.mutant.description}  (score {killed}/{done}, eta {eta / 60:.0f} min)", flush=True)
        return outcomes
    finally:
        for box in sandboxes:
            box.close()


# ------------------------------------------------------------------ the coverage map


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def build_map(sources: dict[str, str], modules: list[str] | None = None, tests: list[str] | None = None) -> None:
    """Runs :data:`MAP_TESTS` (or ``tests``) once under coverage with one context per test (pytest-cov's
    ``--cov-context test``) and writes, per module, which tests reach each line and how long each test takes.

    With ``modules`` only those are recorded, merged into the map already written: a campaign split by
    module maps each part with its own tests (a line reached only by a test left out of ``tests`` then
    counts as uncovered, a survivor: the partial map can under-state the score, never over-state it)."""
    box = Sandbox(sources)
    recorded = set(modules or sources)
    try:
        (box.dir / "mutation_timer.py").write_text(_TIMER)
        times_file = box.dir / "times.json"
        env = dict(box.env, DPCH_MUTATION_TIMES=str(times_file), COVERAGE_FILE=str(box.dir / ".coverage"))
        packages = sorted({module.rsplit("/", 1)[0].replace("/", ".") for module in sources})
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutation_profile",
               "-p", "mutation_timer", "--no-header", "-o", "addopts=--import-mode=importlib",
               *(f"--cov={p}" for p in packages), "--cov-context=test", "--cov-report=",
               *[t for t in (tests or MAP_TESTS) if (box.dir / t.split("::")[0]).exists()]]
        print("map: running the tests under coverage (this takes a while)…", flush=True)
        subprocess.run(cmd, cwd=box.dir, env=env, check=False)
        import coverage  # noqa: PLC0415 — only --map needs it

        data = coverage.CoverageData(basename=str(box.dir / ".coverage"))
        data.read()
        lines: dict[str, dict[str, list[str]]] = {}
        for filename in data.measured_files():
            module = str(Path(filename).resolve().relative_to(box.dir.resolve()))
            if module not in recorded:
                continue
            by_line = data.contexts_by_lineno(filename)
            # a line run at import has the empty context (no test open): it is marked IMPORTED, so that a
            # mutant there (a table built by a helper function at import) is judged on its module's lanes
            lines[module] = {str(n): sorted({c.split("|")[0] if c else IMPORTED for c in ctx})
                             for n, ctx in by_line.items()}
        timing = json.loads(times_file.read_text()) if times_file.exists() else {"times": {}, "failed": []}
        times, failed = timing["times"], set(timing["failed"])
        if failed:  # a test that fails unmutated would "kill" every mutant it reaches
            print(f"map: {len(failed)} test(s) failed and are left out: {sorted(failed)[:5]}", flush=True)
            lines = {m: {n: [x for x in ts if x not in failed] for n, ts in by.items()} for m, by in lines.items()}
        old = json.loads(MAP.read_text()) if MAP.exists() and modules else {"sha": {}, "lines": {}, "times": {}}
        MAP.parent.mkdir(exist_ok=True)
        MAP.write_text(json.dumps({"sha": {**old["sha"], **{m: _sha(sources[m]) for m in recorded}},
                                   "lines": {**old["lines"], **{m: lines.get(m, {}) for m in recorded}},
                                   "times": {**old["times"], **times}}))
        print(f"map: {sum(len(v) for v in lines.values())} lines of {len(lines)} modules → {MAP}", flush=True)
    finally:
        box.close()


@functools.cache
def _function_lines(source: str) -> frozenset[int]:
    """The lines inside function bodies: the rest of a module (constants, class attributes, defaults) runs
    when it is imported, which coverage records under no test's context."""
    return frozenset(n for node in ast.walk(ast.parse(source))
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                     for stmt in node.body
                     for n in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))


@functools.cache
def _readers(source: str, line: int) -> frozenset[int]:
    """The lines inside functions that read a name the module-level assignment at ``line`` binds."""
    tree = ast.parse(source)
    names = {t.id for stmt in tree.body if isinstance(stmt, ast.Assign | ast.AnnAssign)
             and stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)
             for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]) if isinstance(t, ast.Name)}
    inside = _function_lines(source)
    return frozenset(node.lineno for node in ast.walk(tree)
                     if isinstance(node, ast.Name) and node.id in names and node.lineno in inside)


def covering_tests(mutant: Mutant, coverage_map: dict | None, sources: dict[str, str]) -> list[str] | None:
    """The tests that reach the mutant's lines, fastest first (None: no map for this module as it is now)."""
    if coverage_map is None or coverage_map["sha"].get(mutant.module) != _sha(sources[mutant.module]):
        return None
    by_line = coverage_map["lines"].get(mutant.module, {})
    lines: Iterable[int] = range(mutant.line, mutant.end_line + 1)
    if mutant.line not in _function_lines(sources[mutant.module]):
        # runs at import, before any test's coverage context opens: the tests that reach the functions
        # reading the constant it assigns judge it; anything else (a class attribute, a default) the lanes
        lines = _readers(sources[mutant.module], mutant.line)
        if not lines:
            return None
    tests = {t for n in lines for t in by_line.get(str(n), [])}
    if IMPORTED in tests:
        # run when the module is imported, before any test's context: every test that imports the module
        # may depend on it, so the module's lanes judge it (the map cannot narrow them)
        return None
    times = coverage_map["times"]
    return sorted(tests, key=lambda t: (times.get(t, 60.0), t))


# ------------------------------------------------------------------ the campaign's ledger


def record(outcome: Outcome, sources: dict[str, str]) -> None:
    """Appends one judged mutant to :data:`RESULTS`, with the hash of the module it was made from."""
    mutant = outcome.mutant
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(json.dumps({"module": mutant.module, "sha": _sha(sources[mutant.module]), "key": mutant.key,
                              "description": mutant.description, "context": _context(mutant, sources),
                              "status": outcome.status, "seconds": round(outcome.seconds, 1),
                              "at": time.strftime("%Y-%m-%dT%H:%M:%S")}, ensure_ascii=False) + "\n")


def recorded(sources: dict[str, str], everything: list[Mutant]) -> dict[str, dict]:
    """The latest recorded outcome of each current mutant: by key for the module as it is now, or else (the
    module was edited since) by the same change on the same line text, marked ``carried``."""
    if not RESULTS.exists():
        return {}
    exact: dict[str, dict] = {}
    by_context: dict[tuple[str, str, str], dict] = {}
    for line in RESULTS.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row["module"] in sources and row["sha"] == _sha(sources[row["module"]]):
            exact[row["key"]] = row
        by_context[(row["module"], row["description"], row["context"])] = row
    found: dict[str, dict] = {}
    for m in everything:
        if m.key in exact:
            found[m.key] = exact[m.key]
        elif (row := by_context.get((m.module, m.description, _context(m, sources)))) is not None:
            found[m.key] = dict(row, carried=True)
    return found


def equivalents() -> dict[tuple[str, str, str], str]:
    """(module, description, line text) → why the mutant cannot change what is released or charged."""
    if not EQUIVALENT.exists():
        return {}
    return {(e["module"], e["description"], e["context"]): e["reason"] for e in json.loads(EQUIVALENT.read_text())}


def campaign(sources: dict[str, str], everything: list[Mutant]) -> str:
    """The full campaign so far, per module: mutants, judged, killed, equivalent, open survivors, score."""
    results = recorded(sources, everything)
    argued = equivalents()
    rows = ["| module | mutants | judged | killed | equivalent | open | score | score without equivalent | "
            "test time |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    totals = defaultdict(float)
    by_module: dict[str, list[Mutant]] = defaultdict(list)
    for m in everything:
        by_module[m.module].append(m)
    open_rows: list[str] = []
    for module in sorted(by_module):
        group = by_module[module]
        judged = [(m, results[m.key]) for m in group if m.key in results]
        killed = sum(r["status"] in ("killed", "timeout") for _, r in judged)
        equivalent = sum(r["status"] not in ("killed", "timeout")
                         and (m.module, m.description, _context(m, sources)) in argued for m, r in judged)
        survivors = len(judged) - killed - equivalent
        seconds = sum(r["seconds"] for _, r in judged)
        for key, value in (("mutants", len(group)), ("judged", len(judged)), ("killed", killed),
                           ("equivalent", equivalent), ("open", survivors), ("seconds", seconds)):
            totals[key] += value
        if not judged:
            rows.append(f"| `{module.removeprefix('dpch/')}` | {len(group)} | 0 | | | | | | |")
            continue
        score = 100 * killed / len(judged)
        # every judged mutant argued equivalent: no score to give without them
        strict = f"{100 * killed / (len(judged) - equivalent):.1f}%" if len(judged) > equivalent else "–"
        rows.append(f"| `{module.removeprefix('dpch/')}` | {len(group)} | {len(judged)} | {killed} | {equivalent} | "
                    f"{survivors} | {score:.1f}% | {strict} | {seconds / 60:.0f} min |")
        open_rows += [f"  {m.module}:{m.line}  {m.description}  [{r['status']}]  → {_short(m.text, 70)}"
                      for m, r in judged if r["status"] not in ("killed", "timeout")
                      and (m.module, m.description, _context(m, sources)) not in argued]
    t = totals
    rows.append(f"| **total** | {t['mutants']:.0f} | {t['judged']:.0f} | {t['killed']:.0f} | {t['equivalent']:.0f} | "
                f"{t['open']:.0f} | {100 * t['killed'] / max(1, t['judged']):.1f}% | "
                f"{100 * t['killed'] / max(1, t['judged'] - t['equivalent']):.1f}% | {t['seconds'] / 3600:.1f} h |")
    text = "\n".join(rows) + "\n"
    if open_rows:
        text += "\nopen survivors (neither killed nor argued in tools/mutation_equivalent.json):\n"
        text += "\n".join(open_rows) + "\n"
    return text


# ------------------------------------------------------------------ reporting


def report(outcomes: list[Outcome]) -> str:
    by_module: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_module[o.mutant.module].append(o)
    rows = ["module                            mutants  killed  timeout  survived  uncovered  error  score"]
    total_killed = 0
    for module in sorted(by_module):
        group = by_module[module]
        c = {s: sum(o.status == s for o in group) for s in ("killed", "timeout", "survived", "uncovered", "error")}
        killed = c["killed"] + c["timeout"]
        total_killed += killed
        rows.append(f"{module:34} {len(group):7} {c['killed']:7} {c['timeout']:8} {c['survived']:9} "
                    f"{c['uncovered']:10} {c['error']:6}  {100 * killed / len(group):4.0f}%")
    n = len(outcomes)
    rows.append(f"total: {total_killed} of {n} killed ({100 * total_killed / max(n, 1):.1f}%)")
    survivors = [o for o in outcomes if o.status in ("survived", "uncovered", "error")]
    if survivors:
        rows.append("")
        rows.append("survivors:")
        rows += [f"  {o.mutant.module}:{o.mutant.line}  {o.mutant.description}  [{o.status}]"
                 f"  → {_short(o.mutant.text, 70)}" for o in survivors]
    return "\n".join(rows) + "\n"


def _context(mutant: Mutant, sources: dict[str, str]) -> str:
    """The mutated source line, stripped: identifies a mutant across edits that move lines."""
    return sources[mutant.module].splitlines()[mutant.line - 1].strip()


def _matching(past: list[dict], everything: list[Mutant], sources: dict[str, str]) -> list[Mutant]:
    """The mutants of a past report: same key, or (after edits moved lines) the same change on the same line text."""
    by_key = {m.key: m for m in everything}
    by_context: dict[tuple[str, str, str], list[Mutant]] = defaultdict(list)
    for m in everything:
        by_context[(m.module, m.description, _context(m, sources))].append(m)
    chosen: dict[str, Mutant] = {}
    for o in past:
        found = [by_key[o["key"]]] if o["key"] in by_key else by_context.get(
            (o["module"], o["description"], o.get("context", "")), [])
        if not found:
            print(f"gone (the code changed): {o['module']}:{o['line']} {o['description']}", flush=True)
        chosen.update((m.key, m) for m in found)
    return sorted(chosen.values(), key=lambda m: (m.module, m.line, m.col, m.description))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--sample", type=int, help="a stratified random sample of N mutants")
    mode.add_argument("--full", action="store_true", help="every mutant")
    mode.add_argument("--rerun", type=Path, help="only the survivors listed in a past JSON report")
    parser.add_argument("--seed", type=int, default=1, help="seed of the sample (default 1)")
    parser.add_argument("--module", action="append",
                        help="keep only these modules of the chosen mutants (repeatable; same sample)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (default 1)")
    parser.add_argument("--timeout-factor", type=float, default=3.0,
                        help="a mutant times out after this many times its tests' unmutated run time")
    parser.add_argument("--report", type=Path, default=Path("mutation-report.txt"),
                        help="text report (a JSON twin is written next to it)")
    parser.add_argument("--list", action="store_true", help="only count and list the mutants")
    parser.add_argument("--tests", action="append", metavar="TEST",
                        help="tests to run first for every mutant (written after the coverage map: e.g. the "
                             "tests that target a rerun's survivors); repeatable")
    parser.add_argument("--resume", action="store_true",
                        help=f"skip the mutants already judged in {RESULTS.name} (the campaign, run by parts)")
    parser.add_argument("--campaign", action="store_true",
                        help=f"print the per-module table of every mutant judged so far ({RESULTS.name}) and exit")
    parser.add_argument("--map", action="store_true",
                        help=f"run the tests once under coverage and write which reach each line ({MAP.name}); "
                             "with --module, only those modules, merged into the map")
    parser.add_argument("--map-tests", action="append",
                        help="with --map: the tests to run (repeatable; default: the privacy test directories)")
    args = parser.parse_args(argv)

    for module in args.module or []:
        if module not in TESTS:
            parser.error(f"{module} has no test mapping; known: {', '.join(TESTS)}")
    sources = {module: (ROOT / module).read_text() for module in TESTS}
    if args.map:
        build_map(sources, args.module, args.map_tests)
        return 0
    everything = [m for module in TESTS for m in mutants_of(module, sources[module])]
    if args.campaign:
        print(campaign(sources, everything), end="")
        return 0
    if args.rerun:
        past = json.loads(args.rerun.read_text())
        wanted = [o for o in past["outcomes"] if o["status"] in ("survived", "uncovered", "error")]
        chosen = _matching(wanted, everything, sources)
        argued = equivalents()  # argued equivalent: rerunning cannot kill them, only cost minutes each
        chosen = [m for m in chosen if (m.module, m.description, _context(m, sources)) not in argued]
    else:
        chosen = choose(everything, None if args.full else (args.sample or 200), args.seed)
    if args.module:  # after sampling: the same sample as without --module, restricted
        chosen = [m for m in chosen if m.module in args.module]
    if args.resume:
        done = recorded(sources, everything)
        print(f"resume: {sum(m.key in done for m in chosen)} of {len(chosen)} already judged", flush=True)
        chosen = [m for m in chosen if m.key not in done]
    if args.list:
        for m in chosen:
            print(f"{m.module}:{m.line}  {m.description}")
        print(f"{len(chosen)} of {len(everything)} mutants")
        return 0
    print(f"{len(chosen)} of {len(everything)} mutants, {args.jobs} job(s)", flush=True)
    if args.tests:
        for module in {m.module for m in chosen}:  # the lanes too, for modules the map does not cover
            TESTS[module] = [*args.tests, *(t for t in TESTS[module] if t not in args.tests)]
    outcomes = run_all(chosen, sources, max(1, args.jobs), args.timeout_factor, args.tests)
    text = report(outcomes)
    args.report.write_text(text)
    args.report.with_suffix(".json").write_text(json.dumps(
        {"outcomes": [dict(asdict(o.mutant), key=o.mutant.key, context=_context(o.mutant, sources),
                           status=o.status, seconds=round(o.seconds, 1)) for o in outcomes]},
        ensure_ascii=False, indent=1))
    print(text)
    print(f"report written to {args.report}")
    return 0


if __name__ == "__main__":
    # stop every run and remove every copy here: unwinding would wait for the thread blocked on a run
    signal.signal(signal.SIGTERM, lambda *_: ([box.close() for box in list(_OPEN)], os._exit(143)))
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # sandboxes are removed by run_all's finally; the tree was never touched
        sys.exit(130)

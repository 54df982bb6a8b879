#!/usr/bin/env python3
"""A small AST mutator for dpch's privacy-critical modules (issue 12, "Mutation score").

    python tools/mutate.py --sample 200 --seed 1 --report mutation-report.txt
    python tools/mutate.py --full --jobs 2 --report mutation-report.txt
    python tools/mutate.py --list                       # count the mutants, run nothing
    python tools/mutate.py --rerun mutation-report.json # only the survivors of a past run

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
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
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

#: module → the tests that cover it, fastest and most targeted first (pytest stops at the first failure)
TESTS: dict[str, list[str]] = {
    "dpch/sql/functions.py": _REGISTRY_TESTS,
    "dpch/sql/guards.py": _REGISTRY_TESTS,
    "dpch/sql/expression_types.py": _REGISTRY_TESTS,
    "dpch/sql/value_rules.py": [*_SQL_TESTS, "tests/sql/test_registry.py"],
    "dpch/sql/analyze.py": [*_SQL_TESTS, "tests/soundness/test_rows_cannot_fail.py"],
    "dpch/sql/bounds.py": _SQL_TESTS,
    "dpch/sql/aggregates.py": _SQL_TESTS,
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
}

#: a pytest plugin loaded into every run: Hypothesis derandomized, so verdicts do not depend on the run
_PLUGIN = '''
from hypothesis import HealthCheck, settings
settings.register_profile("mutation", derandomize=True, deadline=None, print_blob=False,
                          suppress_health_check=list(HealthCheck))
settings.load_profile("mutation")
'''

_FLIP = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_BINOP = {ast.Mult: ast.Div, ast.Div: ast.Mult, ast.Add: ast.Sub, ast.Sub: ast.Add, ast.FloorDiv: ast.Mult}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
           ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Mult: "*",
           ast.Div: "/", ast.Add: "+", ast.Sub: "-", ast.FloorDiv: "//"}
_SWAP_CALL = {"min": "max", "max": "min"}


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
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name == "abs" and len(node.args) == 1:
            yield "(" + ast.unparse(node.args[0]) + ")", "drop abs()"
        elif name in _SWAP_CALL:
            new = _copy(node)
            new.func.id = _SWAP_CALL[name]
            yield new, f"{name}() → {_SWAP_CALL[name]}()"
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = node.value
        new_value = 1 if value == 0 else value + 1
        yield repr(new_value), f"constant {value!r} → {new_value!r}"
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


def mutants_of(module: str, source: str | None = None) -> list[Mutant]:
    """Every mutant of ``module`` (a path relative to the repository), in source order."""
    source = (ROOT / module).read_text() if source is None else source
    tree = ast.parse(source)
    lines = source.splitlines()
    skip_nodes, skip_lines = _non_code(tree), _skipped_lines(source)
    out: list[Mutant] = []
    for node in ast.walk(tree):
        if id(node) in skip_nodes or getattr(node, "lineno", None) in skip_lines:
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


class Sandbox:
    """A private copy of the repository in which one mutant at a time is written."""

    def __init__(self, sources: dict[str, str]) -> None:
        #: the module texts the mutants were made from; the sandbox never reads the working tree again
        self.sources = sources
        self.dir = Path(tempfile.mkdtemp(prefix="dpch-mutate-"))
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".venv", ".git", "*.egg-info", ".hypothesis")
        for name in ("dpch", "tests", "sql_fixtures"):
            shutil.copytree(ROOT / name, self.dir / name, ignore=ignore)
        shutil.copy(ROOT / "pyproject.toml", self.dir / "pyproject.toml")
        for module, text in sources.items():
            (self.dir / module).write_text(text)
        (self.dir / "mutation_profile.py").write_text(_PLUGIN)
        self.env = dict(os.environ, PYTHONPATH=str(self.dir), PYTHONDONTWRITEBYTECODE="1",
                        PYTHONHASHSEED="0", DPCH_ALLOW_FIXED_SEED="1")
        # the copy, not an installed dpch, must be what the tests import
        where = subprocess.run([sys.executable, "-c", "import dpch; print(dpch.__file__)"], cwd=self.dir,
                               env=self.env, capture_output=True, text=True, check=True).stdout.strip()
        if not where.startswith(str(self.dir)):
            raise RuntimeError(f"tests would import dpch from {where}, not from the sandbox {self.dir}")

    def run(self, mutant: Mutant | None, module: str, timeout: float) -> tuple[str, float]:
        path = self.dir / module
        original = self.sources[module]
        if mutant is not None:
            path.write_text(apply(original, mutant))
        tests = [t for t in TESTS[module] if (self.dir / t).exists()]
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "mutation_profile",
               "--no-header", "-o", "addopts=--import-mode=importlib", *tests]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=self.dir, env=self.env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, timeout=timeout, start_new_session=True)
            status = "survived" if proc.returncode == 0 else "killed"
            if proc.returncode not in (0, 1):  # 2: interrupted/collection error, 3/4: internal/usage
                status = "killed" if proc.returncode == 2 else "error"
        except subprocess.TimeoutExpired:
            status = "timeout"
        finally:
            path.write_text(original)
        return status, time.monotonic() - start

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _baseline(sandbox: Sandbox, modules: list[str]) -> dict[str, float]:
    """Runs each distinct test set once unmutated: it must pass, and its time sets the timeout."""
    times: dict[str, float] = {}
    seen: dict[tuple[str, ...], float] = {}
    for module in modules:
        key = tuple(TESTS[module])
        if key not in seen:
            status, seconds = sandbox.run(None, module, timeout=900)
            if status != "survived":
                sys.exit(f"the unmutated tests for {module} do not pass ({status}); fix them first")
            seen[key] = seconds
        times[module] = seen[key]
    return times


def run_all(mutants: list[Mutant], sources: dict[str, str], jobs: int, timeout_factor: float) -> list[Outcome]:
    modules = sorted({m.module for m in mutants})
    sandboxes = [Sandbox(sources) for _ in range(jobs)]
    try:
        print(f"baseline: running the unmutated tests of {len(modules)} module(s)…", flush=True)
        base = _baseline(sandboxes[0], modules)
        free = list(sandboxes)
        outcomes: list[Outcome] = []
        counts: dict[str, int] = defaultdict(int)
        start = time.monotonic()

        def work(mutant: Mutant) -> Outcome:
            box = free.pop()
            try:
                limit = max(30.0, base[mutant.module] * timeout_factor)
                status, seconds = box.run(mutant, mutant.module, limit)
            finally:
                free.append(box)
            return Outcome(mutant, status, seconds)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for outcome in pool.map(work, mutants):
                outcomes.append(outcome)
                counts[outcome.status] += 1
                done = len(outcomes)
                eta = (time.monotonic() - start) / done * (len(mutants) - done)
                killed = counts["killed"] + counts["timeout"]
                print(f"[{done}/{len(mutants)}] {outcome.status:8} {outcome.mutant.module}:{outcome.mutant.line} "
                      f"{outcome.mutant.description}  (score {killed}/{done}, eta {eta / 60:.0f} min)", flush=True)
        return outcomes
    finally:
        for box in sandboxes:
            box.close()


# ------------------------------------------------------------------ reporting


def report(outcomes: list[Outcome]) -> str:
    by_module: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_module[o.mutant.module].append(o)
    rows = ["module                            mutants  killed  timeout  survived  error  score"]
    total_killed = 0
    for module in sorted(by_module):
        group = by_module[module]
        c = {s: sum(o.status == s for o in group) for s in ("killed", "timeout", "survived", "error")}
        killed = c["killed"] + c["timeout"]
        total_killed += killed
        rows.append(f"{module:34} {len(group):7} {c['killed']:7} {c['timeout']:8} {c['survived']:9} {c['error']:6}"
                    f"  {100 * killed / len(group):4.0f}%")
    n = len(outcomes)
    rows.append(f"total: {total_killed} of {n} killed ({100 * total_killed / max(n, 1):.1f}%)")
    survivors = [o for o in outcomes if o.status in ("survived", "error")]
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
    args = parser.parse_args(argv)

    for module in args.module or []:
        if module not in TESTS:
            parser.error(f"{module} has no test mapping; known: {', '.join(TESTS)}")
    sources = {module: (ROOT / module).read_text() for module in TESTS}
    everything = [m for module in TESTS for m in mutants_of(module, sources[module])]
    if args.rerun:
        past = json.loads(args.rerun.read_text())
        wanted = [o for o in past["outcomes"] if o["status"] in ("survived", "error")]
        chosen = _matching(wanted, everything, sources)
    else:
        chosen = choose(everything, None if args.full else (args.sample or 200), args.seed)
    if args.module:  # after sampling: the same sample as without --module, restricted
        chosen = [m for m in chosen if m.module in args.module]
    if args.list:
        for m in chosen:
            print(f"{m.module}:{m.line}  {m.description}")
        print(f"{len(chosen)} of {len(everything)} mutants")
        return 0
    print(f"{len(chosen)} of {len(everything)} mutants, {args.jobs} job(s)", flush=True)
    outcomes = run_all(chosen, sources, max(1, args.jobs), args.timeout_factor)
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
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds, so the sandboxes are removed
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # sandboxes are removed by run_all's finally; the tree was never touched
        sys.exit(130)

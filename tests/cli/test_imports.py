"""The CLI's modules import each other without a cycle, and import inside a function only what is
slow to load (each such import says so in a ``# start-up:`` comment), never to dodge a cycle.

``dpch --version`` and ``import dpch`` load none of the heavy dependencies (NumPy, SciPy, sqlglot,
the ClickHouse client, chdb): checked by the modules a fresh interpreter holds afterwards, not by
timing (docs/development.md; the times are in tests/bench/bench_startup.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import dpch.cli

CLI = Path(dpch.cli.__file__).parent
PACKAGE = CLI.parent
#: modules outside the CLI whose heavy imports were moved into the functions that need them
LAZY_MODULES = ("store/engine.py", "mechanisms/discrete.py", "mechanisms/normal.py")
#: what a command that opens no session must not load (each costs 0.05–0.3 s to import)
HEAVY = ("numpy", "scipy", "sqlglot", "clickhouse_connect", "chdb", "pyarrow", "pandas", "prompt_toolkit",
         "urllib3", "dpch.accounting", "dpch.mechanisms", "dpch.pipeline", "dpch.privacy", "dpch.policy",
         "dpch.session", "dpch.api", "dpch.connection", "dpch.server")


def _modules() -> dict[str, ast.Module]:
    return {f"dpch.cli.{p.stem}": ast.parse(p.read_text()) for p in sorted(CLI.glob("*.py")) if p.stem != "__init__"}


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return []


def test_cli_modules_form_no_import_cycle():
    modules = _modules()
    graph = {name: {m for node in tree.body for m in _imported(node) if m in modules}
             for name, tree in modules.items()}
    assert {"dpch.cli.audit", "dpch.cli.serve", "dpch.cli.context"} <= graph["dpch.cli.main"]
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for dep in graph[name]:
            assert state.get(dep) != "open", f"import cycle: {' -> '.join([*path, name, dep])}"
            if dep not in state:
                visit(dep, [*path, name])
        state[name] = "done"

    for name in graph:
        if name not in state:
            visit(name, [])
    # the commands in their own modules do not import the module that registers them
    assert all("dpch.cli.main" not in deps for name, deps in graph.items() if name != "dpch.cli.main")


def _function_imports(path: Path) -> list[tuple[str, int, str, list[ast.Import | ast.ImportFrom]]]:
    """(function, line of its first import, the line above it, its imports) per function that imports."""
    lines = path.read_text().splitlines()
    found = []
    functions = (n for n in ast.walk(ast.parse("\n".join(lines)))
                 if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    for func in functions:
        imports = [n for n in ast.walk(func) if isinstance(n, ast.Import | ast.ImportFrom)]
        if imports:
            first = min(n.lineno for n in imports)
            found.append((func.name, first, lines[first - 2].strip(), imports))
    return found


def test_function_level_imports_are_only_for_start_up_speed():
    for name in _modules():
        for func, first, above, imports in _function_imports(CLI / f"{name.rsplit('.', 1)[1]}.py"):
            assert above.startswith("# start-up:"), f"{name}.{func} imports inside the function " \
                                                      f"(line {first}) without a '# start-up:' reason"
            for node in imports:  # never a dpch.cli module: those are cheap, so only a cycle would need it
                assert not any(m.startswith("dpch.cli") and m != "dpch.cli.shell_input" for m in _imported(node)), \
                    (name, func, _imported(node))


def test_the_lazy_imports_outside_the_cli_say_why():
    for module in LAZY_MODULES:
        found = _function_imports(PACKAGE / module)
        assert found, f"{module} no longer imports inside a function: drop it from LAZY_MODULES"
        for func, first, above, _ in found:
            assert above.startswith("# start-up:"), f"{module}:{func} imports inside the function " \
                                                      f"(line {first}) without a '# start-up:' reason"


def _loaded_after(code: str) -> set[str]:
    run = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint(*sorted(sys.modules))"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    return set(run.stdout.split())


def _heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY)}


def test_the_cli_and_its_version_load_no_heavy_dependency():
    loaded = _loaded_after("from click.testing import CliRunner\nfrom dpch.cli.main import cli\n"
                           "assert CliRunner().invoke(cli, ['--version']).output.startswith('dpch, version')")
    assert "dpch.cli.main" in loaded and "click" in loaded  # negative control: the probe sees imports
    assert _heavy(loaded) == set()


def test_import_dpch_is_cheap_and_its_public_names_load_on_first_use():
    assert _heavy(_loaded_after("import dpch\nassert dpch.__version__")) == set()
    loaded = _loaded_after("import dpch\nfrom dpch import Session\nassert callable(dpch.connect)\n"
                           "assert {'Budget', 'Release', 'Policy', 'PrivateSession'} <= set(dir(dpch))")
    assert {"dpch.session", "dpch.connection", "numpy"} <= loaded  # the names resolve to the real stack


def test_the_lazy_public_names_are_the_real_ones():
    import dpch
    from dpch.accounting.budget import Budget
    from dpch.connection import connect
    from dpch.pipeline.report import Release

    assert (dpch.Budget, dpch.connect, dpch.Release) == (Budget, connect, Release)
    assert all(hasattr(dpch, name) for name in dpch.__all__)
    try:
        dpch.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown attribute of dpch must raise AttributeError")


def test_a_laplace_release_loads_no_scipy(tmp_path):
    """scipy takes 0.15–0.5 s to import and a Laplace release needs none of it (its interval is
    closed-form); a Gaussian one loads scipy.special, the negative control that the probe sees it."""
    code = ("import dpch\ns = dpch.connect('chdb://{store}', analyst='a', default_budget=dpch.Budget())\n"
            "s.engine.command('CREATE TABLE t (u UInt32, x Float64 COMMENT \\'dp: bounds=[0, 1]\\') "
            "ENGINE = MergeTree ORDER BY u COMMENT \\'dp: privacy_unit=u, unique_units\\'')\n"
            "s.engine.command('INSERT INTO t VALUES (1, 0.5)')\n"
            "s.query('SELECT sum(x) FROM t SETTINGS dp_epsilon = 0.1'){extra}")
    laplace = _loaded_after(code.format(store=tmp_path / "l", extra=""))
    assert "dpch.pipeline.release" in laplace and not {m for m in laplace if m.startswith("scipy")}
    gaussian_query = "\ns.query('SELECT sum(x) FROM t SETTINGS dp_epsilon = 0.1, dp_delta = 1e-7, " \
                     "dp_mechanism = \\'gaussian\\'')"
    gaussian = _loaded_after(code.format(store=tmp_path / "g", extra=gaussian_query))
    assert "scipy.special" in gaussian

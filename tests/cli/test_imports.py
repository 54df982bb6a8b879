"""The CLI's modules import each other without a cycle, and import inside a function only what is
slow to load (each such import says so in a ``# start-up:`` comment), never to dodge a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import dpch.cli

CLI = Path(dpch.cli.__file__).parent


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


def test_function_level_imports_are_only_for_start_up_speed():
    for name, tree in _modules().items():
        lines = (CLI / f"{name.rsplit('.', 1)[1]}.py").read_text().splitlines()
        for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
            imports = [n for n in ast.walk(func) if isinstance(n, ast.Import | ast.ImportFrom)]
            if not imports:
                continue
            first = min(n.lineno for n in imports)
            above = lines[first - 2].strip()
            assert above.startswith("# start-up:"), f"{name}.{func.name} imports inside the function " \
                                                      f"(line {first}) without a '# start-up:' reason"
            for node in imports:  # never a dpch.cli module: those are cheap, so only a cycle would need it
                assert not any(m.startswith("dpch.cli") and m != "dpch.cli.shell_input" for m in _imported(node)), \
                    (name, func.name, _imported(node))

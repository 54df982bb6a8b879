"""Renders dpch serve's config from a template whose secrets come from the environment, then
runs the command that follows ``--`` (the container's entrypoint):

    python render_config.py /etc/dpch/server.toml /tmp/dpch/server.toml -- dpch serve --config /tmp/dpch/server.toml

In the template, ``${NAME}`` inside a string is replaced by the environment variable NAME (set
from the compose file's ``env_file``, never written in the compose file). Inside a ``dsn`` it is
percent-encoded, so a password may hold ``@``, ``:`` or ``/``. A variable that is not set stops
the container with its name (never a value). The rendered file is readable by its owner only.
Replacement is done on parsed TOML values, so a value holding ``"`` or ``\\`` cannot break the file.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import quote

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class MissingVariable(Exception):
    pass


def substitute(text: str, env: dict[str, str], *, url: bool) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise MissingVariable(name)
        return quote(env[name], safe="") if url else env[name]

    return _VAR.sub(value, text)


def render(data: Any, env: dict[str, str], key: str = "") -> Any:
    if isinstance(data, dict):
        return {k: render(v, env, k) for k, v in data.items()}
    if isinstance(data, list):
        return [render(v, env, key) for v in data]
    if isinstance(data, str):
        return substitute(data, env, url=key == "dsn")
    return data


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def to_toml(data: dict[str, Any], prefix: str = "") -> str:
    """TOML for the config's shape: tables of scalars and lists, tables nested in tables."""
    lines: list[str] = []
    tables = []
    for k, v in data.items():
        if isinstance(v, dict):
            tables.append((k, v))
        else:
            lines.append(f"{json.dumps(k)} = {_toml_value(v)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for k, v in tables:
        name = f"{prefix}.{json.dumps(k)}" if prefix else json.dumps(k)
        if any(not isinstance(x, dict) for x in v.values()) or not v:
            out += f"\n[{name}]\n"
        out += to_toml(v, name)
    return out


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") != 2:
        print("usage: render_config.py TEMPLATE OUTPUT -- COMMAND...", file=sys.stderr)
        return 2
    template, output, command = Path(argv[0]), Path(argv[1]), argv[3:]
    try:
        rendered = render(tomllib.loads(template.read_text()), dict(os.environ))
    except MissingVariable as exc:
        print(f"{template}: environment variable {exc} is not set (add it to the env file)", file=sys.stderr)
        return 1
    output.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(to_toml(rendered))
    if command:
        os.execvp(command[0], command)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

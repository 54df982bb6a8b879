"""Prints dpch's runtime requirements from pyproject.toml, one per line, for the container image.

``--without-chdb``: the slim image (a gateway in front of a ClickHouse server needs no embedded
engine), so clickhouse-connect loses its ``chdb`` extra; ``--only-chdb``: what the full image adds.
``--extra NAME`` adds an optional dependency group (e.g. sqlalchemy). Derived from pyproject.toml
at build time, so the image never drifts from the package's own list.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

_CHDB_EXTRA = re.compile(r"\[\s*chdb\s*\]")


def requirements(pyproject: Path, *, without_chdb: bool, only_chdb: bool, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    deps = list(project["dependencies"])
    for extra in extras:
        deps += project["optional-dependencies"][extra]
    if only_chdb:
        return [d for d in deps if _CHDB_EXTRA.search(d)]
    if without_chdb:
        return [_CHDB_EXTRA.sub("", d) for d in deps]
    return deps


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pyproject", type=Path, default=Path("pyproject.toml"))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--without-chdb", action="store_true")
    mode.add_argument("--only-chdb", action="store_true")
    parser.add_argument("--extra", action="append", default=[])
    args = parser.parse_args(argv)
    for line in requirements(args.pyproject, without_chdb=args.without_chdb, only_chdb=args.only_chdb,
                             extras=args.extra):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

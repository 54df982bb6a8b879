"""docs/functions.md is the registry (dpch/sql/functions.py) as a table: generated from it, so that the
documented rules are the enforced ones. ``DPCH_WRITE_FUNCTIONS_DOC=1`` rewrites the file."""

from __future__ import annotations

import os
from pathlib import Path

from dpch.sql import functions

DOC = Path(__file__).resolve().parents[2] / "docs" / "functions.md"
HEAD = """# Functions: what dpch accepts, and why no row can make it fail

Generated from the registry (`dpch/sql/functions.py`) by `tests/sql/test_functions_doc.py`
(`DPCH_WRITE_FUNCTIONS_DOC=1 pytest tests/sql/test_functions_doc.py` rewrites it); the same rows are
`dpch policy functions [NAME]` and the gateway's `system.functions` (columns `description` and
`arguments`). Why the rules exist: [privacy-model.md](privacy-model.md#rows-cannot-fail).

Each argument is one of:

- **any value** — of the kinds named (ClickHouse's own type of the argument is checked before the
  charge); the boundary fuzzer (`tests/soundness/test_boundaries.py`) puts the extremes of every
  type of that kind in it, chosen per row, and nothing raises;
- **constant only** — a literal; ClickHouse checks it before the charge (time zones explicitly);
- **guarded** — dpch wraps it in a saturating guard that keeps it where the function cannot raise.

"""


def render() -> str:
    counts = functions.counts()
    lines = [HEAD, "## Counts", "", "| arguments of functions allowed on a row | count |", "|---|---|"]
    for key in ("any value", "constant only", "guarded"):
        lines.append(f"| {key} | {counts[key]} |")
    lines += [f"| functions allowed on a row (with arguments) | {counts['functions on a row']} |",
              f"| functions allowed only as time buckets, date constants or in post-processing | "
              f"{counts['not on a row (buckets, constants, post-processing)']} |", "",
              "Any other function is refused everywhere (WHERE, aggregates, keys, joins, time constants).", "",
              "## The registry", "", "| function | where | arguments | why no row can make it fail |",
              "|---|---|---|---|"]
    for name, where, arguments, why in functions.listing():
        cells = [name.replace("|", "\\|"), where, arguments or "—", why.replace("|", "\\|")]
        lines.append("| " + " | ".join(f"`{c}`" if i == 0 else c for i, c in enumerate(cells)) + " |")
    return "\n".join(lines) + "\n"


def test_the_functions_doc_is_the_registry():
    text = render()
    if os.environ.get("DPCH_WRITE_FUNCTIONS_DOC") == "1":
        DOC.write_text(text, encoding="utf-8")
    assert DOC.read_text(encoding="utf-8") == text, "docs/functions.md is stale: rerun with DPCH_WRITE_FUNCTIONS_DOC=1"


def test_counts_add_up():
    """Every argument of a row function is in exactly one category (a negative control: the categories
    are not all zero, and guarded arguments exist)."""
    counts = functions.counts()
    row_args = sum(len(e.args) for e in functions.ENTRIES if e.row)
    assert counts["any value"] + counts["constant only"] + counts["guarded"] == row_args
    assert counts["guarded"] > 0 and counts["constant only"] > 0

"""Rendering releases and budgets for the terminal (table), for programs (json), and csv; and
clickhouse-client's formats (PrettyCompact, TSV, TSVWithNames, CSV, CSVWithNames, JSONEachRow),
written by :mod:`.ch_formats` with ``<c>_lo``/``<c>_hi`` columns after each noisy column ``c``."""

from __future__ import annotations

import csv
import io
import json
import sys
from typing import TYPE_CHECKING, Any

from dpch.cli.ch_formats import ALIASES
from dpch.cli.ch_formats import write as write_clickhouse

if TYPE_CHECKING:  # types only: importing dpch.accounting loads the whole privacy stack (start-up speed)
    from dpch.accounting.accountant import BudgetStatus
    from dpch.pipeline.report import Release

#: dpch's own formats (lower case), then clickhouse-client's names (case-sensitive, as in ClickHouse)
FORMATS = ("table", "json", "csv", *ALIASES)


def is_clickhouse_format(fmt: str) -> bool:
    """A clickhouse-client format: data only on stdout (the cost goes to stderr)."""
    return fmt in ALIASES


def clickhouse_text(release: Release, fmt: str) -> str:
    """The release as ClickHouse writes its rows in ``fmt``, interval columns included; every
    line ends with a newline, as ClickHouse's output does."""
    columns, rows = release.interval_table()
    return write_clickhouse(fmt, columns, rows)


def render(release: Release, fmt: str, *, intervals: str = "half", ascii: bool | None = None) -> str:
    """``release`` as ``fmt`` (table | json | csv | a clickhouse-client format, without its last
    newline). ``intervals``: ``half`` (value ± half-width) or ``full`` (value [lo, hi]); ``ascii``
    forces (or, with None, detects) the ASCII fallback."""
    if is_clickhouse_format(fmt):
        return clickhouse_text(release, fmt).removesuffix("\n")
    if fmt == "json":
        return json.dumps(release.as_dict(), indent=2, default=str)
    if fmt == "csv":
        return render_csv(release)
    return render_table(release, intervals=intervals, ascii=ascii if ascii is not None else not stream_is_utf8())


def render_csv(release: Release) -> str:
    """One column per result column, plus ``<name>_lo``/``<name>_hi`` for each statistic."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    stats = [j for j, iv in enumerate(release.intervals[0]) if iv is not None] if release.rows else []
    header = list(release.columns)
    for j in stats:
        header += [f"{release.columns[j]}_lo", f"{release.columns[j]}_hi"]
    writer.writerow(header)
    for row, ivs in zip(release.rows, release.intervals, strict=True):
        line = [_plain(v) for v in row]
        for j in stats:
            lo, hi = ivs[j]  # type: ignore[misc]
            line += [_plain(lo), _plain(hi)]
        writer.writerow(line)
    return out.getvalue().rstrip("\n")


def render_table(release: Release, *, intervals: str = "half", ascii: bool = False) -> str:
    """A boxed table of ``value ± half-width`` cells (or ``value [lo, hi]`` with
    ``intervals="full"``), numbers right-aligned, and a footer with cost, budget left and time.
    ``ascii``: plain ASCII for terminals that are not UTF-8 (``+/-``, ``eps``, ``+--+`` boxes)."""
    # start-up: dpch.pipeline loads the privacy stack; a release to render means it is loaded already
    from dpch.pipeline.report import estimate_text

    header = list(release.columns)
    body = []
    numeric = [False] * len(header)
    for row, ivs in zip(release.rows, release.intervals, strict=True):
        cells = []
        for j, (value, iv) in enumerate(zip(row, ivs, strict=True)):
            if iv is None:
                cells.append("NULL" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value))
                numeric[j] = numeric[j] or (isinstance(value, int | float) and not isinstance(value, bool))
            else:
                numeric[j] = True
                cells.append(estimate_text(value, iv, full=intervals == "full"))
        body.append(cells)
    if ascii:  # before measuring widths: '±' becomes three characters
        header = [to_ascii(h) for h in header]
        body = [[to_ascii(c) for c in cells] for cells in body]
    lines = box(header, body, numeric)
    lines.append(footer(release))
    lines.extend(f"note: {n}" for n in release.notes)
    text = "\n".join(lines)
    return to_ascii(text) if ascii else text


def footer(release: Release) -> str:
    """``cost ε 0.5 (laplace, 95% intervals)   budget left ε 2.5, δ 1e-06   12 ms``."""
    pct = round(release.confidence * 100, 1)
    cost = f"cost ε {release.cost.epsilon:.4g}"
    if release.cost.delta:
        cost += f", δ {release.cost.delta:.3g}"
    left = release.budget.remaining
    budget = f"budget left ε {left.epsilon:.4g}" + (f", δ {left.delta:.3g}" if release.budget.budget.delta else "")
    return f"{cost} ({release.mechanism}, {pct:g}% intervals)   {budget}   {release.elapsed_ms:.0f} ms"


def box(header: list[str], rows: list[list[str]], right_align: list[bool]) -> list[str]:
    """ClickHouse's PrettyCompact layout: column names in the top border, numbers right-aligned."""
    widths = [max([len(h)] + [len(r[j]) for r in rows]) for j, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        parts = [f" {c.rjust(widths[j]) if right_align[j] else c.ljust(widths[j])} " for j, c in enumerate(cells)]
        return "│" + "│".join(parts) + "│"

    def title(j: int, name: str) -> str:
        pad = "─" * (widths[j] - len(name))
        return f"─{pad}{name}─" if right_align[j] else f"─{name}{pad}─"

    top = "┌" + "┬".join(title(j, h) for j, h in enumerate(header)) + "┐"
    bottom = "└" + "┴".join("─" * (w + 2) for w in widths) + "┘"
    return [top, *(line(r) for r in rows), bottom]


_ASCII = str.maketrans({
    "┌": "+", "┬": "+", "┐": "+", "├": "+", "┼": "+", "┤": "+", "└": "+", "┴": "+", "┘": "+",
    "─": "-", "│": "|", "±": "+/-", "ε": "eps", "δ": "delta", "ρ": "rho", "—": "-", "…": "...",
    "▕": "[", "▏": "]", "█": "#", "░": ".", "≤": "<=", "≥": ">=", "·": "*", "→": "->", "√": "sqrt",
})


def to_ascii(text: str) -> str:
    """The ASCII fallback for terminals that are not UTF-8 (other characters become '?')."""
    return text.translate(_ASCII).encode("ascii", "replace").decode("ascii")


def stream_is_utf8(stream: Any = None) -> bool:
    """Whether ``stream`` (default stdout) encodes UTF-8."""
    encoding = getattr(stream if stream is not None else sys.stdout, "encoding", None) or ""
    return encoding.lower().replace("-", "").replace("_", "") in ("utf8", "utf8sig")


def budget_bar(status: BudgetStatus, width: int = 16) -> str:
    """``ε 1.2 of 3 spent ▕██████░░░░░░░░░░▏  1.8 left`` (the analyst-wide budget)."""
    b, s, r = status.budget, status.spent, status.remaining
    share = min(1.0, s.epsilon / b.epsilon) if b.epsilon else 1.0
    filled = round(share * width)
    bar = "▕" + "█" * filled + "░" * (width - filled) + "▏"
    return f"ε {s.epsilon:.4g} of {b.epsilon:g} spent {bar}  {r.epsilon:.4g} left"


def render_budget(status: BudgetStatus, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(status.as_dict(), indent=2)
    b, s, r = status.budget, status.spent, status.remaining
    lines = [
        f"analyst {status.analyst} — filter: {status.filter} composition — {status.releases} releases",
        budget_bar(status),
        f"δ {s.delta:.3g} of {b.delta:.3g} spent, {r.delta:.3g} left",
    ]
    if status.horizon:  # a renewing budget: per period, and over the lifetime only if capped
        lines.append(f"guarantee: {status.horizon}")
    return "\n".join(lines)


def _plain(v: Any) -> Any:
    return repr(v) if isinstance(v, float) else v

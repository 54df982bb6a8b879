"""Rendering releases and budgets for the terminal (table), for programs (json), and csv."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from dpch.accounting.accountant import BudgetStatus
from dpch.release import Release

FORMATS = ("table", "json", "csv")


def render(release: Release, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(release.as_dict(), indent=2, default=str)
    if fmt == "csv":
        return render_csv(release)
    return render_table(release)


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


def render_table(release: Release) -> str:
    """A boxed table of ``value ± half-width`` cells and a footer with cost and budget."""
    header = list(release.columns)
    body = []
    numeric = [False] * len(header)
    for row, ivs in zip(release.rows, release.intervals, strict=True):
        cells = []
        for j, (value, iv) in enumerate(zip(row, ivs, strict=True)):
            if iv is None:
                cells.append(str(value))
            else:
                numeric[j] = True
                cells.append(format_estimate(value, iv))
        body.append(cells)
    lines = box(header, body, numeric)
    pct = round(release.confidence * 100, 1)
    cost = f"cost ε {release.cost.epsilon:.4g}"
    if release.cost.delta:
        cost += f", δ {release.cost.delta:.3g}"
    left = release.budget.remaining
    budget = f"budget left ε {left.epsilon:.4g}" + (f", δ {left.delta:.3g}" if release.budget.budget.delta else "")
    lines.append(f"{cost} ({release.mechanism}, {pct:g}% intervals)   {budget}   {release.elapsed_ms:.0f} ms")
    lines.extend(f"note: {n}" for n in release.notes)
    return "\n".join(lines)


def format_estimate(value: float, interval: tuple[float, float]) -> str:
    lo, hi = interval
    half = (hi - lo) / 2.0
    if abs(value - (lo + hi) / 2.0) > 1e-9 * max(1.0, abs(value)):
        return f"{_num(value, half)} [{_num(lo, half)}, {_num(hi, half)}]"
    return f"{_num(value, half)} ± {_num(half, half)}"


def _num(x: float, scale: float) -> str:
    """Rounds to what the noise makes meaningful: about two significant digits of the error."""
    if not math.isfinite(x):
        return str(x)
    if scale <= 0 or not math.isfinite(scale):
        return f"{x:.6g}"
    decimals = max(0, 1 - math.floor(math.log10(scale)))
    return f"{x:,.{decimals}f}"


def box(header: list[str], rows: list[list[str]], right_align: list[bool]) -> list[str]:
    widths = [max([len(h)] + [len(r[j]) for r in rows]) for j, h in enumerate(header)]

    def line(cells: list[str], pad: str = " ") -> str:
        parts = []
        for j, cell in enumerate(cells):
            text = cell.rjust(widths[j]) if right_align[j] else cell.ljust(widths[j])
            parts.append(f"{pad}{text}{pad}")
        return "│" + "│".join(parts) + "│"

    top = "┌" + "┬".join("─" * (w + 2) for w in widths) + "┐"
    mid = "├" + "┼".join("─" * (w + 2) for w in widths) + "┤"
    bottom = "└" + "┴".join("─" * (w + 2) for w in widths) + "┘"
    return [top, line(header), mid, *(line(r) for r in rows), bottom]


def render_budget(status: BudgetStatus, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(status.as_dict(), indent=2)
    b, s, r = status.budget, status.spent, status.remaining
    share = min(1.0, s.epsilon / b.epsilon) if b.epsilon else 1.0
    filled = round(share * 16)
    bar = "▕" + "█" * filled + "░" * (16 - filled) + "▏"
    lines = [
        f"analyst {status.analyst} — filter: {status.filter} composition — {status.releases} releases",
        f"ε {s.epsilon:.4g} of {b.epsilon:g} spent {bar}  {r.epsilon:.4g} left",
        f"δ {s.delta:.3g} of {b.delta:.3g} spent, {r.delta:.3g} left",
    ]
    return "\n".join(lines)


def _plain(v: Any) -> Any:
    return repr(v) if isinstance(v, float) else v

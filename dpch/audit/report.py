"""The audit's outputs: a text summary, and an HTML (inline SVG, no dependencies) or PNG
(matplotlib, the optional ``report`` extra) report with the two output histograms, the
threshold curve of the statistic that gave the bound, and for a Gaussian release the estimated
privacy profile δ_lb(ε) against the claimed δ(ε)."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from dpch.audit.estimators import linear_discriminant, threshold_curve
from dpch.audit.experiment import AuditResult
from dpch.audit.runner import AuditSamples
from dpch.errors import ConfigError


def summary(result: AuditResult) -> str:
    """Claimed ε, ε_lb with its confidence, the tests behind it, and the verdict."""
    b, s = result.bound, result.samples
    claim = f"ε {result.claimed_epsilon:g}" + (f", δ {result.claimed_delta:g}" if result.claimed_delta else "")
    lines = [
        f"query:      {result.sql}",
        f"neighbours: {result.neighbours}",
        f"mode:       {s.mode}, {s.trials} trials per side, mechanism {s.mechanism}",
        f"claimed:    {claim}",
        f"ε_lb:       {b.epsilon_lb:.4f} at {b.confidence:.0%} confidence "
        f"({b.method} on {b.statistic}; {result.tightness:.0%} of the claim)",
        f"  threshold test:  ε_lb {result.threshold.epsilon_lb:.4f} on {result.threshold.statistic} "
        f"(FPR {result.threshold.fpr:.4f} ≤ {result.threshold.fpr_upper:.4f}, "
        f"FNR {result.threshold.fnr:.4f} ≤ {result.threshold.fnr_upper:.4f})",
        f"  classifier:      ε_lb {result.classifier.epsilon_lb:.4f} (logistic regression)",
    ]
    if s.exact_d:
        lines.append(f"exact shift D→D′: {_shifts(s)}")
    lines += _profile_lines(result)
    lines.append(f"verdict:    {result.verdict} (all tests together at {result.confidence:.0%} confidence)")
    return "\n".join(lines)


def _shifts(samples: AuditSamples) -> str:
    """Each measure's ℓ1 shift between D and D′ beside its declared sensitivity (the neighbour is the
    worst case when they are equal); a measure the runner states no sensitivity for says so."""
    def bound(name: str) -> str:
        value = samples.sensitivities.get(name)
        return "no sensitivity stated" if value is None else f"sensitivity {value:g}"

    return ", ".join(f"{name} {shift:g} ({bound(name)})" for name, shift in samples.shifts().items())


def _profile_lines(result: AuditResult) -> list[str]:
    """The privacy-profile test: δ_lb against the claim at ε 0 (the total variation distance) and at
    the ε where it comes closest, or why the release has none."""
    p = result.profile
    if p is None:
        note = result.samples.profile_note
        return [f"profile:    not estimated ({note})"] if note else []
    lines = [
        f"profile:    δ(ε) lower bound at {p.confidence:.1%} confidence on {p.statistic} "
        f"(claimed: {p.claim.description}; DKW slack ±{p.slack_d:.4f} / ±{p.slack_dprime:.4f})",
        f"  at ε 0:    δ_lb {p.delta_lower[0]:.4f} vs claimed {p.claimed[0]:.4f} ({p.tightness:.0%} of the claim; "
        f"point estimate {p.delta_point[0]:.4f})",
    ]
    if p.violation:
        w = p.worst
        lines.append(f"  exceeds at ε {p.epsilons[w]:.3f}: δ_lb {p.delta_lower[w]:.4g} vs claimed {p.claimed[w]:.4g} "
                     f"(excess {p.excess:.4g})")
    elif (c := p.closest) is not None and c != 0:
        lines.append(f"  closest at ε {p.epsilons[c]:.3f}: δ_lb {p.delta_lower[c]:.4g} vs claimed {p.claimed[c]:.4g} "
                     f"({p.delta_lower[c] / p.claimed[c]:.0%})")
    return lines


def _statistic(result: AuditResult) -> tuple[str, np.ndarray, np.ndarray]:
    """The one-dimensional statistic to plot: the coordinate that gave the threshold bound,
    else the linear discriminant."""
    s = result.samples
    name = result.threshold.statistic
    if name in s.labels:
        j = s.labels.index(name)
        return name, s.d[:, j], s.dprime[:, j]
    w = linear_discriminant(s.d, s.dprime) if s.d.shape[1] > 1 else np.ones(1)
    return "linear discriminant", s.d @ w, s.dprime @ w


def write_report(result: AuditResult, path: str | Path) -> Path:
    """Writes ``path`` (.html always works; .png needs matplotlib: ``pip install dpch[report]``)."""
    path = Path(path)
    if path.suffix.lower() == ".png":
        return _write_png(result, path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"unknown report format {path.suffix!r}", hint="name the report .html or .png")
    path.write_text(_html(result), encoding="utf-8")
    return path


def _histograms(a0: np.ndarray, a1: np.ndarray, bins: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo, hi = np.quantile(np.concatenate([a0, a1]), [0.001, 0.999])
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    h0, _ = np.histogram(a0, edges, density=True)
    h1, _ = np.histogram(a1, edges, density=True)
    return edges, h0, h1


def _svg_lines(xs: np.ndarray, series: list[tuple[np.ndarray, str, str]], title: str, xlabel: str,
               steps: bool = False) -> str:
    width, height, pad = 640, 300, 48
    x_lo, x_hi = float(xs[0]), float(xs[-1])
    y_hi = max(float(np.nanmax(y)) for y, _, _ in series) or 1.0

    def px(x: float) -> float:
        return pad + (x - x_lo) / ((x_hi - x_lo) or 1.0) * (width - 2 * pad)

    def py(y: float) -> float:
        return height - pad - y / y_hi * (height - 2 * pad)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
             f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
             f'<text x="{pad}" y="{height - pad + 16}" font-size="11">{x_lo:.4g}</text>',
             f'<text x="{width - pad}" y="{height - pad + 16}" font-size="11" text-anchor="end">{x_hi:.4g}</text>',
             f'<text x="{pad - 4}" y="{pad}" font-size="11" text-anchor="end">{y_hi:.3g}</text>',
             f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle" font-size="12">'
             f'{html.escape(xlabel)}</text>']
    for k, (ys, color, label) in enumerate(series):
        points = []
        for i, y in enumerate(ys):
            if steps:
                points += [f"{px(xs[i]):.1f},{py(y):.1f}", f"{px(xs[i + 1]):.1f},{py(y):.1f}"]
            else:
                points.append(f"{px(xs[i]):.1f},{py(y):.1f}")
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(points)}"/>')
        parts.append(f'<text x="{width - pad}" y="{pad + 14 * k}" font-size="12" fill="{color}" '
                     f'text-anchor="end">{html.escape(label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _html(result: AuditResult) -> str:
    name, a0, a1 = _statistic(result)
    edges, h0, h1 = _histograms(a0, a1)
    curve = threshold_curve(a0, a1, delta=result.claimed_delta, confidence=result.bound.confidence)
    claim = np.full(curve["threshold"].size, result.claimed_epsilon)
    hist = _svg_lines(edges, [(h0, "#1f77b4", "D"), (h1, "#d62728", "D′")],
                      f"output distribution of {name}", name, steps=True)
    curve_svg = _svg_lines(
        curve["threshold"],
        [(curve["epsilon_point"], "#7f7f7f", "ε estimate"),
         (curve["epsilon_lower"], "#2ca02c", "ε lower bound (Clopper–Pearson)"),
         (claim, "#d62728", "claimed ε")],
        "ε implied by each threshold", f"threshold on {name}",
    )
    colour = "#b00020" if result.violation else "#1b5e20"
    profile_svg = ""
    if result.profile is not None:
        p = result.profile
        profile_svg = _svg_lines(
            p.epsilons,
            [(p.delta_point, "#7f7f7f", "δ(ε) estimate"), (p.delta_lower, "#2ca02c", "δ(ε) lower bound (DKW)"),
             (p.claimed, "#d62728", "claimed δ(ε)")],
            f"privacy profile on {p.statistic}", "ε",
        )
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>dpch audit: {html.escape(result.verdict)}</title>
<style>body{{font-family:sans-serif;max-width:760px;margin:2em auto}}pre{{background:#f4f4f4;padding:1em;
white-space:pre-wrap}}</style></head><body>
<h1>dpch audit: <span style="color:{colour}">{html.escape(result.verdict)}</span></h1>
<pre>{html.escape(summary(result))}</pre>
{hist}
{curve_svg}
{profile_svg}
<p>The curve is over all samples and is not corrected for choosing the threshold; the bound
above was chosen on one half of the samples and measured on the other.</p>
</body></html>
"""


def _write_png(result: AuditResult, path: Path) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("a PNG report needs matplotlib",
                          hint="pip install 'dpch[report]', or name the report .html") from None
    name, a0, a1 = _statistic(result)
    edges, h0, h1 = _histograms(a0, a1)
    curve = threshold_curve(a0, a1, delta=result.claimed_delta, confidence=result.bound.confidence)
    profile = result.profile
    fig, axes = plt.subplots(3 if profile is not None else 2, 1, figsize=(7, 10 if profile is not None else 7))
    ax1, ax2 = axes[0], axes[1]
    ax1.stairs(h0, edges, label="D")
    ax1.stairs(h1, edges, label="D′")
    ax1.set_title(f"{result.verdict}: ε_lb {result.bound.epsilon_lb:.3f} vs claimed {result.claimed_epsilon:g}")
    ax1.set_xlabel(name)
    ax1.legend()
    ax2.plot(curve["threshold"], curve["epsilon_point"], label="ε estimate")
    ax2.plot(curve["threshold"], curve["epsilon_lower"], label="ε lower bound")
    ax2.axhline(result.claimed_epsilon, color="red", linestyle="--", label="claimed ε")
    ax2.set_xlabel(f"threshold on {name}")
    ax2.legend()
    if profile is not None:
        ax3 = axes[2]
        ax3.plot(profile.epsilons, profile.delta_point, label="δ(ε) estimate")
        ax3.plot(profile.epsilons, profile.delta_lower, label="δ(ε) lower bound (DKW)")
        ax3.plot(profile.epsilons, profile.claimed, color="red", linestyle="--", label="claimed δ(ε)")
        ax3.set_xlabel("ε")
        ax3.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path

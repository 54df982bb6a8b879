"""Stage 8, report: what a private query returns (:class:`Release`) or would do
(:class:`Explanation`), as structured data; ``describe()`` only renders it."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

from dpch.accounting.accountant import BudgetStatus
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.pipeline.calibrate import NoisePlan
from dpch.pipeline.postprocess import grid_of, rank_error
from dpch.privacy.cost import PrivacyCost, PureDP
from dpch.sql.aggregate_kinds import statistic
from dpch.sql.analyze import QueryPlan
from dpch.sql.settings import QueryOptions


@dataclass(frozen=True)
class MeasureReport:
    """How one noisy measure was produced: its sensitivity, mechanism, share of the budget."""

    name: str
    expression: str
    sensitivity: float
    derivation: str
    mechanism: str
    epsilon: float
    delta: float
    noise_scale: float
    half_width: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Release:
    """The answer to one private query.

    ``rows`` hold noisy values (group keys are public and exact). ``intervals[i][j]`` is the
    ``confidence`` interval for ``rows[i][j]`` around the true (clamped, contribution-capped)
    value, or ``None`` for key columns. ``cost`` is what the query was charged and
    ``budget`` the analyst's state after the charge.
    """

    columns: list[str]
    rows: list[tuple[Any, ...]]
    intervals: list[list[tuple[float, float] | None]]
    cost: PrivacyCost
    confidence: float
    mechanism: str
    measures: list[MeasureReport]
    budget: BudgetStatus
    release_id: str
    elapsed_ms: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: accuracy-first answers: target, achieved half-width, ex-post ε, ρ (dpch.pipeline.accuracy_first.AccuracyReport)
    accuracy: Any = None
    #: ``dp_report_dropped``: the noisy share of a unit's rows the contribution bound dropped
    #: (dpch.pipeline.bound_report.DroppedShare; also one of the notes)
    dropped: Any = None

    #: rows shown by the text and HTML reprs before "… N more rows"
    REPR_ROWS = 20

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame, intervals kept (``pip install dpch[pandas]``).

        Shape: the release's columns in their order; after each noisy column ``c`` two more,
        ``c_lo`` and ``c_hi``, holding the bounds of its ``confidence`` interval (the same
        numbers as :attr:`intervals`, and the names ``dp_intervals = 'columns'`` gives SQL
        clients). Key columns are exact and get no bounds. ``df.attrs`` carries the cost
        (``epsilon``, ``delta``), ``confidence``, ``mechanism`` and ``release_id``.
        """
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError("to_pandas() needs pandas: pip install 'dpch[pandas]'") from None
        names, data = self.interval_table()
        frame = pd.DataFrame(data, columns=names)
        frame.attrs.update(epsilon=self.cost.epsilon, delta=self.cost.delta, confidence=self.confidence,
                           mechanism=self.mechanism, release_id=self.release_id)
        return frame

    def interval_table(self) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Columns and rows with ``<c>_lo``, ``<c>_hi`` after each noisy column ``c`` (the shape of
        :meth:`to_pandas` and of the CLI's ClickHouse formats)."""
        noisy = self.noisy_columns()
        names: list[str] = []
        for j, name in enumerate(self.columns):
            names += [name, f"{name}_lo", f"{name}_hi"] if j in noisy else [name]
        data = []
        for row, ivs in zip(self.rows, self.intervals, strict=True):
            line: list[Any] = []
            for j, value in enumerate(row):
                line.append(value)
                if j in noisy:
                    iv = ivs[j]
                    line += [iv[0], iv[1]] if iv is not None else [None, None]
            data.append(tuple(line))
        return names, data

    def noisy_columns(self) -> set[int]:
        """Indexes of the columns that carry an interval in some row (the noisy statistics)."""
        return {j for ivs in self.intervals for j, iv in enumerate(ivs) if iv is not None}

    def cost_text(self) -> str:
        """``cost ε 0.5, δ 1e-06 (gaussian, 95% intervals)``."""
        cost = f"cost ε {self.cost.epsilon:.4g}"
        if self.cost.delta:
            cost += f", δ {self.cost.delta:.3g}"
        return f"{cost} ({self.mechanism}, {round(self.confidence * 100, 1):g}% intervals)"

    def _cells(self, i: int) -> list[str]:
        return [estimate_text(v, iv) if iv is not None else _plain_text(v)
                for v, iv in zip(self.rows[i], self.intervals[i], strict=True)]

    def __repr__(self) -> str:
        """One line per row (up to :attr:`REPR_ROWS`), then ``… N more rows`` and the cost."""
        shown = min(len(self.rows), self.REPR_ROWS)
        lines = [f"Release: {len(self.rows)} row{'s' if len(self.rows) != 1 else ''} × "
                 f"{', '.join(self.columns)}"]
        for i in range(shown):
            lines.append("  " + ", ".join(f"{c}={cell}" for c, cell in zip(self.columns, self._cells(i), strict=True)))
        if len(self.rows) > shown:
            lines.append(f"  … {len(self.rows) - shown} more rows")
        lines.append(self.cost_text())
        return "\n".join(lines)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        """A notebook table: noisy cells as ``value ± half-width``, keys plain, the cost below.
        Every text (column names, keys, notes) is HTML-escaped: keys come from the data."""
        esc = html.escape
        noisy = self.noisy_columns()
        shown = min(len(self.rows), self.REPR_ROWS)
        head = "".join(f"<th>{esc(c)}</th>" for c in self.columns)
        body = []
        for i in range(shown):
            tds = "".join(f'<td style="text-align:right">{esc(cell)}</td>' if j in noisy else f"<td>{esc(cell)}</td>"
                          for j, cell in enumerate(self._cells(i)))
            body.append(f"<tr>{tds}</tr>")
        if len(self.rows) > shown:
            body.append(f'<tr><td colspan="{len(self.columns)}">… {len(self.rows) - shown} more rows</td></tr>')
        foot = esc(self.cost_text())
        notes = "".join(f"<br>note: {esc(n)}" for n in self.notes)
        return (f'<table class="dpch-release"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
                f'<tfoot><tr><td colspan="{len(self.columns)}">{foot}{notes}</td></tr></tfoot></table>')

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``dpch query --format json``."""
        return {
            "columns": self.columns,
            "rows": [[_json_value(v) for v in row] for row in self.rows],
            "intervals": [[list(i) if i is not None else None for i in row] for row in self.intervals],
            "confidence": self.confidence,
            "cost": {"epsilon": self.cost.epsilon, "delta": self.cost.delta},
            "mechanism": self.mechanism,
            "measures": [m.as_dict() for m in self.measures],
            "budget": {
                "spent": {"epsilon": self.budget.spent.epsilon, "delta": self.budget.spent.delta},
                "remaining": {
                    "epsilon": self.budget.remaining.epsilon,
                    "delta": self.budget.remaining.delta,
                },
            },
            "release_id": self.release_id,
            "notes": self.notes,
            **({"accuracy": self.accuracy.as_dict()} if self.accuracy is not None else {}),
        }


def estimate_text(value: Any, interval: tuple[float, float], *, full: bool = False) -> str:
    """``value ± half-width`` rounded to about two significant digits of the half-width, or
    ``value [lo, hi]`` when asked (``full``) or when the interval is not symmetric around the value
    (a clipped average). The notebook repr and the CLI's tables both write estimates this way."""
    lo, hi = interval
    half = (hi - lo) / 2.0
    if not isinstance(value, int | float) or isinstance(value, bool):
        return f"{_plain_text(value)} [{lo:.6g}, {hi:.6g}]"
    if full or abs(value - (lo + hi) / 2.0) > 1e-9 * max(1.0, abs(value)):
        return f"{_rounded(value, half)} [{_rounded(lo, half)}, {_rounded(hi, half)}]"
    return f"{_rounded(value, half)} ± {_rounded(half, half)}"


def _rounded(x: float, scale: float) -> str:
    """Rounds to what the noise makes meaningful: about two significant digits of the error."""
    if not math.isfinite(x):
        return str(x)
    if scale <= 0 or not math.isfinite(scale):
        return f"{x:.6g}"
    decimals = max(0, 1 - math.floor(math.log10(scale)))
    return f"{x:,.{decimals}f}"


def _plain_text(v: Any) -> str:
    if v is None:
        return "NULL"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, int | float | str | bool) or v is None:
        return v
    return str(v)


@dataclass(frozen=True)
class Explanation:
    """What a query would do and cost, computed without reading data or spending budget."""

    sql: str
    plan: QueryPlan
    options: QueryOptions
    measures: list[MeasureReport]
    cost: PrivacyCost
    admissible: bool
    reason: str
    notes: list[str]
    #: the mechanism that selects the released keys, where one does (top-k: ``dpch.pipeline.top_k``)
    selector: str | None = None

    @property
    def mechanism(self) -> str:
        """What releases the answer: the query's noise mechanism; for a key release, partition
        selection, or none for a free one; for top-k, its selection."""
        if self.selector is not None:
            return self.selector
        if self.plan.key_release:
            return "partition selection"
        return self.options.resolved_mechanism

    def describe(self) -> str:
        relation = self.plan.relation
        tables = ", ".join(
            f"{t.table} (unit {t.privacy_unit}, ≤ {t.contribution_cap} rows per unit)" if t.private
            else f"{t.table} (public)"
            for t in relation.tables
        )
        lines = [f"tables: {tables}", f"contribution cap: ≤ {relation.cap} rows per unit"]
        if self.plan.keys:
            origins = "; ".join(f"{k.label}: {k.origin}" for k in self.plan.keys)
            groups = ("chosen by partition selection" if self.plan.partition_selection
                      else str(len(self.plan.group_domain or ())))
            lines.append(f"groups: {groups} ({origins})")
        if self.plan.key_release:  # keys only: no value, no interval
            lines.append(f"mechanism: {self.mechanism} (keys only, no values)")
        else:
            lines.append(f"mechanism: {self.mechanism}, {self.options.confidence:.0%} intervals")
        for m in self.measures:
            lines.append(
                f"  {m.name}: {m.expression}\n"
                f"      sensitivity {m.sensitivity:g} ({m.derivation})\n"
                f"      {m.mechanism}: ε {m.epsilon:g}" + (f", δ {m.delta:g}" if m.delta else "")
                + (f", noise scale {m.noise_scale:.4g}, ± {m.half_width:.4g}" if m.noise_scale else "")
            )
        lines.append(f"cost: ε {self.cost.epsilon:g}" + (f", δ {self.cost.delta:g}" if self.cost.delta else ""))
        lines.extend(f"note: {n}" for n in self.notes)
        lines.append(f"budget check: {'admissible' if self.admissible else 'REFUSED — ' + self.reason}")
        if self.sql:
            lines.append("emitted SQL:")
            lines.append(f"  {self.sql}")
        else:  # a free key release (dpch.pipeline.release.domain_rows)
            lines.append("emitted SQL: none (the keys are their declared domain; nothing is read)")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """The JSON a gateway sends for EXPLAIN: the cost and the budget check as data (a remote
        client reads them, never the text), and ``describe`` for people."""
        return {
            "sql": self.sql,
            "cost": {"epsilon": self.cost.epsilon, "delta": self.cost.delta, "rho": self.cost.rho},
            "admissible": self.admissible,
            "reason": self.reason,
            "mechanism": self.mechanism,
            "confidence": self.options.confidence,
            "measures": [m.as_dict() for m in self.measures],
            "notes": list(self.notes),
            "describe": self.describe(),
        }


def explanation_release(explanation: Explanation, budget: BudgetStatus, elapsed_ms: float) -> Release:
    """``EXPLAIN DP SELECT ...`` as a one-column result (so every client can show it); free."""
    lines = explanation.describe().splitlines()
    cost = explanation.cost
    return Release(
        columns=["explain"], rows=[(line,) for line in lines], intervals=[[None] for _ in lines],
        cost=PrivacyCost.of(PureDP(0.0)), confidence=explanation.options.confidence, mechanism="none",
        measures=explanation.measures, budget=budget, release_id="", elapsed_ms=elapsed_ms,
        notes=[f"EXPLAIN DP spends nothing; running the query would cost ε {cost.epsilon:g}"
               + (f", δ {cost.delta:g}" if cost.delta else "")],
    )


#: the note of a free key release (docs/sql-reference.md "Listing keys")
FREE_KEYS_NOTE = ("keys released free: the declared domain, whether or not a row has the key "
                  "(a function of the policy only; nothing private is read and nothing is charged)")


def free_explanation(plan: QueryPlan, opts: QueryOptions, sql: str = "") -> Explanation:
    """EXPLAIN of a free key release: no mechanism, no cost, no SQL run."""
    return Explanation(sql=sql, plan=plan, options=opts, measures=[], cost=PrivacyCost.zero(), admissible=True,
                       reason="free", notes=[FREE_KEYS_NOTE], selector="none")


def free_release(opts: QueryOptions, columns: list[str], rows: list[tuple[Any, ...]],
                 intervals: list[list[tuple[float, float] | None]], budget: BudgetStatus,
                 elapsed_ms: float) -> Release:
    """A free key release: no ledger row (``release_id`` empty), no cost, no mechanism."""
    return Release(columns=columns, rows=rows, intervals=intervals, cost=PrivacyCost.zero(),
                   confidence=opts.confidence, mechanism="none", measures=[], budget=budget, release_id="",
                   elapsed_ms=elapsed_ms, notes=[FREE_KEYS_NOTE])


def measure_reports(plan: QueryPlan, opts: QueryOptions, noise: NoisePlan) -> list[MeasureReport]:
    """How each noisy part of ``plan`` is produced: sensitivity, mechanism, share, ± at ``opts.confidence``."""
    reports = []
    for m in plan.measures:
        if m.name in noise.additive:
            mech = noise.additive[m.name]
            scale = mech.sigma if isinstance(mech, GaussianMechanism) else mech.scale
            reports.append(MeasureReport(
                name=m.name, expression=m.sql, sensitivity=m.l2_sensitivity if mech.name == "gaussian"
                else m.sensitivity, derivation=m.derivation, mechanism=mech.name,
                epsilon=mech.cost.epsilon, delta=mech.cost.delta, noise_scale=scale,
                half_width=mech.half_width(opts.confidence)))
    measures = {m.name: m for m in plan.measures}
    for stat_name, em in noise.selectors.items():  # one exponential mechanism per quantile
        stat = plan.stats[stat_name]
        m = measures[stat.measures[0]]
        reports.append(MeasureReport(
            name=f"{m.name}:{stat_name}", expression=f"{stat.label} over {m.sql}", sensitivity=m.sensitivity,
            derivation=m.derivation, mechanism="exponential", epsilon=em.epsilon, delta=0.0, noise_scale=0.0,
            half_width=0.0))
    if noise.selection is not None and noise.shared is not None:
        sel, m = noise.selection, measures[noise.shared]
        reports.append(MeasureReport(
            name=m.name, expression=m.sql, sensitivity=float(plan.groups_per_unit),
            derivation=f"{m.derivation}; its noisy value also selects the keys (one mechanism for both)",
            mechanism="partition selection (noisy count released)", epsilon=sel.epsilon, delta=sel.delta,
            noise_scale=float(sel.scale), half_width=sel.half_width(opts.confidence)))
    elif noise.selection is not None:
        sel = noise.selection
        reports.append(MeasureReport(
            name="units", expression=f"uniqExact({plan.relation.unit_name}) per key", sensitivity=float(
                plan.groups_per_unit), derivation=f"one unit touches at most {plan.groups_per_unit} keys",
            mechanism="partition selection", epsilon=sel.epsilon, delta=sel.delta,
            noise_scale=float(sel.scale), half_width=0.0))
    return reports


def notes(plan: QueryPlan, noise: NoisePlan, opts: QueryOptions) -> list[str]:
    """What a reader of the answer should know: the budget split, derived statistics, quantiles' rank
    error, partition selection."""
    out = []
    parts = noise.parts
    if noise.dropped:
        spent = sum(m.cost.epsilon for m in noise.dropped.values())
        out.append(f"dp_report_dropped: ε {spent:.4g} ({spent / opts.epsilon:.0%} of the query's) releases the share "
                   "of each unit's rows the contribution bound dropped (two Laplace counts of sensitivity 1); the "
                   "answer's parts split the rest")
    if len(parts) > 1:
        shares = ", ".join(f"{name} ε {cost.epsilon:.4g}" + (f" δ {cost.delta:.2g}" if cost.delta else "")
                           for name, cost in parts)
        evenly = "" if noise.dropped else " evenly"
        out.append(f"budget split{evenly} over {len(parts)} noisy parts: {shares}")
    if any(statistic(s).derived for s in plan.stats.values()):
        out.append("avg/var/stddev are computed from noisy sums and counts, clipped to the value bounds; "
                   "their intervals are conservative (union bound)")
    for stat in plan.stats.values():
        if statistic(stat).selected:
            out.append(f"{stat.label}: exponential mechanism on a grid of {grid_of(stat)[2]} points; with "
                       f"{opts.confidence:.0%} confidence its rank is within "
                       f"{rank_error(stat, noise, opts.confidence):.0f} rows of the exact quantile's")
    stored = [t.table for t in plan.relation.tables if t.private and t.cap_order == "stored" and not t.unique_units]
    if plan.bound is not None and plan.relation.needs_cap and not plan.key_release and not (
            stored and plan.bound.kind == "rows"):
        # which rows and groups each unit keeps (issue 27, item 3): what the bound does to the answer
        out.append(f"contribution bound: {plan.bound.describe()}")
    if stored:
        out.append(f"the contribution cap keeps each unit's first rows in the stored order of {', '.join(stored)} "
                   "(the owner's cap_order=stored), not rows chosen at random: groups whose rows are stored later "
                   "(e.g. later times) lose more of them")
    if noise.selection is not None:
        out.append(f"keys released by partition selection: a key appears only if its noisy count of distinct "
                   f"units exceeds {noise.selection.threshold:g}")
        if plan.key_release:
            out.append("only the selected keys are released (no counts): the whole cost is the selection's")
    return out

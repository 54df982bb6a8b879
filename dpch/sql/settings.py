"""dpch's query options, carried in ClickHouse's own SETTINGS clause.

    SELECT avg(spend) FROM visits SETTINGS dp_epsilon = 0.5, dp_mechanism = 'gaussian'

Only ``dp_*`` settings are accepted; any other setting is refused, since ClickHouse settings
can change what a query reveals or how it fails (docs/design.md rule 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from dpch.errors import QueryRejected
from dpch.sql.pins import PINNED_NAMES

MECHANISMS = ("laplace", "gaussian")
#: how a ClickHouse client receives a release's confidence intervals (``dp_intervals``):
#: ``none`` — the columns as written (intervals only in dpch's own clients and headers);
#: ``columns`` — ``<c>_lo`` and ``<c>_hi`` after each noisy column ``c`` (docs/serving.md)
INTERVAL_MODES = ("none", "columns")
#: what a GROUP BY releases (``dp_select``): ``all`` — every key's noisy values; ``top`` — the k keys
#: with the largest (ORDER BY … DESC) or smallest score, chosen by report noisy max
#: (:mod:`dpch.pipeline.top_k`, docs/sql-reference.md "Top-k")
SELECT_MODES = ("all", "top")
#: ``dp_store`` and ``dp_open_buckets`` (:mod:`dpch.pipeline.bucket_store`, docs/serving.md "The release store")
STORE_MODES = ("auto", "off")
OPEN_BUCKET_MODES = ("release", "omit")


@dataclass(frozen=True)
class QueryOptions:
    """Privacy and accuracy options of one query.

    ``epsilon`` is the total ε of the query, split evenly over its noisy measures (the split
    is reported in the release). ``delta`` > 0 selects the Gaussian mechanism unless
    ``mechanism`` says otherwise; ``confidence`` is the level of the reported intervals.
    """

    epsilon: float = 0.5
    delta: float = 0.0
    mechanism: str | None = None
    confidence: float = 0.95
    #: accuracy-first (dpch.accuracy): target half-width, relative error, ε cap, stopping rule
    accuracy: float | None = None
    relative_error: float | None = None
    max_epsilon: float | None = None
    stop_rule: str = "released"
    #: presentation only (post-processing of the release; never changes what is released or
    #: charged): see :data:`INTERVAL_MODES`
    intervals: str = "none"
    #: top-k selection (:data:`SELECT_MODES`) and, for its Gaussian selector, the public range every
    #: key's score is clamped to (Lebensold et al. 2024, Thm 8 needs bounded scores)
    select: str = "all"
    score_min: float = 0.0
    score_max: float | None = None
    #: threshold watches (dpch.pipeline.watch, docs/watches.md): the watch this query asks, and its
    #: threshold (optional; must equal the watch's)
    watch: str | None = None
    threshold: float | None = None
    #: the contribution bound of a GROUP BY (:mod:`dpch.sql.contribution`): ``auto``, ``rows`` (the row
    #: cap) or ``groups`` (per group: at most ``max_groups`` groups and ``max_rows_per_group`` rows in
    #: each, within the owner's annotations); setting either number asks for the per-group bound
    bound: str = "auto"
    max_groups: int | None = None
    max_rows_per_group: int | None = None
    #: also release a noisy share of each unit's rows the contribution bound dropped (dpch.pipeline.bound_report,
    #: issue 27 item 3), for a stated share of ``epsilon``
    report_dropped: bool = False
    #: the release store (:mod:`dpch.pipeline.bucket_store`, issue 28): ``auto`` answers a query over the time
    #: buckets of a table whose owner declared ``final_after`` bucket by bucket, each bucket released once;
    #: ``off`` releases the query as written
    store: str = "auto"
    #: buckets that are not final yet (data may still arrive): ``release`` them (re-served until the next bucket
    #: becomes final, then released again) or ``omit`` them from the answer (nothing released before it is final)
    open_buckets: str = "release"

    @property
    def accuracy_first(self) -> bool:
        return self.accuracy is not None or self.relative_error is not None

    @property
    def resolved_mechanism(self) -> str:
        if self.mechanism is not None:
            return self.mechanism
        return "gaussian" if self.delta > 0 else "laplace"

    def validated(self) -> QueryOptions:
        if not (isinstance(self.epsilon, int | float) and 0 < self.epsilon and math.isfinite(self.epsilon)):
            raise QueryRejected(
                f"dp_epsilon must be a positive number, got {self.epsilon!r}",
                hint="e.g. SETTINGS dp_epsilon = 0.5",
            )
        if not (isinstance(self.delta, int | float) and 0 <= self.delta < 1):
            raise QueryRejected(f"dp_delta must be in [0, 1), got {self.delta!r}", hint="e.g. 1e-6")
        if not (isinstance(self.confidence, int | float) and 0 < self.confidence < 1):
            raise QueryRejected(
                f"dp_confidence must be strictly between 0 and 1, got {self.confidence!r}",
                hint="e.g. 0.95",
            )
        if self.intervals not in INTERVAL_MODES:
            raise QueryRejected(
                f"dp_intervals must be one of {', '.join(repr(m) for m in INTERVAL_MODES)}, got {self.intervals!r}",
                hint="e.g. SETTINGS dp_intervals = 'columns' adds <column>_lo and <column>_hi",
            )
        if self.select not in SELECT_MODES:
            raise QueryRejected(
                f"dp_select must be one of {', '.join(repr(m) for m in SELECT_MODES)}, got {self.select!r}",
                hint="e.g. ... ORDER BY count() DESC LIMIT 5 SETTINGS dp_select = 'top'")
        for name, value in (("dp_score_min", self.score_min), ("dp_score_max", self.score_max)):
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value)):
                raise QueryRejected(f"{name} must be a number, got {value!r}", hint="e.g. dp_score_max = 10000")
        if self.score_max is not None and self.score_max <= self.score_min:
            raise QueryRejected(f"dp_score_max ({self.score_max:g}) must be above dp_score_min ({self.score_min:g})")
        from dpch.policy.model import MAX_CONTRIBUTION_BOUND
        from dpch.sql.contribution import BOUND_MODES

        if self.bound not in BOUND_MODES:
            raise QueryRejected(
                f"dp_bound must be one of {', '.join(repr(m) for m in BOUND_MODES)}, got {self.bound!r}",
                hint="'groups' bounds each unit per group (dp_max_groups, dp_max_rows_per_group); 'rows' caps its "
                     "rows in all; 'auto' chooses the one with less noise")
        for name, value in (("dp_max_groups", self.max_groups), ("dp_max_rows_per_group", self.max_rows_per_group)):
            if value is not None and not (isinstance(value, int) and not isinstance(value, bool)
                                          and 1 <= value <= MAX_CONTRIBUTION_BOUND):
                raise QueryRejected(
                    f"{name} must be a positive integer up to {MAX_CONTRIBUTION_BOUND:,}, got {value!r}",
                    hint=f"e.g. {name} = 3")
        if self.bound == "rows" and (self.max_groups is not None or self.max_rows_per_group is not None):
            raise QueryRejected("dp_max_groups and dp_max_rows_per_group set a per-group bound, and dp_bound = "
                                "'rows' asks for the row cap", hint="drop one of them")
        if self.report_dropped not in (True, False):  # SETTINGS give 0/1, the Python API True/False
            raise QueryRejected(f"dp_report_dropped must be 0 or 1, got {self.report_dropped!r}",
                                hint="SETTINGS dp_report_dropped = 1 also reports what the contribution bound dropped")
        for setting, chosen, modes in (("dp_store", self.store, STORE_MODES),
                                       ("dp_open_buckets", self.open_buckets, OPEN_BUCKET_MODES)):
            if chosen not in modes:
                raise QueryRejected(f"{setting} must be one of {', '.join(repr(m) for m in modes)}, got {chosen!r}",
                                    hint=f"e.g. SETTINGS {setting} = {modes[-1]!r}")
        from dpch.sql.accuracy_target import validate_options

        validate_options(self)
        mech = self.resolved_mechanism
        if mech not in MECHANISMS:
            raise QueryRejected(
                f"dp_mechanism {mech!r} is not supported",
                hint=f"choose one of {', '.join(MECHANISMS)}",
            )
        return self

    def with_overrides(self, overrides: dict[str, Any]) -> QueryOptions:
        """Applies ``{"epsilon": ..., ...}`` (keys without the ``dp_`` prefix)."""
        known = {f.name for f in fields(self)}
        for key in overrides:
            if key not in known:
                raise QueryRejected(
                    f"unknown dpch option {key!r}",
                    hint=f"known options: {', '.join('dp_' + k for k in sorted(known))}",
                )
        return replace(self, **overrides)


SETTING_NAMES = {f"dp_{f.name}": f.name for f in fields(QueryOptions)}


def option_overrides(settings: dict[str, Any]) -> dict[str, Any]:
    """Maps ``{"dp_epsilon": 0.5}`` to ``{"epsilon": 0.5}``, refusing unknown names."""
    out = {}
    for name, value in settings.items():
        key = SETTING_NAMES.get(name.lower())
        if key is None:
            if name.lower().startswith("dp_"):
                raise QueryRejected(
                    f"unknown dpch setting {name!r}",
                    hint=f"known settings: {', '.join(sorted(SETTING_NAMES))}",
                )
            if name.lower() in PINNED_NAMES:
                # a pinned setting decides whether the exact value is the one the proof is about
                raise QueryRejected(
                    f"SETTINGS {name} is not allowed: dpch fixes it in every private query, because "
                    "another value can change the answer (docs/serving.md, 'Settings dpch pins')",
                    hint="only dpch's dp_* settings can be given")
            raise QueryRejected(
                f"SETTINGS {name} is not allowed: only dpch's dp_* settings can be given",
                hint="ClickHouse settings are fixed by the data owner",
            )
        out[key] = value
    return out


def given_options(**values: Any) -> dict[str, Any]:
    """The options a caller actually gave (``None`` means "not given", e.g. an unset CLI flag)."""
    return {name: value for name, value in values.items() if value is not None}

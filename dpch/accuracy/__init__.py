"""Accuracy-first queries: the analyst states the accuracy, dpch reduces noise until it is met.

    SELECT region, avg(spend) FROM visits GROUP BY region
    SETTINGS dp_accuracy = 2.5, dp_confidence = 0.95

dpch runs one noise-reduction path per query vector (the Brownian mechanism, docs/algorithms.md A2,
or Laplace noise reduction, A1, for pure-ε deployments), looks at ever less noisy iterates
*inside dpch*, stops at the first that meets the target — judged from released (noisy) values
only (A0, Rogers et al. 2023, Def 4.3) — and charges the ex-post cost of that iterate alone (noise-reduction
property, Rogers et al. 2023, Def 4.2; Rogers et al. 2023, Thm 6 for the zCDP budget). Modules:

- :mod:`.target` — the target (absolute half-width, relative error, ε cap, stopping rule);
- :mod:`.bounds` — per-coordinate half-widths at one time, or valid at any stopping time;
- :mod:`.rules` — stopping rules on released values (Rogers et al. 2023, §7's relative rule, the absolute rule);
- :mod:`.planner` — the time (or scale) grid bounded by what the filter still admits (Rogers et al. 2023, Thm 6,
  condition 4: reserve the finest point);
- :mod:`dpch.pipeline.accuracy_first` — reserve → exact aggregates → iterate → settle → release, and ``refine``;
- :mod:`.doubling` — the "doubling" baseline of Rogers et al. 2023, §7.1 and the §7 synthetic experiment.
"""

from dpch.sql.accuracy_target import AccuracyTarget

__all__ = ["AccuracyTarget"]

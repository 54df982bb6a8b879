"""The SQL path: parse (validate, allowlist) → analyze (QueryPlan, sensitivity) → rewrite.

- :mod:`.parse` turns text into one sqlglot SELECT tree and splits off dpch's SETTINGS, within the
  planner's limits on size and depth (:mod:`.limits`); sqlglot's own log messages stay off the
  user's stderr (:mod:`.sqlglot_log`).
- :mod:`.analyze` checks the tree against the table's policy and builds a :class:`QueryPlan`
  with each measure's sensitivity.
- :mod:`.rewrite` emits the ClickHouse SQL that computes the exact aggregates (clamped and
  contribution-capped). Only this SQL reaches ClickHouse.
"""

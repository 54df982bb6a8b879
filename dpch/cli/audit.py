"""``dpch audit``: measure a query's privacy empirically on neighbouring datasets (issue 6)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, cast

import click

from dpch.cli.context import Context, friendly_errors
from dpch.cli.progress import Report, progress
from dpch.errors import ConfigError

if TYPE_CHECKING:  # types only: the audit's estimators load scipy (start-up speed)
    from dpch.audit.runner import AuditRunner


class _Counted:
    """A session whose ``query`` calls are counted (everything else is the session's own)."""

    def __init__(self, session: Any, tick: Callable[[], None]) -> None:
        self._session = session
        self._tick = tick

    def query(self, *args: Any, **kwargs: Any) -> Any:
        release = self._session.query(*args, **kwargs)
        self._tick()
        return release

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def counting_runner(report: Report, total: int) -> type[AuditRunner]:
    """An :class:`~dpch.audit.runner.AuditRunner` reporting ``report(done, total)`` after each
    full-stack release on either side (``total`` = 2 × trials)."""
    # start-up: the audit runner loads the privacy stack; only an audit needs it
    from dpch.audit.runner import AuditRunner

    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        report(done, total)

    class CountingRunner(AuditRunner):
        def __init__(self, session_d: Any, session_dprime: Any, sql: str, **kwargs: Any) -> None:
            report(0, total)
            super().__init__(_Counted(session_d, tick), _Counted(session_dprime, tick), sql, **kwargs)

    return CountingRunner


@click.command()
@click.option("--table", help="The private table whose neighbours are built (must be the query's table).")
@click.option("--query", "sql", help="The query to audit, as an analyst would send it.")
@click.option("--trials", type=int, default=None, help="Releases per side (default 20000 fast, 500 full-stack).")
@click.option("--epsilon", type=float, help="ε of the audited query (default: the query's or dpch's default).")
@click.option("--delta", type=float, help="δ of the audited query (> 0 selects the Gaussian mechanism).")
@click.option("--confidence", type=float, default=0.95, show_default=True, help="Confidence of ε_lb.")
@click.option("--full-stack", is_flag=True, help="Run every trial through the whole query path (slow).")
@click.option("--direction", type=click.Choice(["add", "remove"]), default="add", show_default=True,
              help="D′ = D plus a worst-case unit, or D minus its largest unit.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False),
              help="Write a report with histograms and the threshold curve (.html, or .png with matplotlib).")
@click.option("--suite", is_flag=True,
              help="Audit the fixed query suite (counts, sums, quantiles, partition selection, top-k, joins) "
                   "on the fixture tables; exit 1 on a violation.")
@click.option("--seed", type=int, hidden=True, help="Fixed noise seed (tests only; needs DPCH_ALLOW_FIXED_SEED=1).")
@click.pass_obj
@friendly_errors
def audit(obj: Context, table: str | None, sql: str | None, trials: int | None, epsilon: float | None,
          delta: float | None, confidence: float, full_stack: bool, direction: str, report_path: str | None,
          suite: bool, seed: int | None) -> None:
    """(Data owner) Test whether a query leaks more than its claimed ε.

    Builds D and D′ differing in one worst-case privacy unit (scratch copies of the table in
    the same store), runs the query thousands of times on each, and bounds ε from below
    with a threshold test and a classifier. Spends no analyst's budget.
    """
    # start-up: the audit's estimators (scipy, ~0.4 s) load only when an audit runs
    from dpch.audit.experiment import DEFAULT_TRIALS, audit_query
    from dpch.audit.report import summary, write_report
    from dpch.audit.runner import AuditRunner
    from dpch.audit.suite import run_suite
    from dpch.pipeline.kinds import ThresholdWatch, release_kind

    if suite:
        session = obj.store("dpch audit")
        outcomes = run_suite(session.engine.dsn, trials=trials or DEFAULT_TRIALS, confidence=confidence,
                             seed=seed, echo=click.echo)
        bad = [o.entry.name for o in outcomes if o.violation]
        if bad:
            click.secho(f"VIOLATION in {len(bad)} of {len(outcomes)} audits: {', '.join(bad)}", fg="red")
            sys.exit(1)
        click.echo(f"all {sum(o.result is not None for o in outcomes)} audits consistent")
        return
    if not sql:
        raise ConfigError("dpch audit needs --query (or --suite)",
                          hint='e.g. dpch audit --table visits --query "SELECT count(*) FROM visits"')
    session = obj.store("dpch audit")
    options: dict[str, Any] = {k: v for k, v in (("epsilon", epsilon), ("delta", delta)) if v is not None}
    plan, opts = session.plan(sql, **options)
    if table is not None and plan.table.table != table:
        raise ConfigError(f"the query reads table {plan.table.table}, not {table}",
                          hint="pass the query's own table to --table")
    if isinstance(release_kind(plan, opts), ThresholdWatch):  # audited on its halting positions
        # start-up: as above, the audit's modules load only when an audit runs
        from dpch.audit.watch import audit_watch

        if full_stack:
            raise ConfigError("a watch is audited on its halting positions, without --full-stack",
                              hint="drop --full-stack")
        watched = audit_watch(session, sql, trials=trials or DEFAULT_TRIALS, confidence=confidence,
                              direction=cast(Literal["add", "remove"], direction), seed=seed, **options)
        click.echo(watched.summary())
        if watched.violation:
            sys.exit(1)
        return
    mode = "full" if full_stack else "fast"
    n = trials or (500 if full_stack else DEFAULT_TRIALS)
    # a bar for the full stack's 2 × n releases; the fast mode draws all its trials at once
    with progress("auditing", "releases") as bar:
        runner = counting_runner(bar, 2 * n) if full_stack and bar.visible else AuditRunner
        result = audit_query(session, sql, trials=n, mode=mode, confidence=confidence,
                             direction=cast(Literal["add", "remove"], direction), seed=seed, runner_class=runner,
                             **options)
    click.echo(summary(result))
    if report_path:
        click.echo(f"report: {write_report(result, report_path)}")
    if result.violation:
        sys.exit(1)

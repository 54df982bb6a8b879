"""The ``dpch`` click commands."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from dpch import __version__
from dpch.cli.audit import audit
from dpch.cli.budget_view import budget_json, budget_text, lock_text
from dpch.cli.context import Context, friendly_errors
from dpch.cli.demo import run_demo
from dpch.cli.global_options import GlobalOptionsGroup
from dpch.cli.load import load_file
from dpch.cli.output import FORMATS, clickhouse_text, footer, is_clickhouse_format, render
from dpch.cli.progress import progress
from dpch.cli.serve import serve
from dpch.cli.shell import Shell, split_statements
from dpch.cli.statements import read_sql, run_statements
from dpch.cli.watch import watch, watches_of
from dpch.errors import ConfigError
from dpch.sql.settings import given_options
from dpch.store.engine import CLUSTER_ENV, DSN_ENV
from dpch.store.keeper import MODE_ENV, MODES

if TYPE_CHECKING:  # types only: the pipeline loads the privacy stack (start-up speed)
    from dpch.pipeline.report import Release


@click.group(cls=GlobalOptionsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dpch")
@click.option("--dsn", envvar=DSN_ENV,
              help="chdb:///path (embedded, default ./dpch-data), http://user:pass@host:8123/db, "
              "or dpch://host:port (a `dpch serve` gateway; password in the DSN or $DPCH_PASSWORD)")
@click.option("--analyst", envvar="DPCH_ANALYST", default="default", show_default=True, help="Whose budget pays.")
@click.option("--database", envvar="DPCH_DATABASE", default=None, help="ClickHouse database (default: 'default').")
@click.option("--policy", "policy_file", envvar="DPCH_POLICY", type=click.Path(dir_okay=False),
              help="Policy TOML overriding the tables' dp: annotations.")
@click.option("--cluster", envvar=CLUSTER_ENV, default=None, metavar="NAME",
              help="(Data owner, ClickHouse server) create dpch's tables ON CLUSTER NAME with replicated engines.")
@click.option("--admission", envvar=MODE_ENV, type=click.Choice(MODES), default=None,
              help="(ClickHouse server) where admission is decided: keeper (ClickHouse Keeper, shared by every "
              "process), owner (this process alone), auto (default: keeper if the server has it).")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, dsn: str | None, analyst: str, database: str | None,
        policy_file: str | None, cluster: str | None, admission: str | None, debug: bool) -> None:
    """dpch: differentially private SQL over ClickHouse.

    Every answer is noisy, comes with its interval, and is charged to your privacy budget.
    These options may also follow the command (dpch query --analyst ana "SELECT ...").
    """
    # the engine and the admission store read these when they open (one process: one choice)
    for name, value in ((CLUSTER_ENV, cluster), (MODE_ENV, admission)):
        if value:
            os.environ[name] = value
    ctx.obj = Context(dsn, analyst, database, policy_file, debug)
    ctx.call_on_close(ctx.obj.close)


def _query_options(epsilon: float | None, delta: float | None, confidence: float | None) -> dict:
    return given_options(epsilon=epsilon, delta=delta, confidence=confidence)


_epsilon = click.option("--epsilon", type=float, help="ε for this query (default 0.5; or SETTINGS dp_epsilon).")
_delta = click.option("--delta", type=float, help="δ for this query (> 0 selects the Gaussian mechanism).")
_confidence = click.option("--confidence", type=float, help="Level of the reported intervals (default 0.95).")


@cli.command()
@click.argument("sql", required=False)
@click.option("-q", "--query", "query_option", metavar="SQL", help="The SQL (instead of the argument).")
@click.option("-n", "--multiquery", is_flag=True,
              help="SQL holds several ';'-separated statements: each is a separate release, charged on its "
              "own; the first error stops the run (all are checked, free, before any runs).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table, json, csv, or a clickhouse-client format (PrettyCompact, TSV, TSVWithNames, CSV, "
              "CSVWithNames, JSONEachRow: <col>_lo/<col>_hi follow each noisy column; the cost goes to stderr).")
@_epsilon
@_delta
@_confidence
@click.option("--seed", type=int, hidden=True)  # tests only: refused unless DPCH_ALLOW_FIXED_SEED=1
@click.pass_obj
@friendly_errors
def query(obj: Context, sql: str | None, query_option: str | None, multiquery: bool, fmt: str,
          epsilon: float | None, delta: float | None, confidence: float | None, seed: int | None) -> None:
    """Run a private query and print the noisy answer with its intervals and cost.

    SQL is the argument, -q SQL, or - (standard input: echo "SELECT ..." | dpch query -)."""
    text = read_sql(sql, query_option)
    options = _query_options(epsilon, delta, confidence)
    first = True

    def emit(release: Release) -> None:
        nonlocal first
        if is_clickhouse_format(fmt):  # stdout holds exactly what ClickHouse would write
            click.echo(clickhouse_text(release, fmt), nl=False)
            click.echo(footer(release), err=True)
        else:
            click.echo(("" if first or fmt != "table" else "\n") + render(release, fmt))
        first = False

    session = obj.session(seed=seed)
    if multiquery:
        run_statements(session, split_statements(text), options, emit)
    else:  # one statement: its own error, as it is (nothing to say about other statements)
        emit(session.query(text, **options))


@cli.command()
@click.argument("sql")
@_epsilon
@_delta
@_confidence
@click.pass_obj
@friendly_errors
def explain(obj: Context, sql: str, epsilon: float | None, delta: float | None,
            confidence: float | None) -> None:
    """Show the plan, sensitivities, noise and cost of a query, without spending anything."""
    click.echo(obj.session().explain(sql, **_query_options(epsilon, delta, confidence)).describe())


@cli.group(invoke_without_command=True)
@click.option("--analyst", "target", default=None, help="Show this analyst's budget (default: yours).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@friendly_errors
def budget(ctx: click.Context, target: str | None, as_json: bool) -> None:
    """Show a budget per filter scope: budget, spent (odometer), reserved, remaining, last releases."""
    # start-up: dpch.accounting loads the whole privacy stack (NumPy, SciPy); only this command needs it
    from dpch.accounting.accountant import Accountant

    if ctx.invoked_subcommand is not None:
        return
    obj: Context = ctx.obj
    session = obj.session()
    recent = 10 if as_json else 5
    if target and target != session.analyst:  # another analyst's budget: the data owner's, on the store
        own = obj.store("another analyst's budget (dpch budget --analyst NAME)").accountant
        status = Accountant(own.engine, target, default_budget=own.default_budget, filter=own.filter_name,
                            filter_options=own.filter_options).status(recent=recent)
    else:
        status = session.accountant.status(recent=recent)
    watches = watches_of(obj, target or session.analyst) if session.in_process else []
    click.echo(budget_json(status, watches) if as_json else budget_text(status, watches))


@budget.command("set")
@click.option("--analyst", "target", required=True, help="The analyst whose budget to set.")
@click.option("--epsilon", type=float, required=True, help="Total ε the analyst may spend (per period with --renew).")
@click.option("--delta", type=float, default=1e-6, show_default=True, help="Total δ (per period with --renew).")
@click.option("--dataset", default="", help="Also limit releases on this table (db.table or table).")
@click.option("--filter", "filter_name", default="", help="Privacy filter for this analyst (e.g. zcdp, zcdp_bm).")
@click.option("--filter-options", default="", help='Filter options as JSON, e.g. \'{"split": 0.3}\'.')
@click.option("--renew", type=click.Choice(["daily", "weekly", "monthly"]), default=None,
              help="Restart the budget each UTC day, ISO week (from Monday) or month. Without "
              "--lifetime-epsilon the total over all periods is unbounded.")
@click.option("--lifetime-epsilon", type=float, default=None, help="With --renew: cap the ε of all periods together.")
@click.option("--lifetime-delta", type=float, default=None,
              help="With --renew: cap the δ of all periods together (default: the --delta of one period).")
@click.pass_obj
@friendly_errors
def budget_set(obj: Context, target: str, epsilon: float, delta: float, dataset: str, filter_name: str,
               filter_options: str, renew: str | None, lifetime_epsilon: float | None,
               lifetime_delta: float | None) -> None:
    """(Data owner) Set an analyst's total budget (or a per-dataset one), optionally renewed per period."""
    # start-up: dpch.accounting loads the whole privacy stack (NumPy, SciPy); only this command needs it
    from dpch.accounting.accountant import Accountant
    from dpch.accounting.budget import Budget, Renewal

    engine = obj.store("dpch budget set").engine
    if dataset and "." not in dataset:
        dataset = f"{engine.database}.{dataset}"
    try:
        options = json.loads(filter_options) if filter_options else None
    except json.JSONDecodeError:
        raise ConfigError("--filter-options is not valid JSON",
                          hint='e.g. --filter-options \'{"split": 0.3}\'') from None
    if (lifetime_epsilon is not None or lifetime_delta is not None) and renew is None:
        raise ConfigError("--lifetime-epsilon/--lifetime-delta cap a renewing budget",
                          hint="add --renew daily|weekly|monthly (a budget that never renews is already a "
                               "lifetime budget)")
    if lifetime_delta is not None and lifetime_epsilon is None:
        raise ConfigError("--lifetime-delta needs --lifetime-epsilon", hint="give both, e.g. --lifetime-epsilon 30")
    budget = Budget(epsilon, delta)
    lifetime = Budget(lifetime_epsilon, delta if lifetime_delta is None else lifetime_delta) \
        if lifetime_epsilon is not None else None
    renewal = Renewal(renew or "", lifetime)
    Accountant(engine, target).set_budget(budget, dataset=dataset, filter=filter_name,
                                          filter_options=options, renewal=renewal)
    scope = f" on {dataset}" if dataset else ""
    chosen = f", filter {filter_name}" if filter_name else ""
    click.echo(f"budget of {target}{scope}: {renewal.describe(budget)}{chosen}")


@budget.command("list")
@click.pass_obj
@friendly_errors
def budget_list(obj: Context) -> None:
    """(Data owner) List the budgets that have been set, and the locked analysts."""
    # start-up: dpch.accounting loads the whole privacy stack (NumPy, SciPy); only this command needs it
    from dpch.accounting.budget import BudgetStore
    from dpch.accounting.locks import LockStore

    engine = obj.store("dpch budget list").engine
    locks = {lock.analyst: lock for lock in LockStore(engine).all()}
    for analyst, setting in BudgetStore(engine).all_settings().items():
        click.echo(f"{analyst}: {setting.renewal.describe(setting.budget)}" + ("  LOCKED" if analyst in locks else ""))
    for lock in locks.values():
        click.echo(f"locked: {lock_text(lock)}")


@budget.command("unlock")
@click.option("--analyst", "target", required=True, help="The analyst to unlock.")
@click.pass_obj
@friendly_errors
def budget_unlock(obj: Context, target: str) -> None:
    """(Data owner) Clear the lock of an analyst whose query failed after its charge (the tripwire)."""
    # start-up: dpch.accounting loads the whole privacy stack (NumPy, SciPy); only this command needs it
    from dpch.accounting.accountant import Accountant

    session = obj.store("dpch budget unlock")
    if Accountant(session.engine, target).unlock():
        click.echo(f"analyst {target} unlocked")
    else:
        click.echo(f"analyst {target} was not locked")


@cli.group()
def policy() -> None:
    """Inspect privacy policies (and verify a table's rows per unit)."""


@policy.command("show")
@click.argument("table", required=False)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@friendly_errors
def policy_show(obj: Context, table: str | None, as_json: bool) -> None:
    """Print the effective policy of TABLE (or of every annotated table)."""
    session = obj.session()
    policies = [session.table_policy(table)] if table else session.tables()
    if as_json:
        click.echo(json.dumps([p.as_dict() for p in policies], indent=2))
        return
    if not policies:
        click.echo(f"no annotated tables in database {session.engine.database}")
    click.echo("\n\n".join(p.describe() for p in policies))


@policy.command("verify")
@click.argument("table")
@click.pass_obj
@friendly_errors
def policy_verify(obj: Context, table: str) -> None:
    """(Data owner) Check that no unit of TABLE has more than its max_rows_per_unit rows, and record
    it: queries then skip the contribution cap until the table's data changes."""
    # start-up: the verification needs the policy package; only this command loads it here
    from dpch.policy.verify import verify_rows_per_unit

    session = obj.store("dpch policy verify")
    click.echo(verify_rows_per_unit(session.engine, session.policy, table).describe())


@policy.command("suggest")
@click.argument("table")
@click.option("--by", metavar="EXPR", help="A grouping expression, as a GROUP BY would read it "
              "(e.g. toStartOfMonth(visit_date)): also report groups per unit and rows per group.")
@click.pass_obj
@friendly_errors
def policy_suggest(obj: Context, table: str, by: str | None) -> None:
    """(Data owner) Report TABLE's rows per unit (and, with --by, groups per unit and rows per group) and
    the share of rows each candidate bound would drop, to choose max_rows_per_unit, max_groups_per_unit
    and max_rows_per_group. Exact counts of the raw data: never for an analyst."""
    # start-up: only this command loads the report
    from dpch.policy.suggest import suggest

    session = obj.store("dpch policy suggest")
    click.echo(suggest(session.engine, session.policy, table, by).describe())


@policy.command("functions")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True)
def policy_functions(name: str | None, as_json: bool) -> None:
    """List the functions dpch accepts: where each may appear, what each argument accepts (any value,
    constant only, guarded) and why no row can make it fail. NAME shows one."""
    # start-up: the registry is the SQL package's; only this command loads it here
    from dpch.sql.functions import listing

    rows = [r for r in listing() if name is None or r[0].lower() == name.lower()]
    if name is not None and not rows:
        raise click.UsageError(f"dpch accepts no function named {name} (dpch policy functions lists them)")
    if as_json:
        click.echo(json.dumps([{"name": n, "where": w, "arguments": a, "why": y} for n, w, a, y in rows], indent=2))
        return
    for fn, where, arguments, why in rows:
        click.echo(f"{fn}  [{where}]")
        if arguments:
            click.echo(f"    arguments: {arguments}")
        click.echo(f"    why it cannot fail on a row: {why}")


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--table", required=True, help="Table to create.")
@click.option("--privacy-unit", required=True, help="Column identifying a person (the privacy unit).")
@click.option("--max-rows-per-unit", type=int, help="Rows one unit may contribute (required unless --unique-units).")
@click.option("--unique-units", is_flag=True, help="The file holds at most one row per unit.")
@click.option("--bounds", multiple=True, metavar="COL=LO:HI", help="Clamping bounds of a numeric column.")
@click.option("--public", multiple=True, metavar="COL[=V1,V2,...]", help="A public column, with its key domain.")
@click.option("--replace", is_flag=True, help="Replace the table if it exists.")
@click.pass_obj
@friendly_errors
def load(obj: Context, file: str, table: str, privacy_unit: str, max_rows_per_unit: int | None,
         unique_units: bool, bounds: tuple[str, ...], public: tuple[str, ...], replace: bool) -> None:
    """(Data owner) Load a CSV or Parquet FILE into a new annotated table."""
    session = obj.store("dpch load")
    engine = session.engine
    with progress(f"loading {table}", "rows") as bar:  # drawn only when stderr is a terminal
        rows = load_file(engine, file, table=table, privacy_unit=privacy_unit,
                         max_rows_per_unit=max_rows_per_unit, unique_units=unique_units,
                         bounds=bounds, public=public, replace=replace, progress=bar if bar.visible else None)
    session.policy.reload()
    click.echo(f"loaded {rows} rows into {engine.database}.{table}")
    click.echo(session.table_policy(table).describe())


@cli.command()
@click.option("--reset", is_flag=True, help="Recreate the demo table and the demo analyst's budget.")
@click.pass_obj
@friendly_errors
def demo(obj: Context, reset: bool) -> None:
    """Load an annotated demo table and run a few private queries on it."""
    run_demo(obj.dsn, database=obj.database, reset=reset, echo=click.echo)


@cli.command()
@click.option("-c", "command", help="Run these statements and exit.")
@click.option("-f", "file", type=click.File("r"), help="Run the statements of a file and exit.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--yes", "-y", "assume_yes", is_flag=True, help="Never ask before an expensive query.")
@click.option("--confirm-share", type=click.FloatRange(min=0, min_open=True), default=0.25, show_default=True,
              help="Ask first when a query costs more than this share of the remaining budget "
              "(scripts fail instead).")
@click.option("--intervals", type=click.Choice(["half", "full"]), default="half", show_default=True,
              help="Show value ± half-width, or value [lo, hi].")
@_epsilon
@_delta
@_confidence
@click.option("--seed", type=int, hidden=True)  # tests only: refused unless DPCH_ALLOW_FIXED_SEED=1
@click.pass_obj
@friendly_errors
def shell(obj: Context, command: str | None, file: Any, fmt: str, assume_yes: bool, confirm_share: float,
          intervals: str, epsilon: float | None, delta: float | None, confidence: float | None,
          seed: int | None) -> None:
    """An interactive SQL shell (statements end with ';'; \\q quits, \\help for more)."""
    interactive = command is None and file is None and sys.stdin.isatty()
    sh = Shell(obj.session(seed=seed), fmt=fmt, debug=obj.debug, interactive=interactive, assume_yes=assume_yes,
               confirm_share=confirm_share, intervals=intervals,
               options=_query_options(epsilon, delta, confidence))
    if command is not None:
        sys.exit(sh.run_script(command))
    if file is not None:
        sys.exit(sh.run_script(file.read()))
    if not interactive:
        sys.exit(sh.run_script(sys.stdin.read()))
    sh.loop()


@cli.command("engine-info", hidden=True)
@click.pass_obj
@friendly_errors
def engine_info(obj: Context) -> None:
    """Where the data lives."""
    click.echo(obj.session().engine.describe())


cli.add_command(audit)  # defined in their own modules
cli.add_command(serve)
cli.add_command(watch)


def main() -> None:
    cli(prog_name="dpch")


if __name__ == "__main__":
    main()

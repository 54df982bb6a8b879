"""The ``dpch`` click commands."""

from __future__ import annotations

import functools
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from dpch import __version__
from dpch.accounting.accountant import Accountant
from dpch.accounting.budget import Budget, BudgetStore
from dpch.accounting.locks import LockStore
from dpch.cli.budget_view import lock_text
from dpch.cli.output import FORMATS, render
from dpch.connection import connect
from dpch.errors import ConfigError, DpchError
from dpch.session import Session
from dpch.sql.settings import given_options
from dpch.store.engine import DSN_ENV, Engine


class Context:
    """Global options, and the session opened lazily by the first command that needs it."""

    def __init__(self, dsn: str | None, analyst: str, database: str | None, policy: str | None,
                 debug: bool) -> None:
        self.dsn = dsn
        self.analyst = analyst
        self.database = database
        self.policy = policy
        self.debug = debug
        self._session: Session | None = None

    def session(self, seed: int | None = None) -> Session:
        if self._session is None:
            self._session = connect(self.dsn, analyst=self.analyst, database=self.database,
                                    policy=self.policy, seed=seed)
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turns errors into one line on stderr and exit code 1 (tracebacks only with --debug)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = isinstance(ctx.obj, Context) and ctx.obj.debug
        try:
            return func(*args, **kwargs)
        except DpchError as exc:
            if debug:
                traceback.print_exc()
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(1)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as exc:  # never show a traceback (or an unvetted message) by default
            if debug:
                traceback.print_exc()
            click.secho(f"error: internal error ({type(exc).__name__}); rerun with --debug for details",
                        fg="red", err=True)
            sys.exit(1)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dpch")
@click.option("--dsn", envvar=DSN_ENV,
              help="chdb:///path (embedded, default ./dpch-data), http://user:pass@host:8123/db, "
              "or dpch://host:port (a `dpch serve` gateway; password in the DSN or $DPCH_PASSWORD)")
@click.option("--analyst", envvar="DPCH_ANALYST", default="default", show_default=True, help="Whose budget pays.")
@click.option("--database", envvar="DPCH_DATABASE", default=None, help="ClickHouse database (default: 'default').")
@click.option("--policy", "policy_file", envvar="DPCH_POLICY", type=click.Path(dir_okay=False),
              help="Policy TOML overriding the tables' dp: annotations.")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, dsn: str | None, analyst: str, database: str | None,
        policy_file: str | None, debug: bool) -> None:
    """dpch: differentially private SQL over ClickHouse.

    Every answer is noisy, comes with its interval, and is charged to your privacy budget.
    """
    ctx.obj = Context(dsn, analyst, database, policy_file, debug)
    ctx.call_on_close(ctx.obj.close)


def _query_options(epsilon: float | None, delta: float | None, confidence: float | None) -> dict:
    return given_options(epsilon=epsilon, delta=delta, confidence=confidence)


_epsilon = click.option("--epsilon", type=float, help="ε for this query (default 0.5; or SETTINGS dp_epsilon).")
_delta = click.option("--delta", type=float, help="δ for this query (> 0 selects the Gaussian mechanism).")
_confidence = click.option("--confidence", type=float, help="Level of the reported intervals (default 0.95).")


@cli.command()
@click.argument("sql")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@_epsilon
@_delta
@_confidence
@click.pass_obj
@friendly_errors
def query(obj: Context, sql: str, fmt: str, epsilon: float | None, delta: float | None,
          confidence: float | None) -> None:
    """Run one private query and print the noisy answer with its intervals and cost."""
    release = obj.session().query(sql, **_query_options(epsilon, delta, confidence))
    click.echo(render(release, fmt))


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
    if ctx.invoked_subcommand is not None:
        return
    from dpch.cli.budget_view import budget_json, budget_text

    session = ctx.obj.session()
    accountant = session.accountant
    if target and target != accountant.analyst:
        if not isinstance(accountant, Accountant):
            raise ConfigError("another analyst's budget is visible only to the data owner, on the store itself",
                              hint="run `dpch budget --analyst NAME` where the store is, not through a gateway")
        accountant = Accountant(session.engine, target, default_budget=accountant.default_budget,
                                filter=accountant.filter_name, filter_options=accountant.filter_options)
    status = accountant.status(recent=10 if as_json else 5)
    click.echo(budget_json(status) if as_json else budget_text(status))


@budget.command("set")
@click.option("--analyst", "target", required=True, help="The analyst whose budget to set.")
@click.option("--epsilon", type=float, required=True, help="Total ε the analyst may spend.")
@click.option("--delta", type=float, default=1e-6, show_default=True, help="Total δ.")
@click.option("--dataset", default="", help="Also limit releases on this table (db.table or table).")
@click.option("--filter", "filter_name", default="", help="Privacy filter for this analyst (e.g. zcdp, zcdp_bm).")
@click.option("--filter-options", default="", help='Filter options as JSON, e.g. \'{"split": 0.3}\'.')
@click.pass_obj
@friendly_errors
def budget_set(obj: Context, target: str, epsilon: float, delta: float, dataset: str, filter_name: str,
               filter_options: str) -> None:
    """(Data owner) Set an analyst's total budget (or a per-dataset one)."""
    from dpch.errors import ConfigError

    engine = obj.session().engine
    if dataset and "." not in dataset:
        dataset = f"{engine.database}.{dataset}"
    try:
        options = json.loads(filter_options) if filter_options else None
    except json.JSONDecodeError:
        raise ConfigError("--filter-options is not valid JSON",
                          hint='e.g. --filter-options \'{"split": 0.3}\'') from None
    Accountant(engine, target).set_budget(Budget(epsilon, delta), dataset=dataset, filter=filter_name,
                                          filter_options=options)
    scope = f" on {dataset}" if dataset else ""
    chosen = f", filter {filter_name}" if filter_name else ""
    click.echo(f"budget of {target}{scope}: ε {epsilon:g}, δ {delta:g}{chosen}")


@budget.command("list")
@click.pass_obj
@friendly_errors
def budget_list(obj: Context) -> None:
    """(Data owner) List the budgets that have been set, and the locked analysts."""
    engine = obj.session().engine
    locks = {lock.analyst: lock for lock in LockStore(engine).all()}
    for analyst, b in BudgetStore(engine).all().items():
        click.echo(f"{analyst}: ε {b.epsilon:g}, δ {b.delta:g}" + ("  LOCKED" if analyst in locks else ""))
    for lock in locks.values():
        click.echo(f"locked: {lock_text(lock)}")


@budget.command("unlock")
@click.option("--analyst", "target", required=True, help="The analyst to unlock.")
@click.pass_obj
@friendly_errors
def budget_unlock(obj: Context, target: str) -> None:
    """(Data owner) Clear the lock of an analyst whose query failed after its charge (the tripwire)."""
    session = obj.session()
    if not isinstance(session.accountant, Accountant):
        raise ConfigError("only the data owner unlocks an analyst, on the store itself",
                          hint="run `dpch budget unlock --analyst NAME` where the store is, not through a gateway")
    if Accountant(session.engine, target).unlock():
        click.echo(f"analyst {target} unlocked")
    else:
        click.echo(f"analyst {target} was not locked")


@cli.group()
def policy() -> None:
    """Inspect privacy policies."""


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
    from dpch.cli.load import load_file

    engine = obj.session().engine
    rows = load_file(engine, file, table=table, privacy_unit=privacy_unit,
                     max_rows_per_unit=max_rows_per_unit, unique_units=unique_units,
                     bounds=bounds, public=public, replace=replace)
    obj.session().policy.reload()
    click.echo(f"loaded {rows} rows into {engine.database}.{table}")
    click.echo(obj.session().table_policy(table).describe())


@cli.command()
@click.option("--reset", is_flag=True, help="Recreate the demo table and the demo analyst's budget.")
@click.pass_obj
@friendly_errors
def demo(obj: Context, reset: bool) -> None:
    """Load an annotated demo table and run a few private queries on it."""
    from dpch.cli.demo import run_demo

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
    from dpch.cli.shell import Shell

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
    engine: Engine = obj.session().engine
    click.echo(engine.describe())


from dpch.cli.audit import audit as _audit  # noqa: E402  (defined in its own module; needs Context)

cli.add_command(_audit)

from dpch.cli.serve import serve  # noqa: E402 - the gateway command lives in its own module

cli.add_command(serve)


def main() -> None:
    cli(prog_name="dpch")


if __name__ == "__main__":
    main()

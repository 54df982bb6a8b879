"""``dpch watch create|list|close``: threshold watches on the store (docs/watches.md).

A watch is asked in SQL (``SETTINGS dp_watch = 'NAME'``) by ``dpch query`` and the shell; these
commands register one (reserving its ε, δ from the analyst's budget), list them and close one.
They run on the store itself (the process that owns its ledger), not through a gateway.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from dpch.cli.budget_view import watches_text
from dpch.cli.context import Context, friendly_errors

if TYPE_CHECKING:  # types only: the accounting stack loads when a command runs (start-up speed)
    from dpch.accounting.watches import WatchState


def watches_of(obj: Context, analyst: str) -> list[WatchState]:
    """``analyst``'s watches on the store (the ``dpch budget`` view)."""
    # start-up: dpch.accounting loads the whole privacy stack (NumPy, SciPy); only this view needs it
    from dpch.accounting.watches import WatchStore

    session = obj.store("the watches of a budget")
    if analyst == session.analyst:
        return session.watches()
    return WatchStore(session.engine).all(analyst)


def _line(state: WatchState) -> str:
    p = state.params
    return (f"watch {p.name}: threshold {p.threshold:g} on [{p.lower:g}, {p.upper:g}], sensitivity {p.sensitivity:g}, "
            f"σ {p.sigma:.4g}; ε {state.charged_epsilon:.4g} of {p.epsilon:g}, δ {state.delta_used:.3g} of "
            f"{p.delta:.3g} ({p.instances} instances at most, ε_max {p.epsilon_max:.4g} each); {state.state}")


@click.group()
def watch() -> None:
    """Threshold watches: ask 'above or below?' many times for one reserved (ε, δ).

    \b
    dpch watch create daily_signups --epsilon 1 --delta 1e-7 --threshold 1000 --upper 5000 --table signups
    dpch query "SELECT count() FROM signups WHERE day = today() SETTINGS dp_watch = 'daily_signups'"
    dpch watch close daily_signups
    """


@watch.command("create")
@click.argument("name")
@click.option("--epsilon", type=float, required=True, help="ε reserved from your budget now for the whole watch.")
@click.option("--delta", type=float, default=1e-7, show_default=True, help="δ reserved now (split over instances).")
@click.option("--threshold", type=float, required=True, help="The threshold the answers compare with (≥ 0).")
@click.option("--upper", type=float, required=True,
              help="Public upper end of the values: each answer's value is clamped to [lower, upper].")
@click.option("--lower", type=float, default=0.0, show_default=True,
              help="Public lower end of the values (≤ threshold; closer to it costs less, docs/watches.md).")
@click.option("--table", "tables", multiple=True, required=True, help="A private table its questions read.")
@click.option("--sensitivity", type=float, default=None,
              help="Largest sensitivity of a question (default: the tables' rows per unit, a count's).")
@click.option("--sigma", type=float, default=None,
              help="Threshold noise σ (default: the smallest with which 10 instances fit ε at their worst).")
@click.option("--instances", type=int, default=None,
              help="Split δ over this many instances (default: the most the ε can ever open).")
@click.pass_obj
@friendly_errors
def create(obj: Context, name: str, epsilon: float, delta: float, threshold: float, upper: float,
           lower: float, tables: tuple[str, ...], sensitivity: float | None, sigma: float | None,
           instances: int | None) -> None:
    """Register a watch; its (ε, δ) is reserved from your budget at once."""
    session = obj.store("dpch watch create")
    state = session.watch_create(name, epsilon=epsilon, delta=delta, threshold=threshold, upper=upper,
                                 tables=tables, sensitivity=sensitivity, sigma=sigma, instances=instances,
                                 lower=lower)
    click.echo(_line(state))


@watch.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
@friendly_errors
def list_watches(obj: Context, as_json: bool) -> None:
    """List your watches: threshold, spent, δ used, the open instance, state."""
    states = obj.store("dpch watch list").watches()
    if as_json:
        data: Any = [s.as_dict() for s in states]
        click.echo(json.dumps(data, indent=2, default=str))
    elif states:
        click.echo(watches_text(states))
    else:
        click.echo("no watches")


@watch.command("close")
@click.argument("name")
@click.pass_obj
@friendly_errors
def close(obj: Context, name: str) -> None:
    """Close a watch: no more questions; its reservation is settled (docs/watches.md)."""
    state = obj.store("dpch watch close").watch_close(name)
    click.echo(_line(state))

"""``dpch shell``: an interactive SQL shell where every answer shows its cost and accuracy.

Statements end with ``;`` and may span lines; backslash commands (``\\help``) do the rest.
Interactive use gets line editing, completion and history (:mod:`dpch.cli.shell_input`), a
spinner and Ctrl-C (:mod:`dpch.cli.running`), and a confirmation before a query that would use
more than ``confirm_share`` of the remaining budget. Piped input and ``-c``/``-f`` scripts never
prompt: they stop at the first error (an unconfirmed expensive query is one) and exit 1.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any

import click

from dpch import __version__
from dpch.cli.budget_view import budget_text
from dpch.cli.output import FORMATS, budget_bar, footer, is_clickhouse_format, render, stream_is_utf8, to_ascii
from dpch.cli.running import Cancelled, Runner
from dpch.errors import DpchError
from dpch.sql.settings import SETTING_NAMES, QueryOptions

if TYPE_CHECKING:  # types only: dpch.api loads the session stack (start-up speed)
    from dpch.api import PrivateSession

DEFAULT_CONFIRM_SHARE = 0.25

HELP = """\
SQL statements end with ';' and may span lines (Tab completes, Ctrl-C cancels, Ctrl-D quits).
  \\budget           budget, spent (odometer), reserved and remaining, per filter scope
  \\tables           tables with a privacy policy, and their columns
  \\policy [TABLE]   a table's privacy policy (every table's without TABLE)
  \\explain SQL      plan, sensitivity, noise scale, half-width and cost, without spending
  \\refine           a less noisy version of the last accuracy-first answer (when available)
  \\format FMT       table | json | csv, or PrettyCompact | TSV | TSVWithNames | CSV | CSVWithNames | JSONEachRow
  \\intervals MODE   half (value ± half-width) | full (value [lo, hi])
  \\set NAME VALUE   a session default: dp_epsilon, dp_delta, dp_mechanism, dp_confidence,
                    or confirm_share (ask before spending more than this share of what is left)
  \\unset NAME       back to the default;  \\set alone lists the settings
  \\history [N]      your last N releases with their costs
  \\help             this text
  \\q                quit
EXPLAIN DP SELECT ... also shows a plan and spends nothing."""


class ConfirmationRequired(DpchError):
    """An expensive query in a script, where the shell cannot ask: nothing was run or charged."""

    kind = "confirm"


def split_statements(text: str) -> list[str]:
    """Splits on ';' outside quotes; drops empty statements and '--' comment lines."""
    statements: list[str] = []
    current: list[str] = []
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == ";":
            statements.append("".join(current))
            current = []
            continue
        current.append(ch)
    statements.append("".join(current))
    cleaned = []
    for s in statements:
        body = "\n".join(line for line in s.splitlines() if not line.strip().startswith("--")).strip()
        if body:
            cleaned.append(body)
    return cleaned


class Quit(Exception):
    """``\\q``: leave the shell."""


class Shell:
    """One shell over a :class:`~dpch.api.PrivateSession` (in-process, or a gateway's).

    ``interactive``: a person is at a terminal (prompts and spinners allowed). ``assume_yes``
    skips the confirmation; ``confirm_share`` is its threshold, a share of the remaining ε (and δ).
    ``options`` are session defaults for every query (``epsilon``, ``delta``, ...).
    """

    def __init__(self, session: PrivateSession, *, fmt: str = "table", debug: bool = False, interactive: bool = False,
                 assume_yes: bool = False, confirm_share: float = DEFAULT_CONFIRM_SHARE,
                 intervals: str = "half", options: dict[str, Any] | None = None) -> None:
        self.session = session
        self.fmt = fmt
        self.debug = debug
        self.interactive = interactive
        self.assume_yes = assume_yes
        self.confirm_share = confirm_share
        self.intervals = intervals
        self.options: dict[str, Any] = dict(options or {})
        self.ascii = not stream_is_utf8()
        self.runner = Runner(local=session.in_process, progress=interactive, ascii=self.ascii)
        self.released: dict[str, str] = {}  # release id -> SQL, for \history
        self._schema: dict[str, list[str]] | None = None

    # -- output ----------------------------------------------------------------------------------

    def echo(self, text: str) -> None:
        click.echo(to_ascii(text) if self.ascii else text)

    def error(self, exc: BaseException) -> None:
        """One red line: the reason and a hint; a traceback only with --debug."""
        if self.debug:
            traceback.print_exception(exc)
        if isinstance(exc, DpchError):
            text = f"error: {exc}"
        else:
            text = f"error: internal error ({type(exc).__name__}); rerun with --debug for details"
        text = " ".join(text.split())
        click.secho(to_ascii(text) if self.ascii else text, fg="red", err=True)

    # -- statements ------------------------------------------------------------------------------

    def execute(self, statement: str) -> bool:
        """Runs one statement or backslash command; returns False on error (printed)."""
        try:
            if statement.startswith("\\"):
                self._command(statement)
            elif statement.strip().rstrip(";").lower() in ("quit", "exit"):
                raise Quit
            else:
                self._query(statement)
            return True
        except Quit:
            raise
        except Cancelled as exc:
            click.secho(str(exc), fg="yellow", err=True)
            return False
        except Exception as exc:
            self.error(exc)
            return False

    def _query(self, sql: str) -> None:
        options = dict(self.options)
        if not self.assume_yes and not sql.lstrip().upper().startswith("EXPLAIN"):
            if not self._confirmed(sql, options):
                self.echo("not run; nothing was charged")
                return
        release = self.runner.call(lambda: self.session.query(sql, **options))
        if release.release_id:
            self.released[release.release_id] = " ".join(sql.split())
        if self.fmt == "table" and release.columns == ["explain"] and not release.release_id:
            # EXPLAIN DP: the plan as text, not as a one-column table
            self.echo("\n".join([str(row[0]) for row in release.rows] + [f"note: {n}" for n in release.notes]))
            return
        self.echo(render(release, self.fmt, intervals=self.intervals, ascii=self.ascii))
        if is_clickhouse_format(self.fmt):  # the data alone on stdout; what it cost beside it
            click.echo(footer(release), err=True)

    def _confirmed(self, sql: str, options: dict[str, Any]) -> bool:
        """Asks before a query costing more than ``confirm_share`` of what is left (spends nothing)."""
        explanation, status = self.runner.call(lambda: (self.session.explain(sql, **options), self.session.budget()),
                                               label="planning")
        if not explanation.admissible:
            return True  # the query itself reports the refusal, charging nothing
        cost = explanation.cost
        left = status.remaining
        if cost.rho is not None and left.rho is not None:  # a zCDP filter counts ρ, not ε
            share = cost.rho / left.rho if left.rho > 0 else float("inf")
            spent_in = f"ρ {cost.rho:.4g}, {share:.0%} of your remaining ρ {left.rho:.4g}"
        else:
            share = max(cost.epsilon / left.epsilon if left.epsilon > 0 else float("inf"),
                        cost.delta / left.delta if cost.delta and left.delta > 0 else 0.0)
            spent_in = f"{share:.0%} of your remaining ε {left.epsilon:.4g}"
        if share <= self.confirm_share:
            return True
        what = f"this query costs ε {cost.epsilon:.4g}" + (f", δ {cost.delta:.3g}" if cost.delta else "")
        what += f", {spent_in}"
        if not self.interactive:
            raise ConfirmationRequired(f"{what} (above the {self.confirm_share:.0%} confirmation threshold); "
                                       "not run, nothing was charged",
                                       hint="rerun with --yes, or raise --confirm-share")
        try:
            return click.confirm(to_ascii(what) + "; run it?" if self.ascii else f"{what}; run it?",
                                 default=False, err=True)
        except click.Abort:
            click.echo("", err=True)
            return False

    # -- backslash commands ----------------------------------------------------------------------

    def _command(self, line: str) -> None:
        name, _, arg = line.strip().rstrip(";").partition(" ")
        arg = arg.strip()
        handler = _COMMANDS.get(name)
        if handler is None:
            raise DpchError(f"unknown command {name}", hint="\\help lists the commands")
        handler(self, arg)

    def _help(self, arg: str) -> None:
        self.echo(HELP)

    def _quit(self, arg: str) -> None:
        raise Quit

    def _budget(self, arg: str) -> None:
        status = self.runner.call(lambda: self.session.accountant.status(recent=0))
        listed = getattr(self.session, "watches", None)  # threshold watches: a session on the store only
        watches = self.runner.call(listed) if listed is not None else []
        self.echo(f"budget: {budget_bar(status)}")
        self.echo(budget_text(status, watches))

    def _tables(self, arg: str) -> None:
        policies = self.runner.call(self.session.tables)
        self._schema = {p.table: list(p.columns) for p in policies}
        if not policies:
            self.echo(f"no tables with a privacy policy in database {self.session.engine.database}")
        for p in policies:
            kind = "public" if p.public else f"private (unit {p.privacy_unit})"
            self.echo(f"{p.table}  {kind}\n    columns: {', '.join(p.columns)}")

    def _policy(self, arg: str) -> None:
        if arg:
            self.echo(self.runner.call(lambda: self.session.table_policy(arg)).describe())
            return
        policies = self.runner.call(self.session.tables)
        self.echo("\n\n".join(p.describe() for p in policies) or "no tables with a privacy policy")

    def _explain(self, arg: str) -> None:
        if not arg:
            raise DpchError("\\explain needs a query", hint="\\explain SELECT count(*) FROM visits")
        options = dict(self.options)
        self.echo(self.runner.call(lambda: self.session.explain(arg, **options), label="planning").describe())

    def _refine(self, arg: str) -> None:
        release = self.runner.call(self.session.refine, label="refining")
        if release.release_id:
            self.released[release.release_id] = "\\refine"
        self.echo(render(release, self.fmt, intervals=self.intervals, ascii=self.ascii))

    def _format(self, arg: str) -> None:
        if arg not in FORMATS:
            raise DpchError(f"unknown format {arg!r}", hint=f"\\format {' | '.join(FORMATS)}")
        self.fmt = arg

    def _intervals(self, arg: str) -> None:
        if arg not in ("half", "full"):
            raise DpchError(f"unknown interval display {arg!r}", hint="\\intervals half | full")
        self.intervals = arg

    def _set(self, arg: str) -> None:
        if not arg:
            defaults = QueryOptions().__dict__ | self.options
            for setting, value in defaults.items():
                mark = "" if setting in self.options else "  (default)"
                self.echo(f"dp_{setting} = {value}{mark}")
            self.echo(f"confirm_share = {self.confirm_share:g}   format = {self.fmt}   intervals = {self.intervals}")
            return
        name, _, raw = arg.partition(" ")
        name, raw = name.lower(), raw.strip().strip("'\"")
        if not raw:
            raise DpchError(f"\\set {name} needs a value", hint="e.g. \\set dp_epsilon 0.5")
        if name == "confirm_share":
            share = _number(raw)
            if not isinstance(share, float) or share <= 0:
                raise DpchError(f"confirm_share must be a positive number, got {raw!r}",
                                hint="e.g. \\set confirm_share 0.5 (1 asks only above the remaining budget)")
            self.confirm_share = share
            return
        key = SETTING_NAMES.get(name) or SETTING_NAMES.get(f"dp_{name}")
        if key is None:
            raise DpchError(f"unknown setting {name!r}",
                            hint=f"settable: {', '.join(sorted(SETTING_NAMES))}, confirm_share")
        value = raw if key == "mechanism" else _number(raw)
        QueryOptions().with_overrides({**self.options, key: value}).validated()
        self.options[key] = value

    def _unset(self, arg: str) -> None:
        name = arg.lower()
        if name == "confirm_share":
            self.confirm_share = DEFAULT_CONFIRM_SHARE
            return
        key = SETTING_NAMES.get(name) or SETTING_NAMES.get(f"dp_{name}")
        if key is None:
            raise DpchError(f"unknown setting {name!r}", hint="\\set lists the settings")
        self.options.pop(key, None)

    def _history(self, arg: str) -> None:
        limit = int(arg) if arg.isdigit() else 10
        entries = self.runner.call(lambda: self.session.accountant.recent(limit))
        if not entries:
            self.echo("no releases yet")
        for e in entries:
            cost = f"ε {e.cost.epsilon:.4g}" + (f", δ {e.cost.delta:.3g}" if e.cost.delta else "")
            sql = self.released.get(e.release_id, "")
            self.echo(f"{e.time:%Y-%m-%d %H:%M:%S}  {e.dataset:<24} {e.mechanism:<9} {cost:<18} {e.status:<8}"
                      + (f"  {sql}" if sql else ""))

    # -- scripts and the interactive loop --------------------------------------------------------

    def run_script(self, text: str) -> int:
        """Runs every statement in ``text``; stops at the first error. Returns the exit code."""
        for statement in _script_items(text):
            try:
                if not self.execute(statement):
                    return 1
            except Quit:
                return 0
        return 0

    def banner(self) -> None:
        status = self.runner.call(self.session.budget)
        self.echo(f"dpch {__version__} — {self.session.engine.describe()} — analyst: {self.session.analyst}")
        delta = f"  δ {status.spent.delta:.3g} of {status.budget.delta:.3g}" if status.budget.delta else ""
        self.echo(f"budget: {budget_bar(status)}{delta}")
        self.echo("statements end with ';'   \\help for commands   \\q to quit")

    def schema(self) -> dict[str, list[str]]:
        """Tables and columns for completion (read once; ``\\tables`` refreshes it)."""
        if self._schema is None:
            try:
                self._schema = {p.table: list(p.columns) for p in self.session.tables()}
            except Exception:  # completion never breaks the prompt
                self._schema = {}
        return self._schema

    def loop(self) -> None:
        """The interactive loop (prompt_toolkit): returns on ``\\q`` or Ctrl-D."""
        # start-up: prompt_toolkit (~0.2 s) loads only for an interactive shell, not for scripts
        from dpch.cli.shell_input import PROMPT, make_prompt

        try:
            self.banner()
        except Exception as exc:
            self.error(exc)
        prompt = make_prompt(self.schema)
        while True:
            try:
                text = prompt.prompt(PROMPT)
            except KeyboardInterrupt:
                continue  # Ctrl-C clears the line
            except EOFError:
                return
            try:
                for item in _script_items(text):
                    self.execute(item)
            except Quit:
                return
            except KeyboardInterrupt:
                click.secho("interrupted", fg="yellow", err=True)


_COMMANDS = {
    "\\help": Shell._help, "\\?": Shell._help, "\\h": Shell._help, "\\q": Shell._quit, "\\quit": Shell._quit,
    "\\budget": Shell._budget, "\\tables": Shell._tables, "\\dt": Shell._tables, "\\policy": Shell._policy,
    "\\explain": Shell._explain, "\\refine": Shell._refine, "\\format": Shell._format,
    "\\intervals": Shell._intervals, "\\set": Shell._set, "\\unset": Shell._unset, "\\history": Shell._history,
}


def _number(raw: str) -> Any:
    try:
        return float(raw)
    except ValueError:
        return raw


def _script_items(text: str) -> list[str]:
    """Backslash commands are whole lines; everything else is SQL split on ';'."""
    items: list[str] = []
    sql: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("\\"):
            items.extend(split_statements("\n".join(sql)))
            sql = []
            items.append(line.strip())
        else:
            sql.append(line)
    items.extend(split_statements("\n".join(sql)))
    return items


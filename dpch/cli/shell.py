"""A minimal interactive shell: statements end with ``;``, backslash commands for the rest.

Piped input and ``-c``/``-f`` scripts never prompt; they stop at the first error and exit 1.
"""

from __future__ import annotations

import sys

import click

from dpch.cli.output import FORMATS, render, render_budget
from dpch.errors import DpchError
from dpch.session import Session

HELP = """\
SQL statements end with ';' and may span lines.
  \\budget           your budget: spent and remaining
  \\tables           annotated tables
  \\policy TABLE     a table's privacy policy
  \\explain SQL      plan, sensitivity, noise and cost, without spending
  \\format FMT       table | json | csv
  \\help             this text
  \\q                quit"""


def split_statements(text: str) -> list[str]:
    """Splits on ';' outside quotes; drops empty statements and '--' comment lines."""
    statements, current, quote = [], [], ""
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


class Shell:
    def __init__(self, session: Session, *, fmt: str = "table", debug: bool = False) -> None:
        self.session = session
        self.fmt = fmt
        self.debug = debug

    def execute(self, statement: str) -> bool:
        """Runs one statement or backslash command; returns False on error."""
        try:
            if statement.startswith("\\"):
                return self._command(statement)
            click.echo(render(self.session.query(statement), self.fmt))
            return True
        except DpchError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            return False

    def _command(self, line: str) -> bool:
        name, _, arg = line.strip().rstrip(";").partition(" ")
        arg = arg.strip()
        if name in ("\\q", "\\quit"):
            raise EOFError
        if name == "\\help":
            click.echo(HELP)
        elif name == "\\budget":
            click.echo(render_budget(self.session.budget()))
        elif name == "\\tables":
            for p in self.session.tables():
                kind = "public" if p.public else f"private (unit {p.privacy_unit})"
                click.echo(f"{p.table}  {kind}")
        elif name == "\\policy":
            if not arg:
                click.secho("error: \\policy needs a table name", fg="red", err=True)
                return False
            click.echo(self.session.table_policy(arg).describe())
        elif name == "\\explain":
            click.echo(self.session.explain(arg).describe())
        elif name == "\\format":
            if arg not in FORMATS:
                click.secho(f"error: format must be one of {', '.join(FORMATS)}", fg="red", err=True)
                return False
            self.fmt = arg
        else:
            click.secho(f"error: unknown command {name} (\\help lists them)", fg="red", err=True)
            return False
        return True

    def run_script(self, text: str) -> int:
        """Runs every statement in ``text``; stops at the first error. Returns the exit code."""
        for statement in _script_items(text):
            try:
                if not self.execute(statement):
                    return 1
            except EOFError:
                return 0
        return 0

    def loop(self) -> None:
        engine = self.session.engine
        click.echo(f"dpch — {engine.describe()} — analyst: {self.session.analyst}")
        click.echo(render_budget(self.session.budget()))
        click.echo("statements end with ';'   \\help for commands   \\q to quit")
        buffer: list[str] = []
        while True:
            try:
                line = input("dpch> " if not buffer else "   -> ")
            except (EOFError, KeyboardInterrupt):
                click.echo("")
                if buffer:
                    buffer = []
                    continue
                return
            if not buffer and line.strip().startswith("\\"):
                try:
                    self.execute(line.strip())
                except EOFError:
                    return
                continue
            buffer.append(line)
            text = "\n".join(buffer)
            if ";" in line:
                buffer = []
                for statement in split_statements(text):
                    self.execute(statement)


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)

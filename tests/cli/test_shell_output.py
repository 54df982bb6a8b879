"""Output snapshots of ``dpch shell -c`` (table, json, csv, the ASCII fallback) on a fixed seed,
and the shell's pieces that need no terminal: completion, statement ends, cancellation."""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from dpch.cli.completion import FUNCTIONS, SqlCompleter
from dpch.cli.main import cli
from dpch.cli.shell_input import statement_complete
from dpch.store.cancel import CancelToken, QueryCancelled, cancellable

SNAPSHOTS = Path(__file__).parent / "snapshots"
SQL = "SELECT region, count(*) AS n, avg(spend) FROM visits GROUP BY region ORDER BY region"
_analysts = itertools.count()


def run_shell(store_dsn: str, database: str, *args: str, charset: str = "utf-8", analyst: str | None = None):
    analyst = analyst or f"snap{next(_analysts)}"  # a fresh budget for each run
    # the data owner gives the analyst its budget (ε 3, δ 1e-6; setting it again changes nothing spent)
    owner = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, "budget", "set", "--analyst",
                                     analyst, "--epsilon", "3", "--delta", "1e-6"])
    assert owner.exit_code == 0, owner.output
    result = CliRunner(charset=charset).invoke(
        cli, ["--dsn", store_dsn, "--database", database, "--analyst", analyst, "shell", "--seed", "12345", *args])
    return result


def normalised(text: str) -> str:
    text = re.sub(r"\d+ ms\b", "N ms", text)
    return re.sub(r'"release_id": "[^"]*"', '"release_id": "ID"', text)


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("DPCH_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {name}; create it with DPCH_UPDATE_SNAPSHOTS=1 and review it"
    assert text == path.read_text(), f"{name} changed; rerun with DPCH_UPDATE_SNAPSHOTS=1 if intended"


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_output_snapshots(store_dsn, keeper, visits_db, fmt):
    result = run_shell(store_dsn, visits_db, "--format", fmt, "-c", SQL + ";")
    assert result.exit_code == 0, result.output
    check_snapshot(f"shell.{fmt}.txt", normalised(result.output))
    if fmt == "json":
        data = json.loads(result.output)
        assert data["columns"] == ["region", "n", "avg(spend)"] and data["cost"]["epsilon"] == 0.5
    if fmt == "table":
        assert "┌─region─┬" in result.output and "± " in result.output


def test_full_intervals_and_ascii_fallback(store_dsn, keeper, visits_db):
    full = run_shell(store_dsn, visits_db, "--intervals", "full", "-c", SQL + ";")
    assert full.exit_code == 0 and "±" not in full.output and re.search(r"\d \[[\d,.]+, [\d,.]+\]", full.output)
    # a named analyst: the snapshot shows it, and a counter's value depends on how xdist spreads the tests
    ascii_out = run_shell(store_dsn, visits_db, "-c", SQL + ";\n\\budget", charset="ascii",
                          analyst="snap_ascii").output
    assert ascii_out.isascii(), ascii_out
    assert "+-region-+" in ascii_out and "+/-" in ascii_out and "cost eps 0.5" in ascii_out
    assert re.search(r"eps 0\.5 of 3 spent \[#+\.+\]", ascii_out)
    check_snapshot("shell.ascii.txt", normalised(ascii_out))


def test_session_defaults_and_unknown_commands(store_dsn, keeper, visits_db):
    out = run_shell(store_dsn, visits_db, "-c", "\\set dp_epsilon 0.2\nSELECT count(*) FROM visits;\n\\set")
    assert out.exit_code == 0 and "cost ε 0.2 " in out.output and "dp_epsilon = 0.2\n" in out.output
    bad = run_shell(store_dsn, visits_db, "-c", "\\set dp_epsilon -1")
    assert bad.exit_code == 1 and "dp_epsilon must be a positive number" in bad.output
    refine = run_shell(store_dsn, visits_db, "-c", "\\refine")
    assert refine.exit_code == 1 and "no accuracy-first answer to refine" in refine.output
    unknown = run_shell(store_dsn, visits_db, "-c", "\\frobnicate")
    assert unknown.exit_code == 1 and "unknown command \\frobnicate (hint: \\help lists the commands)" in unknown.output


def test_completion_of_tables_columns_functions_and_commands():
    schema = {"visits": ["user_id", "region", "spend"], "people": ["person_id", "region", "income"]}
    completer = SqlCompleter(lambda: schema)

    def complete(text: str, cursor: int | None = None) -> list[str]:
        document = Document(text, cursor_position=len(text) if cursor is None else cursor)
        return [c.text for c in completer.get_completions(document, CompleteEvent())]

    assert complete("SELECT avg(sp") == ["spend"]
    assert complete("SELECT count(*) FROM vi") == ["visits"]
    assert complete("SELECT p.inc") == [] and complete("SELECT p.inc FROM people p", 12) == ["income"]
    assert "income" not in complete("SELECT sum(i FROM visits")  # only the columns of the tables used
    assert complete("SELECT toStartOfW") == ["toStartOfWeek"] and "lengthUTF8" in FUNCTIONS
    assert "sleep" not in {f.lower() for f in FUNCTIONS}  # only the allowlist
    assert complete("sel") == ["select"] and complete("SEL") == ["SELECT"]
    assert complete("SELECT count(*) FROM visits SETTINGS dp_e") == ["dp_epsilon"]
    assert complete("\\bu") == ["\\budget"] and complete("\\policy pe") == ["people"]


def test_statement_ends_only_at_a_semicolon_outside_quotes_and_comments():
    assert not statement_complete("SELECT count(*)\nFROM visits")
    assert statement_complete("SELECT count(*)\nFROM visits;  ")
    assert not statement_complete("SELECT count(*) FROM visits WHERE region = 'a;")
    assert not statement_complete("SELECT 1 -- done;")
    assert statement_complete("\\budget") and statement_complete("") and statement_complete("quit")


def test_cancel_before_the_charge_writes_nothing_and_after_it_is_too_late(connect):
    """The checkpoint before the ledger write (dpch.store.cancel): a cancelled token stops the query
    there; a committed one cannot be cancelled."""
    from tests.helpers import make_table

    session = connect(analyst="canceller")
    make_table(session, "uid UInt64, x Float64 COMMENT 'dp: bounds=[0, 1]'", [(i, 1.0) for i in range(50)],
               ["uid", "x"])
    token = CancelToken()
    assert token.cancel() is True
    with cancellable(token), pytest.raises(QueryCancelled, match="nothing was spent"):
        session.query("SELECT count(*) FROM t")
    assert session.budget().releases == 0

    late = CancelToken()
    errors: list[BaseException] = []

    def run() -> None:
        with cancellable(late):
            try:
                session.query("SELECT count(*) FROM t")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert not errors and late.committed and late.cancel() is False
    assert session.budget().releases == 1
    session.query("SELECT count(*) FROM t")  # without a token, no checkpoint applies
    assert session.budget().releases == 2


def test_refine_continues_the_last_accuracy_first_answer(store_dsn, keeper, visits_db, monkeypatch):
    """\\refine in the shell calls Session.refine: a less noisy answer on the same path."""
    monkeypatch.setenv("DPCH_FILTER", "zcdp_bm")  # a filter that charges the realized cost
    script = ("SELECT count(*) AS n FROM visits SETTINGS dp_accuracy = 400, dp_max_epsilon = 4;\n"
              "\\refine")
    out = run_shell(store_dsn, visits_db, "-c", script, analyst="refiner")
    assert out.exit_code == 0, out.output
    widths = [float(w.replace(",", "")) for w in re.findall(r"± ([\d,.]+) │", out.output)]
    assert len(widths) == 2 and widths[1] < widths[0], out.output

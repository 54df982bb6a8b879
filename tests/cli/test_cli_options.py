"""dpch query's command line: global options after the subcommand, -q/--query, '-' for standard
input, --multiquery (each statement a separate release; the first error stops the run and says
what was charged), and clickhouse-client's format names."""

from __future__ import annotations

import itertools
import json

import click
import pytest
from click.testing import CliRunner

from dpch.accounting import Accountant, Budget
from dpch.cli.global_options import hoist_global_options
from dpch.cli.main import cli
from dpch.cli.output import clickhouse_text
from dpch.store.engine import Engine
from tests.cli.test_output_formats import clickhouse_output

_names = itertools.count()
COUNT = "SELECT count(*) AS n FROM visits"


def fresh(store_dsn: str, db: str) -> str:
    """A new analyst with a budget, set as the data owner sets one."""
    who = f"cliopt{next(_names)}"
    engine = Engine(store_dsn, database=db)
    try:
        Accountant(engine, who).set_budget(Budget(3.0, 1e-6))
    finally:
        engine.close()
    return who


def hoisted(*args: str) -> list[str]:
    with click.Context(cli) as ctx:
        return hoist_global_options(cli, ctx, list(args))


# -- global options after the subcommand (pure: the argument rewrite) -----------------------------

def test_global_options_after_the_subcommand_move_in_front():
    assert hoisted("query", "--analyst", "ana", "SELECT 1") == ["--analyst", "ana", "query", "SELECT 1"]
    assert hoisted("query", "SELECT 1", "--dsn=chdb:///x", "--debug") == ["--dsn=chdb:///x", "--debug", "query",
                                                                          "SELECT 1"]
    # both places: the later one follows the earlier, so click keeps it
    assert hoisted("--analyst", "a", "query", "--analyst", "b", "S") == ["--analyst", "a", "--analyst", "b",
                                                                         "query", "S"]
    # a subcommand option's value is never taken for a global option
    assert hoisted("query", "-q", "--analyst", "S") == ["query", "-q", "--analyst", "S"]
    assert hoisted("query", "--", "--analyst", "x") == ["query", "--", "--analyst", "x"]


def test_a_subcommand_keeps_its_own_option_of_the_same_name():
    # `budget --analyst bob` is budget's own option (whose budget to show); --dsn is global
    assert hoisted("budget", "--analyst", "bob", "--dsn", "d") == ["--dsn", "d", "budget", "--analyst", "bob"]
    assert hoisted("budget", "set", "--analyst", "bob", "--epsilon", "1") == [
        "budget", "set", "--analyst", "bob", "--epsilon", "1"]


def test_unknown_commands_and_bare_invocations_are_left_to_click():
    assert hoisted("nosuch", "--analyst", "x") == ["nosuch", "--analyst", "x"]
    assert hoisted("--analyst", "x") == ["--analyst", "x"]
    assert hoisted() == []


# -- end to end on the fixture store --------------------------------------------------------------

def run(store_dsn: str, db: str, *args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", db, *args], input=input)


def ledger(keeper, db: str, analyst: str) -> int:
    return keeper.query_rows(f"SELECT count() FROM `{db}`.dpch_ledger WHERE analyst = {{a:String}}",
                             {"a": analyst})[0][0]


def test_analyst_after_the_subcommand_is_whose_budget_pays(store_dsn, keeper, visits_db):
    before, after = fresh(store_dsn, visits_db), fresh(store_dsn, visits_db)
    result = run(store_dsn, visits_db, "--analyst", before, "query", "--analyst", after, "--seed", "3", COUNT)
    assert result.exit_code == 0, result.output
    assert ledger(keeper, visits_db, after) == 1
    assert ledger(keeper, visits_db, before) == 0  # negative control: the earlier value lost


def test_q_option_and_stdin(store_dsn, keeper, visits_db):
    who = fresh(store_dsn, visits_db)
    by_q = run(store_dsn, visits_db, "query", "--analyst", who, "-q", COUNT, "--format", "JSONEachRow")
    assert by_q.exit_code == 0, by_q.output
    by_stdin = run(store_dsn, visits_db, "query", "--analyst", who, "-", "--format", "JSONEachRow", input=COUNT)
    assert by_stdin.exit_code == 0, by_stdin.output
    for result in (by_q, by_stdin):
        row = json.loads(result.stdout)
        assert set(row) == {"n", "n_lo", "n_hi"} and row["n_lo"] <= row["n"] <= row["n_hi"]
    assert ledger(keeper, visits_db, who) == 2


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (["SELECT 1", "-q", "SELECT 2"], None, "give the SQL once"),
    (["-"], "  \n", "no SQL given"),
    ([], "", "no SQL given"),
])
def test_missing_or_doubled_sql_is_refused_before_anything_runs(store_dsn, keeper, visits_db, args, stdin, message):
    who = fresh(store_dsn, visits_db)
    result = run(store_dsn, visits_db, "query", "--analyst", who, *args, input=stdin)
    assert result.exit_code == 1 and message in result.stderr, result.output
    assert ledger(keeper, visits_db, who) == 0


def test_multiquery_runs_each_statement_as_its_own_release(store_dsn, keeper, visits_db):
    who = fresh(store_dsn, visits_db)
    sql = (f"{COUNT};\n-- a comment\nSELECT avg(spend) AS a FROM visits WHERE region = 'north';"
           f" {COUNT} SETTINGS dp_epsilon = 0.25;")
    result = run(store_dsn, visits_db, "query", "--analyst", who, "--multiquery", "--format", "JSONEachRow", "-",
                 input=sql)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [sorted(r) for r in rows] == [["n", "n_hi", "n_lo"], ["a", "a_hi", "a_lo"], ["n", "n_hi", "n_lo"]]
    assert ledger(keeper, visits_db, who) == 3
    costs = [line for line in result.stderr.splitlines() if line.startswith("cost ")]
    assert [c.split("(")[0].strip() for c in costs] == ["cost ε 0.5", "cost ε 0.5", "cost ε 0.25"]
    # negative control: without --multiquery the same text is one statement, refused before any charge
    single = run(store_dsn, visits_db, "query", "--analyst", who, "-", input=sql)
    assert single.exit_code == 1 and ledger(keeper, visits_db, who) == 3


def test_multiquery_refused_statement_stops_the_run_before_any_charge(store_dsn, keeper, visits_db):
    who = fresh(store_dsn, visits_db)
    result = run(store_dsn, visits_db, "query", "--analyst", who, "-n", "-q",
                 f"{COUNT}; SELECT nosuch FROM visits; {COUNT}")
    assert result.exit_code == 1
    assert "statement 2 of 3 is refused" in result.stderr and "nothing was run or charged" in result.stderr
    assert ledger(keeper, visits_db, who) == 0 and result.stdout == ""


def test_multiquery_budget_running_out_says_what_was_charged(store_dsn, keeper, visits_db):
    who = fresh(store_dsn, visits_db)
    assert run(store_dsn, visits_db, "budget", "set", "--analyst", who, "--epsilon", "1").exit_code == 0
    result = run(store_dsn, visits_db, "query", "--analyst", who, "-n", "--format", "TSV", "-q",
                 f"{COUNT}; {COUNT}; {COUNT}; {COUNT}")
    assert result.exit_code == 1
    err = result.stderr
    assert "statement 3 of 4 failed" in err and "statements 1–2 released and charged" in err, err
    assert "nothing was charged for it" in err and "statement 4 not run" in err, err
    assert ledger(keeper, visits_db, who) == 2 and len(result.stdout.splitlines()) == 2


def test_clickhouse_formats_of_a_real_release_are_byte_identical(store_dsn, keeper, visits_db, connect):
    import dpch

    session = dpch.connect(store_dsn, database=visits_db, analyst=fresh(store_dsn, visits_db), seed=5)
    try:
        release = session.query("SELECT region, count(*) AS n, avg(spend) AS a FROM visits GROUP BY region")
    finally:
        session.close()
    columns, rows = release.interval_table()
    assert columns == ["region", "n", "n_lo", "n_hi", "a", "a_lo", "a_hi"]
    for fmt in ("PrettyCompact", "TSV", "TSVWithNames", "CSV", "CSVWithNames", "JSONEachRow"):
        assert clickhouse_text(release, fmt) == clickhouse_output(keeper, fmt, columns, rows), fmt


def test_clickhouse_format_output_has_only_data_on_stdout(store_dsn, keeper, visits_db):
    result = run(store_dsn, visits_db, "query", "--analyst", fresh(store_dsn, visits_db), "--format", "CSVWithNames",
                 "SELECT region, count(*) AS n FROM visits GROUP BY region ORDER BY region")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == '"region","n","n_lo","n_hi"' and len(lines) == 5
    assert result.stdout.endswith("\n") and not result.stdout.endswith("\n\n")
    assert "cost ε 0.5" in result.stderr and "cost" not in result.stdout


def test_the_shell_takes_clickhouse_formats_too(store_dsn, keeper, visits_db):
    who = fresh(store_dsn, visits_db)
    result = run(store_dsn, visits_db, "shell", "--analyst", who, "--seed", "4", "--format", "TSVWithNames", "-c",
                 f"{COUNT};")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "n\tn_lo\tn_hi" and len(result.stdout.splitlines()) == 2
    assert "cost ε 0.5" in result.stderr and ledger(keeper, visits_db, who) == 1


def test_a_single_query_error_is_reported_as_it_is(store_dsn, keeper, visits_db):
    who = fresh(store_dsn, visits_db)
    result = run(store_dsn, visits_db, "query", "--analyst", who, "SELECT nosuch FROM visits")
    assert result.exit_code == 1 and "no column 'nosuch'" in result.stderr, result.output
    assert "statement" not in result.stderr and ledger(keeper, visits_db, who) == 0

"""Progress of dpch load and dpch audit: the callback gets every count; a bar (rate, ETA) is drawn
only on a terminal; piped output stays clean."""

from __future__ import annotations

import io

from click.testing import CliRunner

from dpch.audit.experiment import audit_query
from dpch.cli.audit import counting_runner
from dpch.cli.load import load_file
from dpch.cli.main import cli
from dpch.cli.progress import Progress
from tests.helpers import make_table


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        self.calls.append((done, total))


def _csv(path, rows: int) -> str:
    path.write_text("uid,region,x\n" + "".join(f"{i % 97},{'ab'[i % 2]},{i % 10}\n" for i in range(rows)))
    return str(path)


def test_bar_on_a_terminal_shows_percent_position_rate_and_eta():
    out = Terminal()
    now = iter(range(100))  # a clock: one second per reading
    bar = Progress("loading t", "rows", stream=out, clock=lambda: float(next(now)))
    assert bar.visible
    for done in (0, 250, 500, 750):
        bar(done, 1000)
    text = out.getvalue()
    assert "loading t" in text and "75%" in text and "750/1000" in text, text
    # the clock reads 0 at the start and once per drawn line: 250 rows after 1 s, 750 after 3 s
    assert "250/1000   25%  250 rows/s  eta 0:00:03" in text, text
    assert "750/1000   75%  250 rows/s  eta 0:00:01" in text, text
    bar(1000, 1000)
    bar.close()
    assert "100%" in out.getvalue()


def test_nothing_is_written_when_the_stream_is_not_a_terminal():
    out = io.StringIO()
    bar = Progress("loading t", "rows", stream=out)
    for done in (0, 500, 1000):
        bar(done, 1000)
    bar.close()
    assert out.getvalue() == "" and not bar.visible
    assert (bar.done, bar.total) == (1000, 1000)  # the counts still arrive


def test_load_reports_rows_written_from_zero_to_the_file_total(connect, tmp_path):
    session = connect(analyst="loader")
    report = Recorder()
    rows = load_file(session.engine, _csv(tmp_path / "d.csv", 5000), table="loaded", privacy_unit="uid",
                     max_rows_per_unit=100, unique_units=False, bounds=("x=0:9",), public=(), replace=False,
                     progress=report)
    assert rows == 5000
    assert report.calls[0] == (0, 5000) and report.calls[-1] == (5000, 5000)
    assert all(total == 5000 for _, total in report.calls)
    done = [d for d, _ in report.calls]
    assert done == sorted(done), report.calls
    assert session.engine.query_rows(f"SELECT count(), sum(x) FROM {session.engine.table('loaded')}")[0] == (
        5000, sum(i % 10 for i in range(5000)))


def test_dpch_load_piped_writes_no_progress(store_dsn, database, keeper, tmp_path):
    keeper.command(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    result = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, "load", _csv(tmp_path / "d.csv", 300),
                                      "--table", "piped", "--privacy-unit", "uid", "--max-rows-per-unit", "10"])
    assert result.exit_code == 0, result.output
    assert result.stderr == "" and result.stdout.startswith(f"loaded 300 rows into {database}.piped\n")


def test_full_stack_audit_reports_each_release_on_both_sides(connect):
    session = connect(analyst="owner")
    make_table(session, "uid UInt32, x Float64 COMMENT 'dp: bounds=[0, 10]'", [(i, float(i % 10)) for i in range(40)],
               ["uid", "x"], comment="dp: privacy_unit=uid, max_rows_per_unit=1")
    report = Recorder()
    trials = 20
    result = audit_query(session, "SELECT count(*) FROM t", trials=trials, mode="full", seed=3,
                         runner_class=counting_runner(report, 2 * trials))
    assert result.samples.d.shape[0] == trials
    assert report.calls == [(0, 2 * trials)] + [(k, 2 * trials) for k in range(1, 2 * trials + 1)]


def test_dpch_audit_piped_writes_no_progress(store_dsn, visits_db):
    result = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", visits_db, "audit", "--query",
                                      "SELECT count(*) FROM visits", "--full-stack", "--trials", "20", "--seed", "2"])
    assert result.exit_code == 0, result.output
    assert result.stderr == "" and "verdict:" in result.stdout

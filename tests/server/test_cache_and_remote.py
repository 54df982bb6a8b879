"""The release cache, dpch:// remote sessions (in process and from two analyst processes at
once), and the CLI through a gateway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

import dpch
from dpch.cli.main import cli
from dpch.errors import BudgetExceeded, QueryRejected

Q = "SELECT region, count(*) AS n, avg(spend) AS a FROM visits GROUP BY region"


def _remote(srv, database, analyst="ana", password="ana-pw", **kw):
    return dpch.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst=analyst, password=password, **kw)


def test_cache_returns_identical_values_free_and_changed_query_is_charged(serve, database):
    srv = serve(cache_ttl=300)
    with _remote(srv, database) as session:
        first = session.query(Q)
        assert first.cost.epsilon == 0.5
        spent = session.budget().spent.epsilon
        # same query, different spacing/case/FORMAT-free text: same normalized SQL → cache
        again = session.query("select region, count(*) as n, avg(spend) as a\n from visits group by region")
        assert again.rows == first.rows and again.intervals == first.intervals
        assert again.release_id == first.release_id
        assert again.cost.epsilon == 0.0 and any("release cache" in n for n in again.notes)
        assert session.budget().spent.epsilon == spent
        # a different ε is a different release; so is a different query
        assert session.query(Q, epsilon=0.25).cost.epsilon == 0.25
        assert session.query(Q.replace("GROUP BY region", "WHERE age > 30 GROUP BY region")).cost.epsilon == 0.5
        assert session.budget().spent.epsilon == pytest.approx(spent + 0.75)
    with _remote(srv, database, analyst="bob", password="bob-pw") as bob:  # per analyst: bob pays his own
        assert bob.query(Q).cost.epsilon == 0.5


def test_cache_off_charges_every_time(serve, database):
    srv = serve(cache_ttl=0)
    with _remote(srv, database) as session:
        a, b = session.query(Q), session.query(Q)
        assert a.release_id != b.release_id
        assert session.budget().spent.epsilon == pytest.approx(1.0)


def test_remote_session_matches_in_process_api(serve, database):
    srv = serve()
    with _remote(srv, database, analyst="grafana", password="bi-pw") as session:
        release = session.query(Q, epsilon=0.3)
        assert release.columns == ["region", "n", "a"]
        assert [r[0] for r in release.rows] == ["north", "south", "east", "west"]
        lo, hi = release.intervals[0][1]
        assert lo < release.rows[0][1] < hi and release.intervals[0][0] is None
        assert release.cost.epsilon == pytest.approx(0.3) and release.mechanism == "laplace"
        assert release.budget.analyst == "bi" and release.budget.remaining.epsilon == pytest.approx(2.7)
        assert {m.name for m in release.measures} and release.measures[0].sensitivity > 0
        assert "emitted SQL" in session.explain(Q).describe()
        assert [t.table for t in session.tables()] == ["visits"]
        assert "privacy unit: user_id" in session.table_policy("visits").describe()
        with pytest.raises(QueryRejected, match="not aggregated"):
            session.query("SELECT spend FROM visits")
        with pytest.raises(BudgetExceeded, match="budget exhausted for analyst bi"):
            session.query(Q, epsilon=10)
        assert session.budget().spent.epsilon == pytest.approx(0.3)
    with pytest.raises(dpch.ConfigError, match="refused the credentials"):
        _remote(srv, database, password="nope")


_CLIENT = textwrap.dedent("""
    import json, sys, dpch
    url, analyst, password, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with dpch.connect(url, analyst=analyst, password=password) as s:
        out = []
        for i in range(n):
            r = s.query("SELECT count(*) AS n FROM visits WHERE age > %d" % (20 + i), epsilon=0.1)
            out.append({"cost": r.cost.epsilon, "left": r.budget.remaining.epsilon, "analyst": r.budget.analyst,
                        "interval": r.intervals[0][0]})
        print(json.dumps({"releases": out, "spent": s.budget().spent.epsilon}))
""")


def test_two_analyst_processes_share_one_gateway(serve, database):
    srv = serve(cache_ttl=0)
    url = f"dpch://127.0.0.1:{srv.port}/{database}"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    procs = {name: subprocess.Popen([sys.executable, "-c", _CLIENT, url, name, f"{name}-pw", str(n)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for name, n in (("ana", 6), ("bob", 4))}
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        results[name] = json.loads(out)
    for name, n in (("ana", 6), ("bob", 4)):
        releases = results[name]["releases"]
        assert all(r["analyst"] == name and r["cost"] == pytest.approx(0.1) for r in releases)
        assert all(r["interval"][0] < r["interval"][1] for r in releases)
        assert results[name]["spent"] == pytest.approx(0.1 * n)  # only their own releases
        assert releases[-1]["left"] == pytest.approx(3.0 - 0.1 * n)


def test_cli_through_gateway(serve, database):
    srv = serve()
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "DPCH_PASSWORD": "ana-pw"}
    base = [sys.executable, "-m", "dpch.cli.main", "--dsn", f"dpch://127.0.0.1:{srv.port}/{database}",
            "--analyst", "ana"]
    out = subprocess.run([*base, "query", "--format", "json", "SELECT count(*) FROM visits"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["cost"]["epsilon"] == 0.5
    out = subprocess.run([*base, "budget", "--json"], capture_output=True, text=True, env=env, timeout=60)
    data = json.loads(out.stdout)
    assert data["spent"]["epsilon"] == 0.5 and len(data["recent"]) == 1
    script = "\\tables\nSELECT count(*) FROM visits;\nSELECT spend FROM visits;"
    out = subprocess.run([*base, "shell", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert "visits  private (unit user_id)" in out.stdout, out.stderr
    assert "served from the release cache" in out.stdout  # the same count(*) as the query above
    assert out.returncode == 1 and "not aggregated" in out.stderr and "Traceback" not in out.stderr


def test_accuracy_first_and_refine_through_the_gateway(serve, database, monkeypatch):
    """Issue 4 for remote analysts: an accuracy-first answer carries its report over dpch://, and
    refine continues the same path on the gateway, charging only the increment."""
    monkeypatch.setenv("DPCH_FILTER", "zcdp_bm")  # a filter that charges the realized cost
    srv = serve(cache_ttl=0)
    s = _remote(srv, database)
    first = s.query("SELECT count(*) AS n FROM visits SETTINGS dp_accuracy = 400, dp_max_epsilon = 4")
    assert first.accuracy is not None and first.accuracy.met, first.notes
    assert "target ±400" in first.accuracy.describe()
    lo, hi = first.intervals[0][0]
    assert (hi - lo) / 2 <= 400
    refined = s.refine()
    lo2, hi2 = refined.intervals[0][0]
    assert (hi2 - lo2) / 2 < (hi - lo) / 2
    spent = s.budget().spent
    assert spent.rho == pytest.approx(first.cost.rho + refined.cost.rho)


def test_data_owner_commands_are_refused_through_a_gateway(serve, database, monkeypatch):
    """Through ``--dsn dpch://`` the analyst's commands work and the data owner's (another analyst's
    budget, unlock, budget set/list, load, audit) are refused by the DSN, before touching anything."""
    srv = serve()
    monkeypatch.setenv("DPCH_PASSWORD", "ana-pw")
    base = ["--dsn", f"dpch://127.0.0.1:{srv.port}/{database}", "--analyst", "ana"]
    runner = CliRunner()
    own = runner.invoke(cli, [*base, "budget"])
    assert own.exit_code == 0 and "analyst ana" in own.output, own.output
    for command in (["budget", "--analyst", "bob"], ["budget", "unlock", "--analyst", "bob"],
                    ["budget", "set", "--analyst", "bob", "--epsilon", "9"], ["budget", "list"],
                    ["audit", "--query", "SELECT count(*) FROM visits"]):
        result = runner.invoke(cli, [*base, *command])
        assert result.exit_code == 1, (command, result.output)
        assert "for the data owner, on the store itself, not through a gateway" in result.output, result.output
    with dpch.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="bob", password="bob-pw") as bob:
        assert bob.budget().budget.epsilon == 3.0  # budget set was refused: bob's budget is untouched

"""Issue 7, concurrency through the gateway: four client processes hammer ONE analyst's budget
with random requests through one `dpch serve`. The total charged never exceeds the budget, every
admitted release has exactly one charged ledger row, and refusals write nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from dpch.store.engine import Engine

CLIENT = textwrap.dedent("""
    import json, random, sys
    import dpch
    from dpch.errors import BudgetExceeded
    url, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    session = dpch.connect(url, analyst="ana", password="ana-pw")
    admitted, refused = [], 0
    for _ in range(12):
        eps = rng.choice([0.05, 0.1, 0.2, 0.3])
        sql = rng.choice(["SELECT count(*) FROM visits", "SELECT sum(spend) FROM visits",
                          "SELECT region, avg(age) FROM visits GROUP BY region"])
        try:
            release = session.query(sql + f" SETTINGS dp_epsilon = {eps}")
            admitted.append({"id": release.release_id, "eps": release.cost.epsilon})
        except BudgetExceeded:
            refused += 1
    print(json.dumps({"admitted": admitted, "refused": refused}))
""")


def test_four_processes_never_overspend_one_budget(serve, database, store_dsn):
    srv = serve(cache_ttl=0)  # every request is a new release
    url = f"dpch://127.0.0.1:{srv.port}/{database}"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, url, str(seed)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env) for seed in range(4)]
    admitted, refused = [], 0
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()
        result = json.loads(out)
        admitted += result["admitted"]
        refused += result["refused"]
    total = sum(a["eps"] for a in admitted)
    assert total <= 3.0 + 1e-9, f"charged ε {total} over a budget of 3"  # the default budget
    assert refused > 0, "48 requests averaging ε 0.16 must exhaust ε 3: the test would not test anything"
    engine = Engine(store_dsn, database=database)
    try:
        rows = engine.query_rows(
            f"SELECT toString(release_id), countIf(status = 'charged'), count(), sum(epsilon) "
            f"FROM {engine.table('dpch_ledger')} WHERE analyst = 'ana' GROUP BY release_id")
    finally:
        engine.close()
    by_id = {r[0]: r for r in rows}
    assert set(by_id) == {a["id"] for a in admitted}, "a ledger row for each admitted release, none else"
    assert all(r[1] == 1 and r[2] == 1 for r in rows), "exactly one (charged) row per fixed-cost release"
    assert abs(sum(r[3] for r in rows) - total) < 1e-9

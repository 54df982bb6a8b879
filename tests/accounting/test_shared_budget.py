"""One budget, however many processes (docs/design.md rule 11; issue 26).

N dpch processes, each with M threads, spend one analyst's budget at once through a ClickHouse
server (the test HTTP endpoint over one chdb store, with ClickHouse's test Keeper): fixed-cost
charges and reservations (settled or voided) with random costs (fixed seeds), under every filter.
Then, from the ledger:

- the releases admitted, replayed through the filter's history-based reference in admission order,
  were each admissible when admitted, so what was spent is within the budget;
- the shared state read back equals the ledger (spent, releases), and no reservation is left open;
- no version of the shared state has two writers: the writes the processes won add up to exactly the
  versions the analyst's state went through.

Negative control: the same workload with each process keeping its own state (the in-process owner,
what every process on a server did before) spends far more than the budget — the test sees the bug.
The processes start together: each loads its state, says READY, and waits for GO (no sleeps).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace

import pytest

from dpch.accounting.accountant import Accountant
from dpch.accounting.admission import ADMISSION_TABLE, analyst_key
from dpch.accounting.budget import Budget, BudgetStore
from dpch.accounting.filters import make_filter
from dpch.accounting.ledger import Ledger
from dpch.store.engine import Engine
from dpch.store.keeper import VersionedMap
from tests.multiproc import Child, start_all

#: filter → (its options, the kind of random cost it is asked for)
FILTERS = {
    "basic": ({}, "approx"), "pure": ({}, "pure"), "advanced": ({}, "pure"), "zcdp": ({}, "approx"),
    "zcdp_bm": ({}, "approx"), "ex_post": ({}, "ex_post"), "pure_ex_post": ({}, "pure"), "mixed": ({}, "ex_post"),
}
BUDGET = Budget(1.0, 1e-5)

CHILD = textwrap.dedent("""
    import json, random, sys, threading
    from dpch.accounting.accountant import Accountant
    from dpch.accounting.admission import InProcessAdmission
    from dpch.errors import BudgetExceeded
    from dpch.privacy.cost import PrivacyCost
    from dpch.store.engine import Engine

    spec = json.loads(sys.argv[1])
    engine = Engine(spec["dsn"])
    own = InProcessAdmission() if spec["mode"] == "process" else None
    acc = Accountant(engine, "ana", filter=spec["filter"], filter_options=spec["options"], admission=own)
    acc.status()  # the analyst's state is loaded before anyone spends
    print("READY", flush=True)
    assert sys.stdin.readline().strip() == "GO"

    def cost(rng):
        eps = rng.uniform(0.02, 0.12)
        kind = spec["kind"]
        if kind == "pure":
            return PrivacyCost(eps)
        if kind == "ex_post" and rng.random() < 0.5:
            return PrivacyCost(eps, 0.0, ex_post=True, worst_epsilon=eps * 1.5)
        return PrivacyCost(eps, rng.choice([0.0, 1e-7]))

    outcomes = {"admitted": 0, "refused": 0}
    lock = threading.Lock()

    def worker(k):
        rng = random.Random(spec["seed"] * 100 + k)
        for i in range(spec["requests"]):
            c = cost(rng)
            try:
                if c.ex_post or rng.random() < 0.25:
                    with acc.reserve(c, datasets=("db.t",), query_hash=f"{k}.{i}", mechanism="m") as r:
                        if rng.random() < 0.3:
                            r.void()
                        elif c.ex_post:
                            r.settle(PrivacyCost(c.epsilon * rng.uniform(0.3, 1.0), 0.0, ex_post=True))
                        else:
                            r.settle(c)
                else:
                    acc.charge(c, datasets=("db.t",), query_hash=f"{k}.{i}", mechanism="m")
                with lock:
                    outcomes["admitted"] += 1
            except BudgetExceeded:
                with lock:
                    outcomes["refused"] += 1

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(spec["threads"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = {} if own is not None else {"committed": acc.admission.committed, "retries": acc.admission.retries,
                                         "batches": acc.admission.batches, "changes": acc.admission.changes}
    print("RESULT" + json.dumps({**outcomes, **stats}), flush=True)
""")


def run_processes(dsn: str, filter_name: str, *, mode: str, processes: int = 3, threads: int = 3,
                  requests: int = 6) -> list[dict]:
    options, kind = FILTERS[filter_name]
    children = [Child(CHILD, json.dumps({"dsn": dsn, "filter": filter_name, "options": options, "kind": kind,
                                         "mode": mode, "seed": p, "threads": threads, "requests": requests}))
                for p in range(processes)]
    try:
        start_all(children)
        return [child.result() for child in children]
    finally:
        for child in children:
            child.kill()


def replay(engine: Engine, filter_name: str) -> tuple[list, bool]:
    """The ledger's releases in admission order, and whether each was admissible when it was admitted
    (the filter's history-based reference; a reservation at its worst case, as admission saw it)."""
    entries = Ledger(engine).entries("ana")
    flt = make_filter(filter_name, BUDGET, FILTERS[filter_name][0])
    # what each release asked for: its worst case, as a request of its kind (a reservation's counted form)
    admitted = [replace(e, status="reserved").counted for e in entries]
    history = [e.counted for e in entries]
    ok = all(flt.decide(history[:i], admitted[i]).admitted for i in range(len(entries)))
    return entries, ok


@pytest.mark.parametrize("filter_name", sorted(FILTERS))
def test_processes_sharing_keeper_never_overspend(ch_server, server_db, filter_name):
    dsn = ch_server.dsn(server_db)
    with Engine(dsn) as engine:
        Accountant(engine, "ana").set_budget(BUDGET, filter=filter_name, filter_options=FILTERS[filter_name][0])
    results = run_processes(dsn, filter_name, mode="keeper")
    with Engine(dsn) as engine:
        entries, ok = replay(engine, filter_name)
        assert ok, f"a release was admitted past the {filter_name} filter: {[e.counted for e in entries]}"
        assert sum(r["admitted"] for r in results) == len(entries)
        assert sum(r["refused"] for r in results) > 0, "the workload must reach the budget"
        assert not [e for e in entries if e.status == "reserved"], "every reservation was settled or voided"
        flt = make_filter(filter_name, BUDGET, FILTERS[filter_name][0])
        status = Accountant(engine, "ana").status()
        history = [e.counted for e in entries]
        assert status.spent.epsilon == flt.spent(history).epsilon
        assert status.releases == len([e for e in entries if e.status != "voided"])
        # no version has two writers: every version after the first was won by exactly one write
        version = VersionedMap(engine, ADMISSION_TABLE, create=False).read(analyst_key("ana")).version
        assert sum(r["committed"] for r in results) + 1 == version  # + the set_budget write above


def test_negative_control_processes_with_their_own_state_overspend(ch_server, server_db):
    """What every process on a server did before: each keeps its own state, so N of them give the
    analyst about N budgets. The same check as above must fail here."""
    dsn = ch_server.dsn(server_db)
    with Engine(dsn) as engine:
        BudgetStore(engine).set("ana", BUDGET, filter="basic")
    run_processes(dsn, "basic", mode="process")
    with Engine(dsn) as engine:
        entries, ok = replay(engine, "basic")
        spent = sum(e.counted.epsilon for e in entries)
    assert not ok and spent > 1.5 * BUDGET.epsilon, f"processes with their own state spent ε {spent:.3f}"

"""``dpch demo``: an annotated demo table and a few private queries, in seconds."""

from __future__ import annotations

from collections.abc import Callable

from dpch.cli.output import render_budget, render_table
from dpch.errors import BudgetExceeded

DEMO_ANALYST = "demo"
#: the demo analyst's budget (ε, δ)
DEMO_EPSILON, DEMO_DELTA = 5.0, 1e-6
DEMO_QUERIES = [
    ("How many visits were there?", "SELECT count(*) AS visits FROM visits"),
    ("Total spend of visitors over 40", "SELECT sum(spend) AS spend FROM visits WHERE age > 40"),
    ("Average visit length by region",
     "SELECT region, avg(duration_min) AS avg_minutes, count(*) AS visits FROM visits "
     "GROUP BY region ORDER BY region"),
    ("Visits by device, Gaussian noise",
     "SELECT device, count(*) AS visits FROM visits GROUP BY device "
     "SETTINGS dp_epsilon = 0.5, dp_delta = 1e-7"),
]


def run_demo(dsn: str | None, *, database: str | None, reset: bool, echo: Callable[[str], None]) -> None:
    # start-up: the session stack (NumPy, SciPy, sqlglot, the ClickHouse client) loads only when used
    from dpch.accounting.budget import Budget, BudgetStore
    from dpch.connection import connect_local
    from dpch.fixtures import tables

    demo_budget = Budget(epsilon=DEMO_EPSILON, delta=DEMO_DELTA)
    with connect_local(dsn, analyst=DEMO_ANALYST, database=database, default_budget=demo_budget) as session:
        engine = session.engine
        echo(f"dpch demo — {engine.describe()}, database {engine.database}")
        tables.load_all(engine, replace=reset)
        session.policy.reload()
        rows = engine.query_rows(f"SELECT count() FROM {engine.table('visits')}")[0][0]
        echo(f"table visits: {rows} rows (synthetic website visits, several per person); also people "
             "(a census, one row per person) and regions (a public dimension table)\n")
        echo(session.table_policy("visits").describe())
        # what the cap drops, from the owner's side (exact: the demo runs as the data owner on the store)
        from dpch.policy.suggest import suggest

        report = suggest(engine, session.policy, "visits")
        drops = dict(report.caps)[report.cap or 0]
        echo(f"  the cap of {report.cap} rows per person drops {100 * drops:.0f}% of the rows (the owner's "
             "view, exact: `dpch policy suggest visits` shows every candidate; an analyst never sees it)")
        if BudgetStore(engine).get(DEMO_ANALYST) is None:
            session.accountant.set_budget(demo_budget)  # persisted, so later CLI calls see the same budget
        elif reset:
            # the ledger is append-only: a fresh start is the owner granting ε 5 more than was spent
            spent = session.budget().spent
            session.accountant.set_budget(Budget(spent.epsilon + DEMO_EPSILON,
                                                 min(0.5, spent.delta + DEMO_DELTA)))
            echo("demo budget renewed: ε 5 more than the demo analyst has spent")
        echo("")
        echo(render_budget(session.budget()))
        for title, sql in DEMO_QUERIES:
            echo(f"\n-- {title}\n{sql}")
            try:
                echo(render_table(session.query(sql)))
            except BudgetExceeded as exc:
                echo(f"refused: {exc}")
                echo("(run `dpch demo --reset` to start over with a fresh demo budget)")
                return
        echo("")
        echo(render_budget(session.budget()))
        echo("\nNext: dpch --analyst demo shell    or    dpch --analyst demo explain \"SELECT ...\"")
        echo("Embedded mode is the data owner's workstation: whoever holds the store's files can "
             "read the raw data. Analysts should reach it through `dpch serve` only.")

"""``BudgetStore.get``: an analyst's analyst-wide budget, the latest row winning, None without one
(``dpch demo`` sets its budget only when this says none is set). Values read back from chdb."""

from __future__ import annotations

from dpch.accounting.budget import Budget, BudgetStore


def test_get_reads_the_latest_analyst_wide_budget(connect):
    engine = connect(analyst="getter").engine
    store = BudgetStore(engine)
    assert store.get("nobody") is None
    store.set("ana", Budget(0.5, 1e-7), dataset=f"{engine.database}.visits")
    assert store.get("ana") is None  # a dataset's budget alone is not the analyst's
    store.set("ana", Budget(2.5, 3e-7))
    assert store.get("ana") == Budget(2.5, 3e-7)
    store.set("ana", Budget(1.25, 0.0))
    assert store.get("ana") == Budget(1.25, 0.0)  # the latest row wins
    assert store.get("bob") is None  # another analyst's rows are not read

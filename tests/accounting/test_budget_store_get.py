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


def test_settings_latest_and_all_settings_read_back_each_scope(connect):
    """What the owner wrote is what every reader gets back, field by field: per scope (analyst-wide and
    a dataset), its filter and options (a row naming none keeps the latest named), its renewal with and
    without a lifetime cap; ``latest`` is the newest row's time ("" before any), ``all_settings`` the
    analyst-wide setting of every analyst."""
    from datetime import UTC, datetime

    from dpch.accounting.budget import BudgetSetting, Renewal

    engine = connect(analyst="settings").engine
    store = BudgetStore(engine)
    dataset = f"{engine.database}.visits"
    assert store.latest("ana") == "" and store.settings("ana") == {} and store.all_settings() == {}
    before = datetime.now(UTC)
    store.set("ana", Budget(2.0, 1e-6), filter="zcdp", options={"delta_conversion": 1e-7})
    store.set("ana", Budget(0.5, 1e-8), dataset=dataset, renewal=Renewal("daily"))
    store.set("ana", Budget(3.0, 2e-6), renewal=Renewal("weekly", Budget(30.0, 1e-5)))  # names no filter
    store.set("bob", Budget(1.0, 0.0))
    settings = store.settings("ana")
    assert settings == {
        "": BudgetSetting(Budget(3.0, 2e-6), "", "zcdp", {"delta_conversion": 1e-7},
                          Renewal("weekly", Budget(30.0, 1e-5))),
        dataset: BudgetSetting(Budget(0.5, 1e-8), dataset, "", None, Renewal("daily")),
    }
    assert settings[dataset].renewal.lifetime is None  # renewing, no cap: no lifetime budget appears
    assert before <= datetime.fromisoformat(store.latest("ana")) <= datetime.now(UTC)
    assert store.latest("carol") == ""
    every = store.all_settings()
    assert set(every) == {"ana", "bob"}
    assert every["ana"].budget == Budget(3.0, 2e-6) and every["ana"].renewal == Renewal("weekly", Budget(30.0, 1e-5))
    assert every["bob"] == BudgetSetting(Budget(1.0, 0.0)) and store.all() == {"ana": Budget(3.0, 2e-6),
                                                                                "bob": Budget(1.0, 0.0)}

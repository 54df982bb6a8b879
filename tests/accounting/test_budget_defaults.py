"""The default budget's numbers, where each front states them (no engine).

``Budget()`` is what code gets when it asks for a budget without amounts (docs/filters-and-ledger.md:
``default_budget=Budget(3, 1e-6)``); a server config's user with ``epsilon`` and no ``delta`` gets the
same δ, and so does ``dpch budget set`` without ``--delta`` (its option default is a literal, because
the CLI does not import the accounting package at start-up: this test keeps the two equal).
"""

from __future__ import annotations

import re
from pathlib import Path

from dpch.accounting.budget import DEFAULT_DELTA, DEFAULT_EPSILON, Budget
from dpch.server.config import ServerConfig

DOCS = Path(__file__).resolve().parents[2] / "docs" / "filters-and-ledger.md"


def test_the_default_budget_is_the_documented_one():
    assert (Budget().epsilon, Budget().delta) == (DEFAULT_EPSILON, DEFAULT_DELTA) == (3.0, 1e-6)
    epsilon, delta = re.search(r"default_budget=Budget\(([\d.e-]+), ([\d.e-]+)\)", DOCS.read_text()).groups()
    assert Budget() == Budget(float(epsilon), float(delta))


def test_a_server_user_without_delta_gets_the_default_delta():
    config = ServerConfig.from_mapping({"users": {"ana": {"password": "x", "epsilon": 2}}})
    assert config.users["ana"].budget == Budget(2.0, DEFAULT_DELTA)
    given = ServerConfig.from_mapping({"users": {"ana": {"password": "x", "epsilon": 2, "delta": 1e-9}}})
    assert given.users["ana"].budget == Budget(2.0, 1e-9)  # negative control: a δ given is kept


def test_budget_set_without_delta_uses_the_default_delta():
    from dpch.cli.main import budget_set

    option = next(p for p in budget_set.params if p.name == "delta")
    assert option.default == DEFAULT_DELTA

"""A gateway user's budget may renew (``renew``, ``lifetime_epsilon`` in ``[users.NAME]``), set at
startup as ``dpch budget set --renew`` sets it; a remote status keeps the renewal and the cap."""

from __future__ import annotations

import pytest

from dpch.accounting import Accountant, Budget
from dpch.errors import ConfigError
from dpch.server import ServerConfig
from dpch.server.wire import budget_from_wire
from dpch.store.engine import Engine


def config(**user: object) -> ServerConfig:
    return ServerConfig.from_mapping({"server": {"dsn": "chdb://x"},
                                      "users": {"ana": {"password": "pw", "epsilon": 1.0, **user}}})


def test_renewal_and_lifetime_cap_are_read():
    user = config(renew="weekly", lifetime_epsilon=8.0).users["ana"]
    assert user.renewal.schedule == "weekly"
    assert user.renewal.lifetime == Budget(8.0, user.budget.delta)
    assert config().users["ana"].renewal.schedule == ""  # negative control: no key, no renewal


@pytest.mark.parametrize("user, words", [
    ({"renew": "hourly"}, "unknown budget renewal"),
    ({"lifetime_epsilon": 5.0}, "needs a renewing budget"),
    ({"renew": "daily", "lifetime_delta": 1e-5}, "lifetime_delta needs lifetime_epsilon"),
])
def test_bad_renewal_settings_are_refused_with_the_user_named(user, words):
    with pytest.raises(ConfigError, match=words) as info:
        config(**user)
    assert "[users.ana]" in str(info.value)


def test_renewal_needs_epsilon():
    with pytest.raises(ConfigError, match="need"):
        ServerConfig.from_mapping({"server": {"dsn": "chdb://x"}, "users": {"ana": {"password": "pw",
                                                                                     "renew": "daily"}}})


def test_the_gateway_sets_the_renewing_budget_and_a_remote_status_keeps_it(serve, store_dsn, small_visits):
    users = {"ana": {"password": "pw", "epsilon": 1.0, "renew": "daily", "lifetime_epsilon": 5.0}}
    serve(users=users)
    engine = Engine(store_dsn, database=small_visits)
    try:
        status = Accountant(engine, "ana").status()
    finally:
        engine.close()
    assert status.renewal == "daily" and status.lifetime is not None
    assert status.lifetime.budget.epsilon == 5.0
    remote = budget_from_wire(status.as_dict())
    assert (remote.renewal, remote.period, remote.renews_at, remote.horizon) == \
        (status.renewal, status.period, status.renews_at, status.horizon)
    assert remote.lifetime is not None and remote.lifetime.budget == status.lifetime.budget

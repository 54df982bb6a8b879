"""Issue 15 part 4 (gateway): the release cache for dashboards — keyed on the normalised query and
its dp settings, fresh for each gateway user's own TTL (a clock injected, no sleeping) — and the
budget warning (``X-Dpch-Budget-Warning`` and ``dpch.budget``'s ``warning``) exactly when the
remaining ε is below the user's share of the budget."""

from __future__ import annotations

import json

import pytest

from dpch.errors import ConfigError
from dpch.server import ServerConfig
from tests.server.http_post import post as http_post

Q = "SELECT region, count(*) AS n, avg(spend) AS a FROM visits GROUP BY region"
SAME = "select region,   count(*)   as n, avg(spend) as a\n\tfrom visits\n group   by region"


def post(srv, sql: str, *, user: str = "ana", password: str = "pw", params: dict | None = None):
    response, data = http_post(srv, sql, user=user, password=password, params=params)
    assert response.status == 200, data
    return response, data


def cache_state(response) -> tuple[str, float]:
    return response.getheader("X-Dpch-Cache"), json.loads(response.getheader("X-Dpch-Cost"))["epsilon"]


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the cache key --------------------------------------------------------------------------------


def test_whitespace_and_keyword_case_hit_and_dp_settings_miss(serve):
    srv = serve(cache_ttl=300, users={"ana": {"password": "pw", "epsilon": 3.0}})
    first, _ = post(srv, Q)
    assert cache_state(first) == ("miss", 0.5)
    again, _ = post(srv, SAME)
    assert cache_state(again) == ("hit", 0.0)
    assert again.getheader("X-Dpch-Release-Id") == first.getheader("X-Dpch-Release-Id")
    # the same settings written in SETTINGS or as a URL parameter are the same release
    assert cache_state(post(srv, Q + " SETTINGS dp_epsilon = 0.5")[0]) == ("hit", 0.0)
    # presentation only: dp_intervals shares the release
    assert cache_state(post(srv, Q, params={"dp_intervals": "columns"})[0]) == ("hit", 0.0)
    # different dp settings are different releases
    assert cache_state(post(srv, Q + " SETTINGS dp_epsilon = 0.25")[0]) == ("miss", 0.25)
    assert cache_state(post(srv, Q, params={"dp_epsilon": "0.25"})[0]) == ("hit", 0.0)
    assert cache_state(post(srv, SAME + " SETTINGS dp_confidence = 0.9")[0]) == ("miss", 0.5)
    assert cache_state(post(srv, Q + " SETTINGS dp_delta = 1e-6")[0])[0] == "miss"
    # and a different query is a different release
    assert cache_state(post(srv, Q.replace("GROUP BY", "WHERE age > 30 GROUP BY"))[0]) == ("miss", 0.5)


def test_ttl_per_user_with_an_injected_clock(serve):
    users = {
        "fast": {"password": "pw", "analyst": "dash", "cache_ttl": 10, "epsilon": 3.0},  # dash's budget
        "slow": {"password": "pw", "analyst": "dash"},  # the server's cache_ttl: 100
        "off": {"password": "pw", "analyst": "dash", "cache_ttl": 0},
    }
    srv = serve(cache_ttl=100, users=users)
    clock = srv.gateway.cache.clock = Clock()
    first, _ = post(srv, Q, user="fast")
    assert cache_state(first) == ("miss", 0.5)
    clock.now += 10
    assert cache_state(post(srv, Q, user="fast")[0]) == ("hit", 0.0)  # age 10 ≤ ttl 10
    clock.now += 1
    assert cache_state(post(srv, SAME, user="slow")[0]) == ("hit", 0.0)  # age 11 ≤ 100: slow still reads it
    fresh, _ = post(srv, Q, user="fast")  # age 11 > 10: fast gets (and pays for) a fresh release
    assert cache_state(fresh) == ("miss", 0.5)
    assert fresh.getheader("X-Dpch-Release-Id") != first.getheader("X-Dpch-Release-Id")
    clock.now += 100
    assert cache_state(post(srv, Q, user="slow")[0]) == ("hit", 0.0)  # the new release: age 100 ≤ 100
    clock.now += 1
    assert cache_state(post(srv, Q, user="slow")[0]) == ("miss", 0.5)
    # a user with cache_ttl = 0 is never served from (nor fills) the cache
    assert cache_state(post(srv, Q, user="off")[0]) == ("off", 0.5)
    assert cache_state(post(srv, Q, user="off")[0]) == ("off", 0.5)


def test_user_cache_ttl_config():
    config = ServerConfig.from_mapping({"server": {"cache_ttl": 60},
                                        "users": {"a": {"password": "p", "cache_ttl": 5}, "b": {"password": "p"}}})
    assert config.cache_ttl_for(config.users["a"]) == 5 and config.cache_ttl_for(config.users["b"]) == 60
    with pytest.raises(ConfigError, match="cache_ttl must not be negative"):
        ServerConfig.from_mapping({"users": {"a": {"password": "p", "cache_ttl": -1}}})


# -- the budget warning ---------------------------------------------------------------------------


def warning_of(srv, user: str) -> tuple[str | None, str]:
    """The header on a (free) dpch.budget read, and its warning column."""
    response, data = post(srv, "SELECT warning FROM dpch.budget FORMAT JSONEachRow", user=user)
    return response.getheader("X-Dpch-Budget-Warning"), json.loads(data)["warning"]


def test_warning_exactly_below_the_share(serve):
    # ε values that are exact in binary, so remaining/total hits the share exactly
    users = {
        "w": {"password": "pw", "analyst": "dash", "epsilon": 1.0, "budget_warning_share": 0.25},
        "v": {"password": "pw", "analyst": "dash"},  # the server's share: 0.1 (the default)
    }
    srv = serve(cache_ttl=0, users=users)
    response, _ = post(srv, Q + " SETTINGS dp_epsilon = 0.5", user="w")
    assert response.getheader("X-Dpch-Budget-Warning") is None  # remaining 0.5 of 1
    response, _ = post(srv, Q + " SETTINGS dp_epsilon = 0.25", user="w")
    # remaining 0.25 / 1 = 0.25: not below the share 0.25 (negative control at the boundary)
    assert json.loads(response.getheader("X-Dpch-Budget-Remaining"))["epsilon"] == 0.25
    assert response.getheader("X-Dpch-Budget-Warning") is None
    assert warning_of(srv, "w") == (None, "")
    response, _ = post(srv, Q + " SETTINGS dp_epsilon = 0.125", user="w")
    # remaining 0.125 < 0.25: warned, in the header and in dpch.budget
    header = response.getheader("X-Dpch-Budget-Warning")
    assert header and "0.125 of 1" in header and "25%" in header, header
    assert warning_of(srv, "w") == (header, header)
    # the same analyst through a user with the server's share 0.1: 0.125 is not below it
    assert warning_of(srv, "v") == (None, "")
    response, _ = post(srv, Q + " SETTINGS dp_epsilon = 0.0625", user="v")
    header = response.getheader("X-Dpch-Budget-Warning")
    assert header and "0.0625 of 1" in header and "10%" in header, header
    assert warning_of(srv, "v") == (header, header)
    response, _ = post(srv, f"EXPLAIN DP {Q}", user="v")  # free, and still warned
    assert response.getheader("X-Dpch-Budget-Warning") == header


def test_warning_on_cache_hits_and_off_when_share_is_zero(serve):
    users = {
        "w": {"password": "pw", "analyst": "dash", "epsilon": 1.0},
        "quiet": {"password": "pw", "analyst": "dash", "budget_warning_share": 0},
    }
    srv = serve(cache_ttl=300, users=users, budget_warning_share=0.6)
    response, _ = post(srv, Q, user="w")  # ε 0.5: remaining 0.5 < 0.6
    assert cache_state(response) == ("miss", 0.5) and response.getheader("X-Dpch-Budget-Warning")
    response, _ = post(srv, Q, user="w")
    assert cache_state(response) == ("hit", 0.0) and response.getheader("X-Dpch-Budget-Warning")
    response, _ = post(srv, Q, user="quiet")
    assert cache_state(response) == ("hit", 0.0) and response.getheader("X-Dpch-Budget-Warning") is None


def test_warning_share_config():
    config = ServerConfig.from_mapping({"server": {"budget_warning_share": 0.2},
                                        "users": {"a": {"password": "p", "budget_warning_share": 0.5},
                                                  "b": {"password": "p"}}})
    assert config.warning_share_for(config.users["a"]) == 0.5 and config.warning_share_for(config.users["b"]) == 0.2
    assert ServerConfig.from_mapping({"users": {}}).budget_warning_share == 0.1
    for bad in (1.5, -0.1, "lots"):
        with pytest.raises(ConfigError, match="budget_warning_share"):
            ServerConfig.from_mapping({"server": {"budget_warning_share": bad}})
        with pytest.raises(ConfigError, match="budget_warning_share"):
            ServerConfig.from_mapping({"users": {"a": {"password": "p", "budget_warning_share": bad}}})

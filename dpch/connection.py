"""``dpch.connect``: a local :class:`~dpch.session.Session` on a store, or a remote session on a
``dpch serve`` gateway — both implement :class:`dpch.api.PrivateSession`."""

from __future__ import annotations

from typing import Any

from dpch.accounting.budget import Budget
from dpch.mechanisms.sampling import NoiseSource
from dpch.policy.resolve import Policy
from dpch.session import Session
from dpch.sql.settings import QueryOptions, given_options
from dpch.store.engine import Engine, default_dsn


def connect(
    dsn: str | None = None,
    *,
    analyst: str = "default",
    policy: Policy | str | None = None,
    database: str | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    confidence: float | None = None,
    default_budget: Budget | None = None,
    seed: int | None = None,
    password: str | None = None,
    filter: str | None = None,
    filter_options: dict[str, Any] | None = None,
) -> Session:
    """Opens a private session.

    ``dsn``: ``chdb:///path`` (embedded; default ``$DPCH_DSN`` or ``./dpch-data``) or
    ``http://user:pass@host:8123/db``. ``policy``: a :class:`Policy` or a path to a policy TOML
    that overrides the tables' ``dp:`` annotations. ``epsilon``/``delta``/``confidence`` set
    this session's per-query defaults. ``seed`` fixes the noise for tests only (refused unless
    ``DPCH_ALLOW_FIXED_SEED=1``).

    ``dpch://host:port[/db]`` opens a remote session on a ``dpch serve`` gateway instead
    (``analyst`` and ``password`` are the gateway user's; see :mod:`dpch.server.client`).
    ``DPCH_ALLOW_FIXED_SEED=1``). ``filter``/``filter_options`` choose the privacy filter
    (see :mod:`dpch.accounting.filters`; default ``$DPCH_FILTER`` or ``basic``; a filter the data
    owner set with ``dpch budget set --filter`` wins).
    """
    if isinstance(policy, str):
        policy = Policy.from_toml(policy)
    overrides = given_options(epsilon=epsilon, delta=delta, confidence=confidence)
    defaults = QueryOptions().with_overrides(overrides)
    if (dsn or default_dsn()).startswith(("dpch://", "dpchs://")):
        from dpch.server.client import connect_remote

        return connect_remote(dsn or default_dsn(), analyst=analyst, password=password,  # type: ignore[return-value]
                              database=database, options=overrides)
    if seed is not None:
        NoiseSource(seed)  # raises before the store is opened if seeds are not allowed
    engine = Engine(dsn, database=database)
    try:
        return Session(
            engine, analyst=analyst, policy=policy, defaults=defaults,
            default_budget=default_budget, seed=seed, filter=filter, filter_options=filter_options,
        )
    except Exception:
        engine.close()
        raise

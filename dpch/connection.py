"""``dpch.connect``: a local :class:`~dpch.session.Session` on a store, or a remote session on a
``dpch serve`` gateway — both implement :class:`dpch.api.PrivateSession`. Which one is decided by
the DSN's scheme (:func:`is_gateway_dsn`), here and nowhere else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpch.accounting.budget import Budget
from dpch.api import PrivateSession
from dpch.errors import ConfigError
from dpch.mechanisms.sampling import NoiseSource
from dpch.policy.resolve import Policy
from dpch.session import Session
from dpch.sql.settings import QueryOptions, given_options
from dpch.store.engine import Engine, default_dsn

if TYPE_CHECKING:  # imported when a gateway DSN is opened (start-up speed)
    from dpch.server.client import RemoteSession

GATEWAY_SCHEMES = ("dpch://", "dpchs://")


def is_gateway_dsn(dsn: str | None) -> bool:
    """Whether ``dsn`` (default ``$DPCH_DSN``) names a ``dpch serve`` gateway rather than a store."""
    return (dsn or default_dsn()).startswith(GATEWAY_SCHEMES)


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
    ledger_fsync: bool | None = None,
) -> PrivateSession:
    """Opens a private session.

    ``dsn``: ``chdb:///path`` (embedded; default ``$DPCH_DSN`` or ``./dpch-data``) or
    ``http://user:pass@host:8123/db``. ``policy``: a :class:`Policy` or a path to a policy TOML
    that overrides the tables' ``dp:`` annotations. ``epsilon``/``delta``/``confidence`` set
    this session's per-query defaults. ``seed`` fixes the noise for tests only (refused unless
    ``DPCH_ALLOW_FIXED_SEED=1``). ``filter``/``filter_options`` choose the privacy filter
    (see :mod:`dpch.accounting.filters`; default ``$DPCH_FILTER`` or ``basic``; a filter the data
    owner set with ``dpch budget set --filter`` wins). ``ledger_fsync`` (default
    ``$DPCH_LEDGER_FSYNC``): True makes every ledger write fsync, so charges survive power loss as
    well as a crash of the process (slower; docs/filters-and-ledger.md); None keeps the ledger
    table's setting.

    ``dpch://host:port[/db]`` opens a remote session on a ``dpch serve`` gateway instead
    (``analyst`` and ``password`` are the gateway user's; see :mod:`dpch.server.client`); the
    gateway's data owner chose its policy, filter and budgets, and ``seed`` is not sent.
    """
    if is_gateway_dsn(dsn):
        return connect_gateway(dsn, analyst=analyst, password=password, database=database, epsilon=epsilon,
                               delta=delta, confidence=confidence)
    return connect_local(dsn, analyst=analyst, policy=policy, database=database, epsilon=epsilon, delta=delta,
                         confidence=confidence, default_budget=default_budget, seed=seed, filter=filter,
                         filter_options=filter_options, ledger_fsync=ledger_fsync)


def connect_gateway(dsn: str | None = None, *, analyst: str = "default", password: str | None = None,
                    database: str | None = None, epsilon: float | None = None, delta: float | None = None,
                    confidence: float | None = None) -> RemoteSession:
    """:func:`connect` on a ``dpch://`` gateway DSN (see :func:`dpch.server.client.connect_remote`)."""
    # start-up: the gateway client (urllib3, the server package) loads only for dpch:// DSNs
    from dpch.server.client import connect_remote

    return connect_remote(dsn or default_dsn(), analyst=analyst, password=password, database=database,
                          options=given_options(epsilon=epsilon, delta=delta, confidence=confidence))


def connect_local(
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
    filter: str | None = None,
    filter_options: dict[str, Any] | None = None,
    ledger_fsync: bool | None = None,
) -> Session:
    """:func:`connect` on the store itself (the data owner's commands need it: the ledger, the
    policy, planning); a gateway DSN is a :class:`ConfigError`."""
    if is_gateway_dsn(dsn):
        raise ConfigError("this needs the store itself, not a dpch serve gateway",
                          hint="run it where the store is, with --dsn chdb:///path or http://host:8123")
    if isinstance(policy, str):
        policy = Policy.from_toml(policy)
    defaults = QueryOptions().with_overrides(given_options(epsilon=epsilon, delta=delta, confidence=confidence))
    if seed is not None:
        NoiseSource(seed)  # raises before the store is opened if seeds are not allowed
    engine = Engine(dsn, database=database)
    try:
        return Session(
            engine, analyst=analyst, policy=policy, defaults=defaults,
            default_budget=default_budget, seed=seed, filter=filter, filter_options=filter_options,
            ledger_fsync=ledger_fsync,
        )
    except Exception:
        engine.close()
        raise


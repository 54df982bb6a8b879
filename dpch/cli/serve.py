"""``dpch serve``: run the ClickHouse-compatible gateway in front of the store."""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
import threading
from typing import Any

import click

from dpch.cli.context import Context, friendly_errors
from dpch.errors import ConfigError


@click.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True),
              help="Server config TOML: [server] options and [users.NAME] password/analyst/budget.")
@click.option("--host", default=None, help="Address to bind (default from config, else 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default from config, else 8123; 0 = any free port).")
@click.option("--tcp-port", type=int, default=None,
              help="Also serve ClickHouse's native TCP protocol on this port (clickhouse-client, clickhouse-driver, "
                   "clickhouse-go, Grafana's Native option; default from config, else none; 0 = any free port).")
@click.option("--user", "users", multiple=True, metavar="NAME:PASSWORD",
              help="Add a ClickHouse user spending analyst NAME's budget (repeatable; for quick set-ups).")
@click.option("--cache-ttl", type=float, default=None,
              help="Seconds a released answer is re-served for free (0 = off).")
@click.pass_obj
@friendly_errors
def serve(obj: Context, config_path: str | None, host: str | None, port: int | None, tcp_port: int | None,
          users: tuple[str, ...], cache_ttl: float | None) -> None:
    """(Data owner) Serve the store over ClickHouse's HTTP protocol: BI tools and ClickHouse
    clients connect as to a ClickHouse server; every answer goes through dpch."""
    # start-up: the gateway (the server package, ~0.07 s) loads only when it is served
    from dpch.server.config import ServerConfig
    from dpch.server.http import make_server

    config = ServerConfig.from_toml(config_path) if config_path else ServerConfig()
    changes: dict[str, Any] = {}
    if config.dsn is None and obj.dsn:
        changes["dsn"] = obj.dsn
    if obj.database and obj.database != config.database:
        changes["databases"] = (obj.database, *[d for d in config.databases if d != obj.database])
    if cache_ttl is not None:
        changes["cache_ttl"] = cache_ttl
    if tcp_port is not None:
        changes["tcp_port"] = tcp_port
    if users:
        extra = {}
        for spec in users:
            name, sep, password = spec.partition(":")
            if not sep or not name:
                raise ConfigError(f"--user {spec!r} must be NAME:PASSWORD")
            extra[name] = {"password": password}
        changes["users"] = {**config.users, **ServerConfig.from_mapping({"users": extra}).users}
    config = dataclasses.replace(config, **changes)
    _configure_access_log(config.access_log)
    server = make_server(config, host=host, port=port)
    click.echo(f"dpch serve: http://{server.host}:{server.port}  database {config.database}  "
               f"store {server.gateway.engine(None).describe()}  users {', '.join(sorted(config.users))}",
               err=True)
    native = None
    if config.tcp_port is not None:
        from dpch.server.native import serve_native

        try:
            native = serve_native(server, host=host, port=config.tcp_port)
        except BaseException:
            server.stop()
            raise
        click.echo(f"dpch serve: native protocol {native.host}:{native.port}  (clickhouse-client --port {native.port})",
                   err=True)
    owners = sorted(name for name, user in config.users.items() if user.owner)
    click.echo(f"dpch serve: console http://{server.host}:{server.port}/play"
               + (f"  (owners' view /admin: {', '.join(owners)})" if owners else ""), err=True)
    stopper: list[threading.Thread] = []

    def stop() -> None:
        if native is not None:
            native.stop()  # first: the HTTP server's stop closes the gateway both use
        server.stop()

    def on_signal(signum: int, _frame: Any) -> None:
        if not stopper:
            click.echo(f"dpch serve: {signal.Signals(signum).name}, finishing requests in flight", err=True)
            stopper.append(threading.Thread(target=stop))
            stopper[0].start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.serve_forever()
    if stopper:
        stopper[0].join()
    else:
        stop()
    click.echo("dpch serve: stopped", err=True)


def _configure_access_log(target: str | None) -> None:
    log = logging.getLogger("dpch.access")
    log.setLevel(logging.INFO)
    log.propagate = False
    if not target:
        return
    handler = logging.StreamHandler(sys.stderr) if target == "-" else logging.FileHandler(target)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)

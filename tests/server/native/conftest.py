"""A `dpch serve` gateway with its native-protocol listener (`--tcp-port`), both on free ports of 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dpch.server.native import NativeServer, serve_native


@pytest.fixture
def native(serve: Callable[..., Any]) -> Iterator[Callable[..., tuple[Any, NativeServer]]]:
    """``native(**server_options)`` starts a gateway and a native listener beside it; returns both.
    The listeners are stopped before the gateways (the ``serve`` fixture's teardown runs after this one)."""
    listeners: list[NativeServer] = []

    def start(**options: Any) -> tuple[Any, NativeServer]:
        http = serve(**options)
        listener = serve_native(http, host="127.0.0.1", port=0)
        listeners.append(listener)
        return http, listener

    yield start
    for listener in listeners:
        listener.stop()

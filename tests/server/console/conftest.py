"""Console test fixtures: a gateway whose users are the server tests' plus a data owner."""

from __future__ import annotations

import pytest

from tests.server.conftest import USERS
from tests.server.console.console_client import OWNER, Browser


@pytest.fixture
def console(serve):
    """A gateway with the console users and no release cache (each query is its own release)."""
    return serve(users={**USERS, **OWNER}, cache_ttl=0)


@pytest.fixture
def browser(console):
    """``browser(user, password)``: a signed-in Browser on the console gateway (None: not signed in)."""
    def make(user: str | None = "ana", password: str = "ana-pw") -> Browser:
        b = Browser(console)
        if user is not None:
            b.sign_in(user, password)
        return b
    return make

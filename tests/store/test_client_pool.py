"""The engine's client pool: concurrent calls borrow clients of their own, so no call waits for
another inside dpch (ClickHouse runs them in parallel), and closing waits for no one."""

from __future__ import annotations

import threading

from dpch.store.engine import ClientPool, Engine

#: a generous bound for a call that must not wait for anything (a liveness check, not a timing one)
NO_WAIT_S = 60


def test_a_call_runs_while_another_holds_a_client(keeper: Engine):
    """Under the old process-wide lock this call would wait until the held client came back
    (here: never, so the thread would still be alive)."""
    results: list[object] = []
    with keeper.pool.client():  # another call in progress
        worker = threading.Thread(target=lambda: results.append(keeper.query_rows("SELECT 41 + 1")))
        worker.start()
        worker.join(NO_WAIT_S)
        assert not worker.is_alive(), "a call waited for a client another call holds"
    assert results == [[(42,)]]
    assert keeper.pool.size >= 2


class _Client:
    def __init__(self, n: int) -> None:
        self.n = n
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_the_pool_lends_each_client_to_one_call_at_a_time():
    opened: list[_Client] = []

    def open_client() -> _Client:
        opened.append(_Client(len(opened) + 1))
        return opened[-1]

    pool = ClientPool(open_client, _Client(0))
    with pool.client() as a, pool.client() as b, pool.client() as c:
        assert len({a.n, b.n, c.n}) == 3  # three calls at once: three clients
    assert pool.size == 3
    with pool.client() as again:
        assert again is a  # the most recently returned (the outermost call ends last) is lent first
    with pool.client() as busy:
        pool.close()
        assert all(x.closed for x in (b, c)) and not busy.closed  # a busy client closes when returned
    assert busy.closed

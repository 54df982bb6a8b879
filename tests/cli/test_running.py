"""The shell's Ctrl-C (dpch/cli/running.py) on both sides of the checkpoint before the charge.

SIGINT is delivered to this process's main thread (as a terminal would), while the "query"
runs in the worker; ``checkpoint()`` stands where the Accountant calls it, before the ledger write.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from dpch.cli.running import Cancelled, Runner
from dpch.store.cancel import QueryCancelled, checkpoint


def _interrupt_after(seconds: float) -> threading.Timer:
    main = threading.main_thread().ident
    timer = threading.Timer(seconds, lambda: signal.pthread_kill(main, signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_before_the_charge_stops_the_query_at_the_checkpoint():
    runner = Runner(local=True, progress=False)
    reached: list[str] = []

    def query() -> str:
        time.sleep(0.5)  # planning
        try:
            checkpoint()
        except QueryCancelled:
            reached.append("stopped at the checkpoint")
            raise
        reached.append("charged")  # pragma: no cover - would be the bug
        return "released"

    _interrupt_after(0.1)
    with pytest.raises(Cancelled) as info:
        runner.call(query)
    assert info.value.charged is False and "nothing was spent" in str(info.value)
    runner.settle()  # the next command waits for the cancelled worker
    assert reached == ["stopped at the checkpoint"]


def test_ctrl_c_after_the_charge_waits_for_the_paid_answer(capsys):
    runner = Runner(local=True, progress=False)

    def query() -> int:
        checkpoint()  # the charge is written
        time.sleep(0.5)  # ClickHouse computes the aggregate
        return 42

    _interrupt_after(0.1)
    assert runner.call(query) == 42  # one Ctrl-C after the charge does not throw the answer away
    assert "already written to the ledger" in capsys.readouterr().err


def test_second_ctrl_c_abandons_a_paid_answer():
    runner = Runner(local=True, progress=False)

    def query() -> int:
        checkpoint()
        time.sleep(0.8)
        return 42

    _interrupt_after(0.1)
    _interrupt_after(0.3)
    with pytest.raises(Cancelled) as info:
        runner.call(query)
    assert info.value.charged is True and "stays charged" in str(info.value)
    runner.settle()


def test_remote_sessions_cannot_promise_nothing_was_charged():
    runner = Runner(local=False, progress=False)
    _interrupt_after(0.1)
    with pytest.raises(Cancelled) as info:
        runner.call(lambda: time.sleep(0.4))
    assert info.value.charged is None and "may still" in str(info.value)

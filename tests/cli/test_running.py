"""The shell's Ctrl-C (dpch/cli/running.py) on both sides of the checkpoint before the charge.

SIGINT is delivered to this process's main thread (as a terminal would), while the "query"
runs in the worker; ``checkpoint()`` stands where the Accountant calls it, before the ledger write.

No step waits on a clock: a Ctrl-C sent before the main thread is inside the runner's wait would
interrupt the test run itself, so :class:`Terminal` sends it only once the runner has *shown*
that it is waiting (its progress line on stderr, written only from inside the wait), and the
"query" moves on only when the test has seen the runner react (events, not sleeps).
"""

from __future__ import annotations

import io
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr

import pytest

from dpch.cli import running
from dpch.cli.running import Cancelled, Runner
from dpch.store.cancel import QueryCancelled, checkpoint

#: bounds every wait, so a broken runner fails the test instead of hanging it
PATIENCE = 60.0
#: the runner's progress line; written only while the main thread waits for the worker
WAITING = "(Ctrl-C cancels)"
PAID = "already written to the ledger"


class Terminal(io.StringIO):
    """Stands in for stderr and for the keyboard: records what the runner writes and presses
    Ctrl-C (SIGINT to the main thread) when what was written says the runner is ready for it."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = threading.Condition()
        self._main = threading.main_thread().ident
        self.failures: list[str] = []

    def write(self, text: str) -> int:
        with self._changed:
            written = super().write(text)
            self._changed.notify_all()
        return written

    def shown(self, predicate: Callable[[str], bool]) -> bool:
        """Waits until the text written so far satisfies ``predicate``."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self.getvalue()), timeout=PATIENCE)

    def waiting_after(self, marker: str) -> Callable[[str], bool]:
        """True once the runner shows it is waiting, after ``marker`` (or from the start)."""
        return lambda text: marker in text and WAITING in text[text.index(marker):]

    def press_ctrl_c_when(self, *steps: Callable[[str], bool], then: threading.Event | None = None) -> None:
        """In a helper thread: for each step, wait for it, then press Ctrl-C; finally set ``then``."""
        def play() -> None:
            for step in steps:
                if not self.shown(step):
                    self.failures.append(f"the runner never got ready: {self.getvalue()!r}")
                    return
                signal.pthread_kill(self._main, signal.SIGINT)
            if then is not None:
                if not self.shown(self.waiting_after(PAID)):
                    self.failures.append(f"the runner did not wait again: {self.getvalue()!r}")
                then.set()

        threading.Thread(target=play, name="test-terminal", daemon=True).start()

    def __enter__(self) -> Terminal:
        self._redirect = redirect_stderr(self)
        self._redirect.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._redirect.__exit__(*exc)


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[Terminal]:
    """Use as ``with terminal:`` inside the test (pytest installs its own stderr when the test's
    call starts, so a fixture cannot redirect it)."""
    monkeypatch.setattr(running, "SPINNER_DELAY", 0.0)  # the progress line from the first wait on
    # Ctrl-C must reach this process as KeyboardInterrupt: a suite started as a background job (`cmd &`
    # without job control) inherits SIGINT ignored, and the runner then never saw the test's Ctrl-C
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    yield Terminal()
    signal.signal(signal.SIGINT, previous)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _runner(*, local: bool) -> Runner:
    return Runner(local=local, progress=True, ascii=True)


def test_ctrl_c_before_the_charge_stops_the_query_at_the_checkpoint(terminal):
    with terminal:
        runner = _runner(local=True)
        reached: list[str] = []
        planned = threading.Event()

        def query() -> str:
            planned.wait(PATIENCE)  # still planning when Ctrl-C comes
            try:
                checkpoint()
            except QueryCancelled:
                reached.append("stopped at the checkpoint")
                raise
            reached.append("charged")  # pragma: no cover - would be the bug
            return "released"

        terminal.press_ctrl_c_when(terminal.waiting_after(""))
        with pytest.raises(Cancelled) as info:
            runner.call(query)
        assert info.value.charged is False and "nothing was spent" in str(info.value)
        planned.set()  # planning ends after the cancel: the checkpoint must refuse the charge
        runner.settle()  # the next command waits for the cancelled worker
        assert reached == ["stopped at the checkpoint"]
        assert terminal.failures == []


def test_ctrl_c_after_the_charge_waits_for_the_paid_answer(terminal):
    with terminal:
        runner = _runner(local=True)
        computed = threading.Event()

        def query() -> int:
            checkpoint()  # the charge is written
            computed.wait(PATIENCE)  # ClickHouse computes the aggregate until the runner waits again
            return 42

        # the answer arrives only after the runner said it is paid for and went back to waiting
        terminal.press_ctrl_c_when(terminal.waiting_after(""), then=computed)
        assert runner.call(query) == 42  # one Ctrl-C after the charge does not throw the answer away
        assert PAID in terminal.getvalue()
        assert terminal.failures == []


def test_second_ctrl_c_abandons_a_paid_answer(terminal):
    with terminal:
        runner = _runner(local=True)
        computed = threading.Event()

        def query() -> int:
            checkpoint()
            computed.wait(PATIENCE)
            return 42

        terminal.press_ctrl_c_when(terminal.waiting_after(""), terminal.waiting_after(PAID))
        with pytest.raises(Cancelled) as info:
            runner.call(query)
        assert info.value.charged is True and "stays charged" in str(info.value)
        computed.set()
        runner.settle()
        assert terminal.failures == []


def test_remote_sessions_cannot_promise_nothing_was_charged(terminal):
    with terminal:
        runner = _runner(local=False)
        answered = threading.Event()
        terminal.press_ctrl_c_when(terminal.waiting_after(""))
        with pytest.raises(Cancelled) as info:
            runner.call(lambda: answered.wait(PATIENCE))
        assert info.value.charged is None and "may still" in str(info.value)
        answered.set()
        assert terminal.failures == []

"""Child dpch processes for the "many processes" tests (docs/TESTING.md): each runs a script, says
what it reached on stdout (one word per line: READY, ADMITTED, …) and waits for the test's word on
stdin (GO, …). A signal is sent only after the child said it is ready for it; every wait has a
generous deadline and polls nothing on a timer (select on the child's pipe)."""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from typing import Any

from tests.helpers import ROOT, child_env

#: generous bound on any wait for a child (a loaded 2-core machine); never a sleep
DEADLINE = 180.0


class Child:
    """One child process running ``script`` (``python -c``) with ``args``."""

    def __init__(self, script: str, *args: str, env: dict[str, str] | None = None) -> None:
        environment = child_env()
        environment.update(env or {})
        self.process = subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env=environment, cwd=ROOT)
        self.lines: list[str] = []

    @property
    def pid(self) -> int:
        return self.process.pid

    def expect(self, word: str, deadline: float = DEADLINE) -> str:
        """Reads the child's lines until one starts with ``word``; returns it (fails on exit or deadline)."""
        assert self.process.stdout is not None
        end = time.monotonic() + deadline
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            while True:
                left = end - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise AssertionError(f"child {self.pid} did not say {word!r} in {deadline:g} s; "
                                         f"it said {self.lines[-5:]}")
                line = self.process.stdout.readline()
                if not line:
                    self.process.wait(timeout=60)
                    raise AssertionError(f"child {self.pid} exited ({self.process.returncode}) before {word!r}: "
                                         f"{self.lines[-5:]} {self.stderr()[-3000:]}")
                line = line.rstrip("\n")
                self.lines.append(line)
                if line.startswith(word):
                    return line

    def send(self, word: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()

    def result(self) -> Any:
        """The JSON of the child's RESULT line (after it exits cleanly)."""
        line = self.expect("RESULT")
        self.process.wait(timeout=DEADLINE)
        assert self.process.returncode == 0, self.stderr()[-3000:]
        return json.loads(line[len("RESULT"):])

    def stderr(self) -> str:
        if self.process.poll() is None:
            return ""
        assert self.process.stderr is not None
        return self.process.stderr.read()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=60)


def start_all(children: list[Child], ready: str = "READY") -> None:
    """Waits until every child said ``ready``, then tells them all GO (a start barrier across processes)."""
    for child in children:
        child.expect(ready)
    for child in children:
        child.send("GO")

"""Progress bars with rate and ETA for long owner commands (``dpch load``, ``dpch audit --full-stack``).

The work reports through a plain callback, ``report(done, total)``; this module turns the calls
into click's progress bar (percent, position, rate, ETA) on stderr. When stderr is not a
terminal nothing at all is written, so piped and logged output stays clean; the callback still
receives every count (which is what the tests check).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import click

#: ``report(done, total)``: ``done`` units of ``total`` finished so far
Report = Callable[[int, int], None]


class Progress:
    """A ``report(done, total)`` callback drawing a bar on ``stream`` (default stderr) when it is a
    terminal. ``unit`` names what is counted (``rows``, ``releases``) in the rate."""

    def __init__(self, label: str, unit: str, *, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.visible = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self.total = 0
        self._clock = clock
        self._started = clock()
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        step, self.done, self.total = max(0, done - self.done), max(self.done, done), total
        if not self.visible:
            return
        if self._bar is None:
            # the ETA is ours (click's appears only after a second): rate and ETA from the same clock
            self._bar = click.progressbar(length=max(total, 1), label=self.label, file=self.stream, show_eta=False,
                                          show_percent=True, show_pos=True, item_show_func=lambda _: self.rate_text())
        self._bar.update(step, self.done)

    def rate_text(self) -> str:
        """``12,345 rows/s  eta 0:01:05``: the mean rate since the first report, and the time the
        rest takes at that rate (``eta ?`` before anything is done)."""
        elapsed = self._clock() - self._started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if rate > 0:
            left = int(round(max(0, self.total - self.done) / rate))
            eta = f"{left // 3600}:{left // 60 % 60:02}:{left % 60:02}"
        else:
            eta = "?"
        return f"{rate:,.0f} {self.unit}/s  eta {eta}"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.render_finish()
            self._bar = None


@contextmanager
def progress(label: str, unit: str, *, stream: TextIO | None = None) -> Iterator[Progress]:
    """A :class:`Progress` for the duration of the block (the bar's line is finished at the end)."""
    bar = Progress(label, unit, stream=stream)
    try:
        yield bar
    finally:
        bar.close()

"""The release cache: a repeated query gets the answer already released, at no privacy cost.

Dashboards re-send the same queries every few seconds. Re-serving a released answer is
post-processing of a release (it reveals nothing new), so it costs nothing; a fresh release
of the same query would spend budget again for a differently-noised answer that, averaged
with the first, would only leak more. The key is (analyst, database, normalized SQL
fingerprint, resolved privacy options); entries expire after ``ttl`` seconds.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from dpch.pipeline.report import Release


@dataclass(frozen=True)
class CachedRelease:
    release: Release
    types: list[str]
    released_at: float
    #: the release already serialised, per (format, output settings): a hit costs no ClickHouse call
    encoded: dict[Hashable, bytes] = field(default_factory=dict, compare=False)


class ReleaseCache:
    """Thread-safe TTL cache with at most ``max_entries`` releases (least recently used first out).

    :meth:`get_or_release` runs ``release()`` at most once per key at a time: concurrent
    identical queries (a dashboard's panels) wait for the first and share its answer.
    """

    def __init__(self, ttl: float, max_entries: int = 4096) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, CachedRelease] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[Hashable, threading.Lock] = {}

    @property
    def enabled(self) -> bool:
        return self.ttl > 0

    def get(self, key: Hashable) -> CachedRelease | None:
        if not self.enabled:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if time.monotonic() - entry.released_at > self.ttl:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry

    def get_or_release(
        self, key: Hashable, release: Callable[[], tuple[Release, list[str]]]
    ) -> tuple[CachedRelease, bool]:
        """The cached entry and True, or a fresh release (now cached) and False."""
        if not self.enabled:
            rel, types = release()
            return CachedRelease(rel, types, time.monotonic()), False
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            hit = self.get(key)
            if hit is not None:
                return hit, True
            rel, types = release()
            entry = CachedRelease(rel, types, time.monotonic())
            with self._lock:
                self._entries[key] = entry
                self._entries.move_to_end(key)
                while len(self._entries) > self.max_entries:
                    old, _ = self._entries.popitem(last=False)
                    self._key_locks.pop(old, None)
            return entry, False

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def cache_key(*parts: Any) -> Hashable:
    return tuple(parts)

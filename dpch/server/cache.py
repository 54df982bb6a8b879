"""The release cache: a repeated query gets the answer already released, at no privacy cost.

Dashboards re-send the same queries every few seconds. Re-serving a released answer is
post-processing of a release (it reveals nothing new), so it costs nothing; a fresh release
of the same query would spend budget again for a differently-noised answer that, averaged
with the first, would only leak more. The key is (analyst, database, the parsed query's
fingerprint — its normalised SQL, so spacing and keyword case do not matter — and the resolved
privacy options); how long an entry is re-served is the *reader's* TTL (``[users.NAME]
cache_ttl``, else the server's), so each gateway user sets how fresh its dashboards must be.
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
    #: the release already serialised, per (format, output settings, ...): a hit costs no ClickHouse call
    encoded: dict[Hashable, bytes] = field(default_factory=dict, compare=False)


class ReleaseCache:
    """Thread-safe TTL cache with at most ``max_entries`` releases (least recently used first out).

    ``ttl`` is the default time to live in seconds (0 = off); :meth:`get` and
    :meth:`get_or_release` take the reader's own ``ttl``. ``clock`` (seconds, monotonic) is
    injectable so tests can move time without sleeping.

    :meth:`get_or_release` runs ``release()`` at most once per key at a time: concurrent
    identical queries (a dashboard's panels) wait for the first and share its answer.
    """

    def __init__(self, ttl: float, max_entries: int = 4096, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock
        self._entries: OrderedDict[Hashable, CachedRelease] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[Hashable, threading.Lock] = {}

    @property
    def enabled(self) -> bool:
        """Whether the default TTL re-serves anything."""
        return self.ttl > 0

    def _ttl(self, ttl: float | None) -> float:
        return self.ttl if ttl is None else ttl

    def get(self, key: Hashable, *, ttl: float | None = None) -> CachedRelease | None:
        """The entry under ``key`` if it is at most ``ttl`` seconds old (default: the cache's TTL).
        An older entry is left for readers with a longer TTL; a fresh release replaces it."""
        ttl = self._ttl(ttl)
        if ttl <= 0:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or self.clock() - entry.released_at > ttl:
                return None
            self._entries.move_to_end(key)
            return entry

    def get_or_release(
        self, key: Hashable, release: Callable[[], tuple[Release, list[str]]], *, ttl: float | None = None
    ) -> tuple[CachedRelease, bool]:
        """The cached entry and True, or a fresh release (now cached) and False."""
        if self._ttl(ttl) <= 0:
            rel, types = release()
            return CachedRelease(rel, types, self.clock()), False
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            hit = self.get(key, ttl=ttl)
            if hit is not None:
                return hit, True
            rel, types = release()
            entry = CachedRelease(rel, types, self.clock())
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

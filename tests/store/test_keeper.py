"""Compare-and-set in Keeper through a KeeperMap table (dpch/store/keeper.py), on a real ClickHouse
(chdb behind the test HTTP endpoint, with ClickHouse's in-process test Keeper).

- create-if-absent and a versioned advance answer True / False as Keeper decides;
- 4 threads on 4 connections incrementing one counter by read-then-advance never lose an update,
  and the writes that won are exactly the versions the key went through (no version has two
  writers); negative control: the same loop with an UPDATE that does not check the version loses
  updates on the same machine, so the test would see a CAS that does not fence;
- a server without Keeper is told apart from a Keeper that is down (only the first lets ``auto``
  choose one owner; the second fails closed).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dpch.errors import AdmissionUnavailable
from dpch.store.engine import Engine
from dpch.store.keeper import KeeperNotConfigured, VersionedMap, new_token
from dpch.store.quoting import quote_string


@pytest.fixture
def engines(ch_server, server_db):
    opened: list[Engine] = []

    def make() -> Engine:
        engine = Engine(ch_server.dsn(server_db))
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        engine.close()


def test_create_and_advance_say_who_won(engines):
    vmap = VersionedMap(engines(), "dpch_kv_test")
    a, b = new_token(), new_token()
    assert vmap.create("k", "one", a) is True
    assert vmap.create("k", "other", b) is False  # strict mode: the key exists
    assert vmap.read("k").version == 1 and vmap.read("k").value == "one"
    assert vmap.advance("k", 1, "two", b) is True
    assert vmap.advance("k", 1, "stale", a) is False  # a writer holding version 1 cannot commit
    found = vmap.read("k")
    assert (found.version, found.value, found.writers) == (2, "two", (a, b))
    assert vmap.outcome("k", {b}) == b and vmap.outcome("k", {new_token()}) is None
    assert vmap.read("missing") is None


def _increment(vmap: VersionedMap, key: str, wins: list[int]) -> None:
    while True:
        found = vmap.read(key)
        token = new_token()
        if vmap.advance(key, found.version, str(int(found.value) + 1), token):
            wins.append(found.version + 1)
            return


def test_concurrent_increments_lose_no_update(engines):
    VersionedMap(engines(), "dpch_kv_test").create("ctr", "0", new_token())
    wins: list[int] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        vmap = VersionedMap(engines(), "dpch_kv_test", create=False)  # a connection of its own
        barrier.wait(timeout=60)
        for _ in range(25):
            _increment(vmap, "ctr", wins)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    final = VersionedMap(engines(), "dpch_kv_test", create=False).read("ctr")
    assert int(final.value) == len(wins) == 100
    # every version from 2 to 101 was won exactly once: no version has two writers
    assert sorted(wins) == list(range(2, 102))


def test_negative_control_an_unversioned_update_loses_updates(engines):
    engine = engines()
    vmap = VersionedMap(engine, "dpch_kv_test")
    vmap.create("ctr", "0", new_token())
    done = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        mine = engines()
        barrier.wait(timeout=60)
        for _ in range(25):
            value = VersionedMap(mine, "dpch_kv_test", create=False).read("ctr").value
            # read, then write without the version check: a last-writer-wins "lock-free" counter
            mine.command(f"ALTER TABLE {mine.table('dpch_kv_test')} UPDATE value = {quote_string(str(int(value) + 1))}"
                         " WHERE key = 'ctr' SETTINGS keeper_map_strict_mode = 0")
            done.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(done) == 100
    assert int(vmap.read("ctr").value) < 100, "without the version check, concurrent updates are lost"


def test_a_server_without_keeper_is_not_configured_and_a_lost_keeper_is_unavailable(tmp_path: Path, ch_server,
                                                                                      server_db, engines):
    from tests.chendpoint import start

    with start(tmp_path / "plain", keeper=False) as plain:
        engine = Engine(plain.dsn("db"))
        try:
            with pytest.raises(KeeperNotConfigured):
                VersionedMap(engine, "dpch_kv_test")
        finally:
            engine.close()
    vmap = VersionedMap(engines(), "dpch_admission")  # a name the endpoint's Keeper switch covers
    vmap.create("k", "v", new_token())
    ch_server.keeper(up=False)
    try:
        with pytest.raises(AdmissionUnavailable) as info:
            vmap.read("k")
        assert not isinstance(info.value, KeeperNotConfigured)
        assert vmap.advance("k", 1, "w", new_token()) is None  # unknown outcome: the caller re-reads
    finally:
        ch_server.keeper(up=True)
    assert vmap.read("k").value == "v"

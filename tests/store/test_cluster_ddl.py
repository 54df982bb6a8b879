"""dpch's own tables on a named cluster (issue 26, part 3): ``ON CLUSTER`` with replicated engines, and
a quorum on every write of its rows, so every replica holds one ledger, budget table, lock table and
watch history (a load balancer over replicas used to get one ledger per node).

chdb cannot run distributed DDL (clickhouse-local: "Replicated DDL queries are disabled") nor keep a
ReplicatedMergeTree writable, so this checks the statements dpch sends on a cluster: each is parsed
by ClickHouse itself (``formatQuery``), names the cluster and a replicated engine with the standard
``{shard}``/``{replica}`` macros; only a real cluster (docker/) runs them. Without a cluster the
statements are what they always were (the rest of the suite runs them)."""

from __future__ import annotations

import pytest

from dpch.accounting.budget import BudgetStore
from dpch.accounting.ledger import Ledger
from dpch.accounting.locks import LockStore
from dpch.errors import ConfigError
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine


@pytest.fixture
def recorded(ch_server, server_db, monkeypatch):
    """An engine that names a cluster and records dpch's DDL instead of sending it."""
    engine = Engine(ch_server.dsn(server_db))
    statements: list[str] = []
    real = engine.command

    def command(sql: str, parameters=None) -> None:
        if "ON CLUSTER" in sql or "insert_quorum" in sql:
            statements.append(sql)
        else:
            real(sql, parameters)

    monkeypatch.setattr(engine, "command", command)
    engine.cluster = "dpch_cluster"
    yield engine, statements
    engine.cluster = None
    engine.close()


def _parses(engine: Engine, sql: str) -> str:
    return engine.query_rows("SELECT formatQuery({q:String})", {"q": sql})[0][0]


def test_dpch_tables_are_created_on_the_cluster_with_replicated_engines(recorded):
    engine, statements = recorded
    Ledger(engine)
    BudgetStore(engine)
    LockStore(engine)
    creates = [s for s in statements if s.startswith("CREATE TABLE")]
    assert {s.split()[5].split(".")[1].strip("`") for s in creates} == {"dpch_ledger", "dpch_budgets", "dpch_locks"}
    for sql in creates:
        table = sql.split()[5].split(".")[1].strip("`")
        formatted = _parses(engine, sql)
        assert "ON CLUSTER dpch_cluster" in formatted
        assert f"ReplicatedMergeTree('/clickhouse/tables/{{shard}}/dpch/{engine.database}/{table}', '{{replica}}')" \
            in formatted, formatted
    alters = [s for s in statements if s.startswith("ALTER TABLE")]  # columns added to an older ledger
    assert alters and all("ON CLUSTER dpch_cluster" in _parses(engine, s) for s in alters)


def test_ledger_rows_are_written_with_a_quorum_on_a_cluster(recorded):
    engine, statements = recorded
    Ledger(engine).charge(analyst="ana", datasets=("db.t",), query_hash="h", mechanism="laplace",
                          filter_name="basic", cost=PrivacyCost(0.1))
    inserts = [s for s in statements if s.startswith("INSERT")]
    assert len(inserts) == 1
    formatted = _parses(engine, inserts[0])
    assert "insert_quorum = 'auto'" in formatted and "insert_quorum_parallel = 0" in formatted
    engine.cluster = None
    assert engine.write_settings() == ""  # no cluster: no quorum (a single server has one copy)


def test_an_embedded_store_has_no_cluster(tmp_path):
    with pytest.raises(ConfigError, match="no cluster"):
        Engine(f"chdb://{tmp_path / 's'}", cluster="dpch_cluster")

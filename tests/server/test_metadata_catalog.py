"""What `dpch serve` shows as metadata, checked for values: information_schema (lower and UPPER case),
SHOW CREATE TABLE with the dp: annotations (and system.tables.create_table_query the same text),
system.functions / data_type_families restricted to what dpch accepts, qualified system-table names,
writes refused as READONLY (164), unknown system tables refused by name without a dump — and the
negative controls: a table without a policy never appears, data tables never join system tables."""

from __future__ import annotations

import json

import pytest

from dpch.server.catalog_tables import AGGREGATES, DATA_TYPE_FAMILIES
from dpch.sql.functions import TYPED_NAMES
from dpch.store.engine import Engine
from tests.server.test_metadata_replays import answer, post

VISITS_COLUMNS = ["user_id", "visit_date", "region", "device", "age", "duration_min", "spend", "pages", "converted"]


def _error(port: int, sql: str) -> tuple[int, str, str]:
    status, body, headers = post(port, sql)
    assert status != 200, body
    return status, headers.get("X-ClickHouse-Exception-Code", ""), body.decode()


def test_information_schema_in_lower_and_upper_case(serve, small_visits):
    port = serve().port
    names, _, rows = answer(port, "SELECT table_schema, table_name, TABLE_NAME, table_type, table_rows, data_length, "
                                  "TABLE_COMMENT FROM information_schema.tables")
    assert rows == [[small_visits, "visits", "visits", "BASE TABLE", None, None,
                     "dp: privacy_unit=user_id, max_rows_per_unit=10"]]  # no row count, no size
    _, _, upper = answer(port, "SELECT TABLE_SCHEMA, TABLE_NAME FROM INFORMATION_SCHEMA.TABLES")
    assert upper == [[small_visits, "visits"]]
    _, types, cols = answer(port, "SELECT column_name, COLUMN_NAME, ordinal_position, data_type, is_nullable "
                                  "FROM information_schema.columns WHERE table_name = 'visits' "
                                  "ORDER BY ordinal_position")
    assert [c[0] for c in cols] == [c[1] for c in cols] == VISITS_COLUMNS
    assert [c[3] for c in cols][:3] == ["UInt64", "Date", "LowCardinality(String)"]
    assert types[2] == "UInt64" and {c[4] for c in cols} == {"NO"}
    _, _, schemata = answer(port, "SELECT schema_name, SCHEMA_NAME FROM information_schema.schemata")
    assert schemata == [[small_visits, small_visits]]
    # every column ClickHouse's view has can be named (a client's SELECT * works)
    names, _, rows = answer(port, "SELECT * FROM information_schema.tables")
    assert len(names) == 42 and len(rows) == 1 and "TABLE_ROWS" in names


@pytest.mark.parametrize("template", ["SHOW CREATE TABLE visits", 'SHOW CREATE TABLE "{db}"."visits"',
                                      "SHOW CREATE TABLE `{db}`.visits", "SHOW TABLE visits", "show create visits"])
def test_show_create_table_gives_the_ddl_with_its_dp_annotations(serve, small_visits, keeper: Engine, template):
    port = serve().port
    names, types, rows = answer(port, template.replace("{db}", small_visits))
    assert names == ["statement"] and types == ["String"] and len(rows) == 1
    ddl = rows[0][0]
    _, _, same = answer(port, "SELECT create_table_query FROM system.tables WHERE name = 'visits'")
    assert same == [[ddl]]  # system.tables says the same
    assert "COMMENT 'dp: privacy_unit=user_id, max_rows_per_unit=10'" in ddl
    assert "`region` LowCardinality(String) COMMENT 'dp: public, values=[\"north\", \"south\", \"east\", \"west\"]'" \
        in ddl
    assert "ORDER BY (user_id, visit_date)" in ddl
    # the text is real DDL: it recreates a table with the same columns, types and annotations
    copy = f"{small_visits}_copy"
    keeper.command(f"CREATE DATABASE `{copy}`")
    try:
        keeper.command(ddl.replace(f"`{small_visits}`.", f"`{copy}`."))
        original = keeper.query_rows("SELECT name, type, comment FROM system.columns WHERE database = {d:String} "
                                     "AND table = 'visits' ORDER BY position", {"d": small_visits})
        recreated = keeper.query_rows("SELECT name, type, comment FROM system.columns WHERE database = {d:String} "
                                      "AND table = 'visits' ORDER BY position", {"d": copy})
        assert recreated == original
    finally:
        keeper.command(f"DROP DATABASE IF EXISTS `{copy}`")


@pytest.mark.parametrize("table", ["unannotated", "dpch_ledger", "nosuch"])
def test_show_create_table_of_a_table_without_a_policy_is_unknown(serve, table):
    status, code, text = _error(serve().port, f"SHOW CREATE TABLE {table}")
    assert code == "60" and status == 404 and f"{table} does not exist (or has no privacy policy)" in text
    assert "CREATE" not in text


def test_functions_and_type_families_are_what_dpch_accepts(serve):
    port = serve().port
    _, _, rows = answer(port, "SELECT name, is_aggregate FROM system.functions ORDER BY name")
    functions = {r[0]: r[1] for r in rows}
    assert set(functions) == set(TYPED_NAMES) | set(AGGREGATES)
    assert functions["sum"] == 1 and functions["lower"] == 0 and functions["quantile"] == 1
    for outside in ("sleep", "file", "url", "dictGet", "arrayJoin", "uniq", "groupArray", "version"):
        assert outside not in functions
    _, _, rows = answer(port, "SELECT name FROM system.data_type_families ORDER BY name")
    families = [r[0] for r in rows]
    assert families == sorted(DATA_TYPE_FAMILIES) and "Float64" in families and "Date" in families
    assert not {"JSON", "Dynamic", "Object", "AggregateFunction", "Map"} & set(families)
    assert answer(port, "SELECT count() AS n FROM system.table_functions")[2] == [[0]]


def test_qualified_system_table_names_under_aliases_and_joins(serve, small_visits):
    port = serve().port
    assert answer(port, "SELECT system.tables.name FROM system.tables")[2] == [["visits"]]
    rows = answer(port, "SELECT t.name, system.tables.database FROM system.tables AS t")[2]
    assert rows == [["visits", small_visits]]
    _, _, rows = answer(port, "SELECT t.name, c.name FROM system.tables t JOIN system.columns c ON c.table = t.name "
                              "AND c.database = t.database WHERE c.position <= 2 ORDER BY c.position")
    assert rows == [["visits", "user_id"], ["visits", "visit_date"]]


@pytest.mark.parametrize("sql", [
    "SELECT t.name FROM system.tables t JOIN visits v ON t.name = v.region",
    "SELECT name FROM system.tables WHERE name IN (SELECT region FROM visits)",
    "SELECT name FROM system.columns WHERE table = 'visits' UNION ALL SELECT region FROM visits",
    "SELECT c.name FROM system.columns c JOIN unannotated u ON c.position = u.x",
])
def test_a_data_table_in_a_system_table_query_is_refused(serve, sql):
    status, code, text = _error(serve().port, sql)
    assert code == "497" and "cannot mix system tables with other tables" in text


def test_a_table_without_a_policy_never_appears(serve):
    port = serve().port
    for sql in ("SELECT name FROM system.tables", "SELECT DISTINCT table FROM system.columns",
                "SELECT table_name FROM information_schema.tables", "SELECT DISTINCT TABLE_NAME FROM "
                "INFORMATION_SCHEMA.COLUMNS", "SHOW TABLES", "SELECT name FROM system.tables WHERE name LIKE '%'"):
        assert [r[0] for r in answer(port, sql)[2]] == ["visits"], sql
    assert answer(port, "EXISTS TABLE unannotated")[2] == [[0]]


@pytest.mark.parametrize(("sql", "code_name", "served_hint"), [
    ("SELECT * FROM system.parts", "system.parts", True),
    ("SELECT sum(rows) FROM system.parts WHERE table = 'visits'", "system.parts", True),
    ("SELECT * FROM information_schema.key_column_usage", "information_schema.key_column_usage", True),
    ("SELECT query FROM system.query_log", "system.query_log", True),
    # Grafana's data-analysis dashboard (grafana/clickhouse-datasource 1d04063a, src/dashboards/
    # data-analysis.json line 693): row counts from system.parts are data, never shown
    ("SELECT concatAssumeInjective(table.database, '.', name) as name, table_stats.total_rows as total_rows "
     "FROM system.tables table LEFT JOIN ( SELECT table, database, sum(rows) as total_rows FROM system.parts "
     "WHERE table IN ('visits') AND active GROUP BY table, database ) AS table_stats ON table.name = table_stats.table "
     "AND table.database = table_stats.database ORDER BY total_rows DESC LIMIT 10", "system.parts", True),
])
def test_an_unknown_system_table_is_refused_by_name_without_a_dump(serve, sql, code_name, served_hint):
    status, code, text = _error(serve().port, sql)
    assert code == "60" and status == 404, text
    assert f"{code_name} is not served" in text and "system.columns" in text
    assert len(text) < 700 and "JSONEachRow" not in text and "format(" not in text  # no rewritten query


@pytest.mark.parametrize(("sql", "what"), [
    ("INSERT INTO visits (user_id) VALUES (1)", "INSERT"),
    ("insert into visits select * from visits", "INSERT"),
    ("/* from a tool */ INSERT INTO visits VALUES (1)", "INSERT"),
    ("CREATE TABLE x (a UInt8) ENGINE = Memory", "CREATE TABLE"),
    ("CREATE OR REPLACE VIEW v AS SELECT count() FROM visits", "CREATE OR REPLACE VIEW"),
    ("ALTER TABLE visits DELETE WHERE 1", "ALTER TABLE"),
    ("DROP TABLE visits", "DROP TABLE"),
    ("TRUNCATE TABLE visits", "TRUNCATE TABLE"),
    ("RENAME TABLE visits TO v2", "RENAME TABLE"),
    ("OPTIMIZE TABLE visits FINAL", "OPTIMIZE TABLE"),
    ("DELETE FROM visits WHERE 1", "DELETE"),
])
def test_a_write_is_refused_as_readonly_and_changes_nothing(serve, small_visits, keeper: Engine, sql, what):
    srv = serve()
    before = keeper.query_rows(f"SELECT count() FROM `{small_visits}`.visits")
    status, code, text = _error(srv.port, sql)
    assert code == "164" and status == 403 and "(READONLY)" in text
    assert f"dpch is read-only: {what} is not allowed" in text and "send the SELECT itself" in text
    assert keeper.query_rows(f"SELECT count() FROM `{small_visits}`.visits") == before
    assert srv.gateway.session(srv.gateway.config.users["ana"], None).budget().spent.epsilon == 0.0


def test_a_view_gets_the_table_api_hint(serve):
    _, code, text = _error(serve().port, "CREATE VIEW ibis_1 AS SELECT count() FROM visits")
    assert code == "164" and "con.table('visits')" in text


def test_metadata_answers_never_carry_data_dependent_numbers(serve):
    port = serve().port
    names, _, rows = answer(port, "SELECT * FROM system.tables")
    row = dict(zip(names, rows[0], strict=True))
    assert row["total_rows"] is None and row["total_bytes"] is None
    names, _, rows = answer(port, "SELECT * FROM system.columns")
    sizes = {(r[names.index("data_compressed_bytes")], r[names.index("data_uncompressed_bytes")]) for r in rows}
    assert sizes == {(0, 0)}
    assert "checksum" not in json.dumps(names)


@pytest.mark.parametrize(("sql", "named"), [
    # two ARRAY JOINs multiply twice; the one allowed splits a column's text, never a literal or a subquery
    ("SELECT count() FROM system.tables ARRAY JOIN splitByChar(',', create_table_query) AS a "
     "ARRAY JOIN splitByChar(',', create_table_query) AS b", "ARRAY JOIN"),
    ("SELECT count() FROM system.tables ARRAY JOIN [1, 2, 3] AS a", "ARRAY JOIN"),
    ("SELECT count() FROM system.tables ARRAY JOIN (SELECT groupArray(name) FROM system.columns) AS a", "ARRAY JOIN"),
    ("SELECT count() FROM system.columns c LEFT JOIN (SELECT * FROM VALUES ((c.name, 1))) AS v ON v.c1 = c.name",
     "VALUES"),
])
def test_row_multipliers_beyond_the_jdbc_shapes_are_refused(serve, sql, named):
    status, code, text = _error(serve().port, sql)
    assert code == "497" and status == 403 and named in text, text


def test_the_one_allowed_array_join_splits_the_sorting_key(serve):
    sql = "SELECT trim(k) AS key FROM system.tables ARRAY JOIN splitByChar(',', sorting_key) AS k"
    rows = answer(serve().port, sql)[2]
    assert rows == [["user_id"], ["visit_date"]]


def test_describe_of_an_emulated_table_lists_the_columns_served(serve):
    port = serve().port
    rows = answer(port, "DESCRIBE system.tables")[2]
    assert [r[0] for r in rows][:3] == ["database", "name", "uuid"] and ["total_rows", "Nullable(UInt64)"] in [
        r[:2] for r in rows]
    rows = answer(port, "DESC INFORMATION_SCHEMA.COLUMNS")[2]
    assert {"column_name", "COLUMN_NAME"} <= {r[0] for r in rows}
    _, code, text = _error(port, "DESCRIBE system.parts")
    assert code == "60" and "system.parts does not exist" in text


def test_clickhouse_connect_insert_is_refused_as_readonly(serve, small_visits, keeper: Engine):
    """client.insert() sends ``INSERT ... FORMAT Native`` in the URL and the rows as the body."""
    import clickhouse_connect
    from clickhouse_connect.driver.exceptions import DatabaseError

    srv = serve()
    client = clickhouse_connect.get_client(host="127.0.0.1", port=srv.port, username="ana", password="ana-pw",
                                           database=small_visits)
    before = keeper.query_rows(f"SELECT count() FROM `{small_visits}`.visits")
    with pytest.raises(DatabaseError) as info:
        client.insert("visits", [[1, 2]], column_names=["user_id", "age"],
                      column_type_names=["UInt64", "UInt8"])
    assert "164" in str(info.value) and "dpch is read-only: INSERT is not allowed" in str(info.value)
    with pytest.raises(DatabaseError, match="dpch is read-only: CREATE TABLE is not allowed"):
        client.command("CREATE TABLE t2 (a UInt8) ENGINE = Memory")
    assert keeper.query_rows(f"SELECT count() FROM `{small_visits}`.visits") == before


def test_ctes_over_metadata_are_answered(serve):
    port = serve().port
    assert answer(port, "WITH s AS (SELECT name FROM system.tables) SELECT s.name FROM s")[2] == [["visits"]]
    assert answer(port, "WITH s AS (SELECT 1 AS a), r AS (SELECT a + 1 AS b FROM s) SELECT b FROM r")[2] == [[2]]


@pytest.mark.parametrize("sql", [
    # in a CTE's own body the name is the table (chdb: WITH x AS (SELECT a + 100 FROM x) reads table x)
    "WITH visits AS (SELECT * FROM visits) SELECT count() AS n FROM visits",
    "WITH unannotated AS (SELECT x FROM unannotated) SELECT sum(x) AS n FROM unannotated",
    # a CTE defined in a subquery is not visible outside it: the outer name is the table
    "SELECT count() AS n FROM (WITH visits AS (SELECT 1 AS a) SELECT * FROM visits) AS q, visits",
    # an earlier CTE cannot see a later one: the name is the table
    "WITH a AS (SELECT * FROM visits), visits AS (SELECT 1 AS z) SELECT count() AS n FROM a",
])
def test_a_cte_named_like_a_table_never_reads_it_as_metadata(serve, sql):
    """The metadata path runs the query on ClickHouse as written: a name it resolves to a data table
    must never be taken for a CTE there. These go to the DP path (noise and a charge) or are refused."""
    status, body, headers = post(serve().port, sql)
    assert status != 200 or "X-Dpch-Release-Id" in headers, body


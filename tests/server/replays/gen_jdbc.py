"""Rebuilds the ClickHouse JDBC v2 replay SQL (jdbc.toml) from the driver's source, the way
DatabaseMetaDataImpl concatenates it: ``python gen_jdbc.py <clickhouse-java git dir>``.

Not run by the tests (they read jdbc.toml); kept so the fixture can be regenerated for a newer
driver. getTables takes types = {"TABLE", "VIEW"} (DBeaver's and Metabase's table list) and
PreparedStatement's ``?`` bound to '%' (jdbc-v2 substitutes parameters into the text on the client);
the IN lists come from a Java HashMap/HashSet, whose iteration order is the JVM's: they are sorted
here (the order of an IN list does not change the query).
"""

from __future__ import annotations

import re
import subprocess
import sys

META = "jdbc-v2/src/main/java/com/clickhouse/jdbc/metadata/DatabaseMetaDataImpl.java"
TYPES = "clickhouse-data/src/main/java/com/clickhouse/data/ClickHouseDataType.java"


def show(git: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git, "show", f"HEAD:{path}"], check=True,
                          capture_output=True, text=True).stdout


def main(git: str) -> None:
    types = show(git, TYPES)
    enum = re.findall(r"^    ([A-Z][A-Za-z0-9_]*)\(\s*[A-Za-z0-9_.]+\.class,\s*(?:true|false),\s*(?:true|false),"
                      r"\s*(?:true|false),\s*(\d+)", types, re.M)
    sizes = "multiIf(character_octet_length IS NOT NULL, character_octet_length, "
    for name, length in enum:
        if int(length) > 0:
            sizes += f"system.columns.type == '{name}', {length}, "
    sizes += "numeric_precision IS NOT NULL, numeric_precision, 0)"
    columns = (
        "SELECT '' AS TABLE_CAT, database AS TABLE_SCHEM, table AS TABLE_NAME, name AS COLUMN_NAME, "
        "toInt32(1111) AS DATA_TYPE, type AS TYPE_NAME, "
        f"toInt32({sizes}) AS COLUMN_SIZE, "
        "toInt32(0) AS BUFFER_LENGTH, toInt32(IF (numeric_scale == 0, NULL, numeric_scale)) as DECIMAL_DIGITS,  "
        "toInt32(numeric_precision_radix) AS NUM_PREC_RADIX, "
        "toInt32(position(type, 'Nullable(') >= 1 ?1 : 0) as NULLABLE, "
        "system.columns.comment AS REMARKS, system.columns.default_expression AS COLUMN_DEF, "
        "toInt32(0) AS SQL_DATA_TYPE, toInt32(0) AS SQL_DATETIME_SUB, "
        "character_octet_length::Nullable(Int32) AS CHAR_OCTET_LENGTH, "
        "toInt32(system.columns.position) AS ORDINAL_POSITION, "
        "position(upper(type), 'NULLABLE') >= 1 ? 'YES' : 'NO' AS IS_NULLABLE,"
        "CAST(NULL as Nullable(String)) AS SCOPE_CATALOG, CAST(NULL as Nullable(String)) AS SCOPE_SCHEMA, "
        "CAST(NULL as Nullable(String)) AS SCOPE_TABLE, CAST(NULL as Nullable(Int16)) AS SOURCE_DATA_TYPE, "
        "'NO' as IS_AUTOINCREMENT, 'NO' as IS_GENERATEDCOLUMN "
        " FROM system.columns WHERE database LIKE '%' AND table LIKE 'visits' AND name LIKE '%'"
        " ORDER BY TABLE_SCHEM, TABLE_NAME, ORDINAL_POSITION")
    meta = show(git, META)
    engine_map = dict(re.findall(r'map\.put\("([A-Za-z0-9]+)", TableType\.([A-Z_]+)\.getTypeName\(\)\)', meta))
    requested = {"TABLE", "VIEW"}
    engines = sorted(e for e, t in engine_map.items() if t in requested)
    tables = (
        "SELECT '' AS TABLE_CAT, t.database AS TABLE_SCHEM, t.name AS TABLE_NAME, "
        "if(t.is_temporary = 1, concat('Temporary', t.engine), t.engine) AS TABLE_TYPE, t.comment AS REMARKS, "
        "CAST(null as Nullable(String)) AS TYPE_CAT, d.engine AS TYPE_SCHEM, "
        "CAST(null as Nullable(String)) AS TYPE_NAME, CAST(null as Nullable(String)) AS SELF_REFERENCING_COL_NAME, "
        "CAST(null as Nullable(String)) AS REF_GENERATION FROM system.tables t "
        "JOIN system.databases d ON system.tables.database = system.databases.name "
        "WHERE t.database LIKE '%' AND t.name LIKE '%'"
        " AND ( (t.engine IN ('" + "','".join(engines) + "')) OR (t.engine NOT IN ('"
        + "','".join(sorted(engine_map)) + "') AND NOT t.engine LIKE 'System%' AND NOT t.engine LIKE 'Async%' "
        "AND t.is_temporary = 0)) AND (t.is_temporary = 0)")
    attrs = re.findall(r"^    ([A-Z][A-Za-z0-9_]*)\(\s*[A-Za-z0-9_.]+\.class,\s*(?:true|false),\s*(?:true|false),"
                       r"\s*(true|false),\s*\d+,\s*(\d+),\s*\d+,\s*(\d+),\s*(\d+)", types, re.M)
    type_info = (
        "SELECT name AS TYPE_NAME, CAST(0 as Int32) AS DATA_TYPE, CAST(attrs.c2 AS Nullable(Int32)) AS PRECISION, "
        "CAST(NULL as Nullable(String)) AS LITERAL_PREFIX, CAST(NULL as Nullable(String)) AS LITERAL_SUFFIX, "
        "CAST(NULL as Nullable(String)) AS CREATE_PARAMS, CAST(0 AS Int16) AS NULLABLE, "
        "CAST(not(dt.case_insensitive) AS Boolean) AS CASE_SENSITIVE, 3::Int16 AS SEARCHABLE, "
        "CAST( not(attrs.c3) AS Boolean) AS UNSIGNED_ATTRIBUTE, false AS FIXED_PREC_SCALE, false AS AUTO_INCREMENT, "
        "if(empty(alias_to), name, alias_to) AS LOCAL_TYPE_NAME, CAST(attrs.c4 AS Nullable(Int16)) AS MINIMUM_SCALE, "
        "CAST(attrs.c5 AS Nullable(Int16)) AS MAXIMUM_SCALE, CAST(0 AS Nullable(Int32)) AS SQL_DATA_TYPE, "
        "CAST(0 AS Nullable(Int32)) AS SQL_DATETIME_SUB, CAST(0 AS Nullable(Int32)) AS NUM_PREC_RADIX "
        "FROM system.data_type_families dt  LEFT JOIN (SELECT * FROM VALUES ( "
        + ",".join(f"('{n}',{p},{sig},{lo},{hi})" for n, sig, p, lo, hi in attrs)
        + ") ) as attrs ON (dt.name = attrs.c1) WHERE alias_to == ''  ORDER BY name")
    print("# getColumns(null, null, 'visits', null)\n" + columns + "\n")
    print("# getTables(null, null, null, {TABLE, VIEW})\n" + tables + "\n")
    print("# getTypeInfo()\n" + type_info)


if __name__ == "__main__":
    main(sys.argv[1])

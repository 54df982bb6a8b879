"""The system and information_schema tables the gateway emulates: their columns and their rows.

Every row is public metadata only — the databases dpch serves, the tables that have a privacy
policy, their columns, types and comments (the ``dp:`` annotations: the policy is public, the data
is not), and what dpch itself accepts (functions, data types). Nothing that depends on the rows
of a table appears: row counts, sizes, checksums, modification times are NULL or zero.

Column lists follow ClickHouse 26.x (``system.columns`` of chdb's own system tables); the
information_schema tables carry each column in lower and UPPER case, as ClickHouse's views do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dpch.sql.functions import TYPED_NAMES, arguments_text, entry_named, uses_text
from dpch.store.quoting import quote_identifier, quote_string

ZERO_UUID = "00000000-0000-0000-0000-000000000000"

#: one table: (database, name, engine, comment, sorting key, create query, [(column, type, comment)])
TableRow = tuple[str, str, str, str, str, str, list[tuple[str, str, str]]]


#: ``dpch.budget`` and ``dpch.releases`` (:mod:`.ledger_views`): view name → [(column, ClickHouse type)]
LEDGER_VIEWS: dict[str, list[tuple[str, str]]] = {
    # one row for the analyst's budget (dataset ''), then one per dataset budget set for it
    "budget": [
        ("analyst", "String"), ("dataset", "String"), ("filter", "String"),
        ("epsilon", "Float64"), ("delta", "Float64"),
        ("spent_epsilon", "Float64"), ("spent_delta", "Float64"),
        ("reserved_epsilon", "Float64"), ("reserved_delta", "Float64"),
        ("remaining_epsilon", "Float64"), ("remaining_delta", "Float64"),
        # ε shorthands for a chart or a stat panel: spent = spent_epsilon, remaining = remaining_epsilon
        ("spent", "Float64"), ("remaining", "Float64"),
        ("releases", "UInt64"), ("locked", "UInt8"), ("guarantee", "String"), ("warning", "String"),
    ],
    # one row per release, oldest first, at its latest ledger status
    "releases": [
        ("release_id", "String"), ("time", "DateTime64(6, 'UTC')"), ("analyst", "String"),
        ("query_hash", "String"), ("mechanism", "String"), ("filter", "String"), ("status", "String"),
        ("epsilon", "Float64"), ("delta", "Float64"), ("rho", "Nullable(Float64)"),
        ("worst_epsilon", "Float64"), ("ex_post", "UInt8"), ("datasets", "Array(String)"),
    ],
}


@dataclass(frozen=True)
class Catalog:
    """Public metadata the gateway may show, for one request."""

    user: str
    database: str
    databases: Sequence[str]
    #: (database) → [(table name, engine, comment, sorting_key, create query, [(column, type, comment)])]
    tables: Callable[[str], list[tuple[str, str, str, str, str, list[tuple[str, str, str]]]]]
    #: rows of system.settings
    settings: Callable[[], list[tuple[Any, ...]]]

    def all_tables(self) -> list[TableRow]:
        """Every table with a policy in every served database."""
        return [(db, *table) for db in self.databases for table in self.tables(db)]


_S, _NS, _NU64 = "String", "Nullable(String)", "Nullable(UInt64)"


def _both_cases(base: list[tuple[str, str]], extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """ClickHouse's information_schema column order: base columns, their UPPER-case twins, then the
    MySQL-compatibility extras and their twins."""
    return [*base, *((n.upper(), t) for n, t in base), *extra, *((n.upper(), t) for n, t in extra)]


#: emulated tables: key → [(column, type)]; system tables by name, information_schema ones prefixed
SCHEMAS: dict[str, list[tuple[str, str]]] = {
    "one": [("dummy", "UInt8")],
    "databases": [("name", _S), ("engine", _S), ("data_path", _S), ("metadata_path", _S), ("uuid", "UUID"),
                  ("engine_full", _S), ("comment", _S)],
    "tables": [("database", _S), ("name", _S), ("uuid", "UUID"), ("engine", _S), ("is_temporary", "UInt8"),
               ("data_paths", "Array(String)"), ("metadata_path", _S),
               ("metadata_modification_time", "DateTime"), ("create_table_query", _S), ("engine_full", _S),
               ("as_select", _S), ("partition_key", _S), ("sorting_key", _S), ("primary_key", _S),
               ("sampling_key", _S), ("storage_policy", _S), ("total_rows", _NU64), ("total_bytes", _NU64),
               ("comment", _S), ("has_own_data", "UInt8")],
    "columns": [("database", _S), ("table", _S), ("name", _S), ("type", _S), ("position", "UInt64"),
                ("default_kind", _S), ("default_expression", _S), ("data_compressed_bytes", "UInt64"),
                ("data_uncompressed_bytes", "UInt64"), ("marks_bytes", "UInt64"), ("comment", _S),
                ("is_in_partition_key", "UInt8"), ("is_in_sorting_key", "UInt8"), ("is_in_primary_key", "UInt8"),
                ("is_in_sampling_key", "UInt8"), ("compression_codec", _S), ("character_octet_length", _NU64),
                ("numeric_precision", _NU64), ("numeric_precision_radix", _NU64), ("numeric_scale", _NU64),
                ("datetime_precision", _NU64)],
    "settings": [("name", _S), ("value", _S), ("changed", "UInt8"), ("description", _S), ("min", _NS),
                 ("max", _NS), ("readonly", "UInt8"), ("type", _S), ("default", _S), ("alias_for", _S),
                 ("is_obsolete", "UInt8")],
    "functions": [("name", _S), ("is_aggregate", "UInt8"), ("case_insensitive", "UInt8"), ("alias_to", _S),
                  ("create_query", _S), ("origin", _S), ("description", _S), ("syntax", _S), ("arguments", _S),
                  ("parameters", _S), ("returned_value", _S), ("examples", _S), ("introduced_in", _S),
                  ("categories", _S)],
    "table_functions": [("name", _S), ("description", _S), ("allow_readonly", "UInt8")],
    "data_type_families": [("name", _S), ("case_insensitive", "UInt8"), ("alias_to", _S)],
    "information_schema.schemata": _both_cases(
        [("catalog_name", _S), ("schema_name", _S), ("schema_owner", _S), ("default_character_set_catalog", _NS),
         ("default_character_set_schema", _NS), ("default_character_set_name", _NS), ("sql_path", _NS)],
        [("default_collation_name", _S), ("default_encryption", _S)]),
    "information_schema.tables": _both_cases(
        [("table_catalog", _S), ("table_schema", _S), ("table_name", _S), ("table_type", _S), ("table_rows", _NU64),
         ("data_length", _NU64), ("index_length", _NU64), ("table_collation", _NS), ("table_comment", _NS)],
        [("engine", _NS), ("version", _NU64), ("row_format", _NS), ("avg_row_length", _NU64),
         ("max_data_length", _NU64), ("data_free", _NU64), ("auto_increment", _NU64),
         ("create_time", "Nullable(DateTime)"), ("update_time", "Nullable(DateTime)"),
         ("check_time", "Nullable(DateTime)"), ("checksum", "Nullable(Int64)"), ("create_options", _NS)]),
    "information_schema.columns": _both_cases(
        [("table_catalog", _S), ("table_schema", _S), ("table_name", _S), ("column_name", _S),
         ("ordinal_position", "UInt64"), ("column_default", _S), ("is_nullable", _S), ("data_type", _S),
         ("character_maximum_length", _NU64), ("character_octet_length", _NU64), ("numeric_precision", _NU64),
         ("numeric_precision_radix", _NU64), ("numeric_scale", _NU64), ("datetime_precision", _NU64),
         ("character_set_catalog", _NS), ("character_set_schema", _NS), ("character_set_name", _NS),
         ("collation_catalog", _NS), ("collation_schema", _NS), ("collation_name", _NS), ("domain_catalog", _NS),
         ("domain_schema", _NS), ("domain_name", _NS), ("extra", _NS), ("column_comment", _S), ("column_type", _S)],
        [("column_key", _S), ("privileges", _S), ("generation_expression", _S), ("srs_id", "Nullable(UInt32)")]),
    "information_schema.views": _both_cases(
        [("table_catalog", _S), ("table_schema", _S), ("table_name", _S), ("view_definition", _S),
         ("check_option", _S), ("is_updatable", _S), ("is_insertable_into", _S), ("is_trigger_updatable", _S),
         ("is_trigger_deletable", _S), ("is_trigger_insertable_into", _S)], []),
}

#: the information_schema tables by their (lower-case) name, as :data:`SCHEMAS` keys
INFORMATION_SCHEMA = {name.split(".", 1)[1]: name for name in SCHEMAS if name.startswith("information_schema.")}

#: the aggregates dpch answers with noise (dpch/sql/aggregates.py; the shell's completion lists
#: the same, dpch/cli/completion.py AGGREGATES)
AGGREGATES = ("count", "countIf", "sum", "sumIf", "avg", "avgIf", "varPop", "varSamp", "stddevPop", "stddevSamp",
              "quantile", "median")

#: data type families a column of a policy table may have and dpch reads (numbers, dates and
#: strings: dpch/policy/model.py is_numeric_type / is_date_type; other columns are public keys)
DATA_TYPE_FAMILIES = (
    "Bool", "Date", "Date32", "DateTime", "DateTime64", "Decimal", "Decimal128", "Decimal32", "Decimal64",
    "Enum16", "Enum8", "FixedString", "Float32", "Float64", "Int16", "Int32", "Int64", "Int8", "LowCardinality",
    "Nullable", "String", "UInt16", "UInt32", "UInt64", "UInt8",
)


def create_table_query(database: str, table: str, engine: str, sorting_key: str, comment: str,
                       columns: Sequence[tuple[str, str, str]]) -> str:
    """The table's DDL as ClickHouse's SHOW CREATE TABLE writes it, with each column's COMMENT
    (the ``dp:`` annotations as stored) and the table's; no engine settings or arguments (an
    engine's arguments may hold credentials: only its name is shown)."""
    lines = []
    for name, ch_type, col_comment in columns:
        line = f"    {quote_identifier(name)} {ch_type}"
        lines.append(line + (f" COMMENT {quote_string(col_comment)}" if col_comment else ""))
    ddl = f"CREATE TABLE {quote_identifier(database)}.{quote_identifier(table)}\n(\n" + ",\n".join(lines) + "\n)"
    ddl += f"\nENGINE = {engine}"
    if engine.endswith("MergeTree"):
        keys = [k.strip() for k in sorting_key.split(",") if k.strip()]
        ddl += "\nORDER BY " + (keys[0] if len(keys) == 1 else f"({', '.join(keys)})" if keys else "tuple()")
    return ddl + (f"\nCOMMENT {quote_string(comment)}" if comment else "")


def rows(name: str, catalog: Catalog) -> list[tuple[Any, ...]]:
    """The rows of the emulated table ``name`` (a :data:`SCHEMAS` key), in its column order."""
    if name in _BY_DICT:
        columns = [c for c, _ in SCHEMAS[name]]
        return [tuple(row.get(c.lower()) for c in columns) for row in _BY_DICT[name](catalog)]
    return _ROWS[name](catalog)


def _databases(catalog: Catalog) -> list[tuple[Any, ...]]:
    return [(db, "Atomic", "", "", ZERO_UUID, "Atomic", "") for db in catalog.databases]


def _tables(catalog: Catalog) -> list[tuple[Any, ...]]:
    return [(db, table, ZERO_UUID, engine, 0, [], "", "1970-01-01 00:00:00", create, engine, "", "", sorting_key,
             sorting_key, "", "", None, None, comment, 1)
            for db, table, engine, comment, sorting_key, create, _ in catalog.all_tables()]


def _columns(catalog: Catalog) -> list[tuple[Any, ...]]:
    result: list[tuple[Any, ...]] = []
    for db, table, _, _, sorting_key, _, cols in catalog.all_tables():
        keys = {k.strip() for k in sorting_key.split(",")}
        for pos, (col, ch_type, col_comment) in enumerate(cols, start=1):
            result.append((db, table, col, ch_type, pos, "", "", 0, 0, 0, col_comment, 0, int(col in keys),
                           int(col in keys), 0, "", None, None, None, None, None))
    return result


def _functions(_: Catalog) -> list[tuple[Any, ...]]:
    """dpch's functions: ``description`` says where each may appear and why no row can make it raise,
    ``arguments`` what each argument accepts (any value, constant only, guarded; the registry,
    dpch/sql/functions.py)."""
    rows: list[tuple[str, int, str, str]] = []
    for name in TYPED_NAMES:
        entry = entry_named(name)
        if entry is None:
            rows.append((name, 0, "dpch: allowed in a DP query", ""))
        else:
            rows.append((name, 0, f"dpch: {uses_text(entry)}. {entry.why}", arguments_text(entry)))
    rows += [(n, 1, "dpch: a noisy aggregate (its sensitivity comes from the column bounds)", "")
             for n in AGGREGATES]
    return [(n, agg, 0, "", "", "System", text, "", arguments, "", "", "", "", "")
            for n, agg, text, arguments in sorted(rows, key=lambda r: r[0].lower())]


def _schemata(catalog: Catalog) -> list[dict[str, Any]]:
    return [{"catalog_name": db, "schema_name": db, "schema_owner": "default", "default_collation_name": "",
             "default_encryption": ""} for db in catalog.databases]


def _info_tables(catalog: Catalog) -> list[dict[str, Any]]:
    return [{"table_catalog": db, "table_schema": db, "table_name": table, "table_type": "BASE TABLE",
             "table_comment": comment, "engine": engine}
            for db, table, engine, comment, _, _, _ in catalog.all_tables()]


def _info_columns(catalog: Catalog) -> list[dict[str, Any]]:
    result = []
    for db, table, _, _, _, _, cols in catalog.all_tables():
        for pos, (col, ch_type, col_comment) in enumerate(cols, start=1):
            result.append({"table_catalog": db, "table_schema": db, "table_name": table, "column_name": col,
                           "ordinal_position": pos, "column_default": "",
                           "is_nullable": "YES" if "Nullable(" in ch_type else "NO", "data_type": ch_type,
                           "column_comment": col_comment, "column_type": ch_type, "column_key": "",
                           "privileges": "", "generation_expression": ""})
    return result


_ROWS: dict[str, Callable[[Catalog], list[tuple[Any, ...]]]] = {
    "one": lambda _: [(0,)],
    "settings": lambda catalog: catalog.settings(),
    "databases": _databases,
    "tables": _tables,
    "columns": _columns,
    "functions": _functions,
    "table_functions": lambda _: [],  # dpch reads no table function: none is offered
    "data_type_families": lambda _: [(n, 0, "") for n in DATA_TYPE_FAMILIES],
}
#: information_schema tables: rows as dicts by lower-case column name (each UPPER twin takes the
#: same value; a column not given is NULL — row counts, sizes, times are never given)
_BY_DICT: dict[str, Callable[[Catalog], list[dict[str, Any]]]] = {
    "information_schema.schemata": _schemata,
    "information_schema.tables": _info_tables,
    "information_schema.columns": _info_columns,
    "information_schema.views": lambda _: [],
}

"""``dpch load``: a CSV or Parquet file into a new table with ``dp:`` annotations.

ClickHouse reads the file itself (``file()`` table function: an owner-side tool, never
reachable from analyst SQL) and infers the column types; dpch adds the annotations.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpch.errors import ConfigError
from dpch.store.engine import Engine, check_identifier
from dpch.store.quoting import quote_identifier, quote_string

_FORMATS = {".csv": "CSVWithNames", ".tsv": "TSVWithNames", ".parquet": "Parquet",
            ".jsonl": "JSONEachRow", ".ndjson": "JSONEachRow"}


def load_file(
    engine: Engine,
    file: str,
    *,
    table: str,
    privacy_unit: str,
    max_rows_per_unit: int | None,
    unique_units: bool,
    bounds: tuple[str, ...],
    public: tuple[str, ...],
    replace: bool,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Creates ``table`` from ``file`` with the given annotations; returns the row count.

    ``progress(done, total)``, when given, is called with the rows written so far: first
    ``(0, total)`` (ClickHouse counts the file's rows first, one extra read), then as the insert
    commits its blocks, last ``(total, total)``."""
    # start-up: importing dpch.policy loads the policy resolver (sqlglot); only `dpch load` needs it
    from dpch.policy.model import base_type

    check_identifier(table, "table")
    path = Path(file).resolve()
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ConfigError(f"cannot tell the format of {path.name}", hint=f"use one of {sorted(_FORMATS)}")
    if max_rows_per_unit is None and not unique_units:
        raise ConfigError(
            "say how many rows one unit may contribute",
            hint="add --max-rows-per-unit K (rows beyond K per unit are ignored), or --unique-units",
        )
    source = f"file({quote_string(str(path))}, {fmt})"
    columns = engine.query_rows(f"DESCRIBE {source}")
    types = {row[0]: row[1] for row in columns}
    comments: dict[str, dict[str, Any]] = {name: {} for name in types}
    if privacy_unit not in types:
        raise ConfigError(f"the file has no column {privacy_unit!r}", hint=f"columns are {sorted(types)}")
    for spec in bounds:
        name, _, rng = spec.partition("=")
        lo, _, hi = rng.partition(":")
        try:
            comments[_known(name, types)]["bounds"] = [_number(lo), _number(hi)]
        except ValueError:
            raise ConfigError(f"--bounds {spec}: expected COL=LO:HI with numbers") from None
    for spec in public:
        name, eq, values = spec.partition("=")
        entry = comments[_known(name, types)]
        entry["public"] = True
        if eq:
            entry["values"] = [v.strip() for v in values.split(",") if v.strip()]
    table_items = [f"privacy_unit={privacy_unit}"]
    if max_rows_per_unit is not None:
        table_items.append(f"max_rows_per_unit={max_rows_per_unit}")
    if unique_units:
        table_items.append("unique_units")

    qualified = engine.table(table)
    if engine.table_exists(table):
        if not replace:
            raise ConfigError(f"table {table} already exists", hint="pass --replace to overwrite it")
        engine.command(f"DROP TABLE {qualified}")
    definitions = []
    for name, ch_type in types.items():
        if name == privacy_unit:
            ch_type = base_type(ch_type)
        comment = _annotation(comments[name])
        suffix = f" COMMENT {quote_string(comment)}" if comment else ""
        definitions.append(f"{quote_identifier(name)} {ch_type}{suffix}")
    engine.command(
        f"CREATE TABLE {qualified} ({', '.join(definitions)}) ENGINE = MergeTree"
        f" ORDER BY {quote_identifier(privacy_unit)}"
        f" COMMENT {quote_string('dp: ' + ', '.join(table_items))}"
    )
    insert = f"INSERT INTO {qualified} SELECT * FROM {source}"
    if progress is None:
        engine.command(insert)
    else:
        _insert_reporting(engine, insert, qualified, engine.query_rows(f"SELECT count() FROM {source}")[0][0],
                          progress)
    rows = engine.query_rows(f"SELECT count() FROM {qualified}")[0][0]
    if progress is not None:
        progress(rows, rows)
    return rows


#: seconds between two counts of the rows committed so far (a progress bar's refresh)
POLL_SECONDS = 0.25


def _insert_reporting(engine: Engine, insert: str, table: str, total: int,
                      progress: Callable[[int, int], None]) -> None:
    """Runs ``insert`` in a worker thread (its own client of the engine's pool) while this thread
    reports the table's committed row count. Blocks of about 2% of the file are committed one at
    a time, so the count moves (one INSERT … SELECT otherwise commits once, at the end)."""
    progress(0, total)
    block = max(65_536, total // 50)
    failure: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            engine.command(f"{insert} SETTINGS min_insert_block_size_rows = {block}, max_insert_block_size = {block}")
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=work, name="dpch-load", daemon=True)
    worker.start()
    while not done.wait(POLL_SECONDS):
        progress(min(engine.query_rows(f"SELECT count() FROM {table}")[0][0], total), total)
    worker.join()
    if failure:
        raise failure[0]


def _annotation(spec: dict) -> str:
    if not spec:
        return ""
    items = []
    for key, value in spec.items():
        items.append(key if value is True else f"{key}={json.dumps(value)}")
    return "dp: " + ", ".join(items)


def _known(name: str, types: dict[str, str]) -> str:
    if name not in types:
        raise ConfigError(f"the file has no column {name!r}", hint=f"columns are {sorted(types)}")
    return name


def _number(text: str) -> float | int:
    value = float(text)
    return int(value) if value.is_integer() else value


"""Reading a policy TOML file, for tables whose DDL you cannot change.

    [tables.visits]
    privacy_unit = "user_id"
    max_rows_per_unit = 10

    [tables.visits.columns]
    age = { bounds = [0, 120] }
    region = { public = true, values = ["north", "south", "east", "west"] }

Keys are the same as in ``dp:`` annotations and override them key by key. A deployment can
also choose its privacy filter here (a connect option or the data owner's budget setting wins):

    [privacy]
    filter = "zcdp"
    filter_options = { delta_prime = 5e-7 }
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from dpch.errors import PolicyError


def read_privacy_settings(path: str | Path) -> dict[str, Any]:
    """The ``[privacy]`` table of a policy file (``filter``, ``filter_options``), or ``{}``."""
    data = tomllib.loads(Path(path).read_text())
    privacy = data.get("privacy") or {}
    unknown = set(privacy) - {"filter", "filter_options"}
    if unknown:
        raise PolicyError(f"{path}: unknown [privacy] key(s) {sorted(unknown)}",
                          hint="[privacy] takes filter and filter_options")
    if "filter_options" in privacy and not isinstance(privacy["filter_options"], dict):
        raise PolicyError(f"{path}: [privacy] filter_options must be a table")
    return privacy


def read_policy_toml(path: str | Path) -> dict[str, dict[str, Any]]:
    """Returns ``{table: {"table": {...}, "columns": {column: {...}}}}``."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise PolicyError(f"policy file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"policy file {path} is not valid TOML: {exc}") from None
    return parse_policy_mapping(data, source=str(path))


def parse_policy_mapping(data: dict[str, Any], *, source: str) -> dict[str, dict[str, Any]]:
    """Validates the shape of a policy mapping (from TOML or from Python)."""
    unknown = set(data) - {"tables", "privacy"}
    if unknown:
        raise PolicyError(f"{source}: unknown top-level key(s) {sorted(unknown)}; expected [tables.NAME]")
    result: dict[str, dict[str, Any]] = {}
    for table, spec in (data.get("tables") or {}).items():
        if not isinstance(spec, dict):
            raise PolicyError(f"{source}: tables.{table} must be a table of settings")
        spec = {k.lower(): v for k, v in spec.items()}
        columns = spec.pop("columns", {}) or {}
        if not isinstance(columns, dict) or not all(isinstance(v, dict) for v in columns.values()):
            raise PolicyError(
                f"{source}: tables.{table}.columns must map column names to settings",
                hint="e.g. age = { bounds = [0, 120] }",
            )
        result[table] = {
            "table": spec,
            "columns": {c: {k.lower(): v for k, v in s.items()} for c, s in columns.items()},
        }
    return result

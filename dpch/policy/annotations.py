"""Parsing ``dp:`` annotations from ClickHouse COMMENTs.

Syntax: a comment that starts with ``dp:`` followed by comma-separated items, each a flag
(``public``) or ``key=value``, where a value is a JSON literal (``[0, 120]``, ``["a", "b"]``,
``10``, ``"x"``) or a bare word (``user_id``). Commas inside brackets or quotes do not split.

    dp: privacy_unit=user_id, max_rows_per_unit=10
    dp: public, values=["north", "south"]
    dp: bounds=[0, 1000]

Comments that do not start with ``dp:`` are ordinary comments and are ignored.
"""

from __future__ import annotations

import json
from typing import Any

from dpch.errors import PolicyError

PREFIX = "dp:"


def is_annotation(comment: str) -> bool:
    return comment.strip().lower().startswith(PREFIX)


def parse_annotation(comment: str, *, where: str) -> dict[str, Any]:
    """Parses one ``dp:`` comment into a dict (flags map to ``True``).

    ``where`` names the table or column, for error messages.
    """
    if not is_annotation(comment):
        return {}
    body = comment.strip()[len(PREFIX):]
    result: dict[str, Any] = {}
    for item in _split_top_level(body, where):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            key, value = item, True
        else:
            key, raw = (part.strip() for part in item.split("=", 1))
            value = _parse_value(raw, key=key, where=where)
        key = key.strip().lower()
        if not key.replace("_", "").isalnum():
            raise PolicyError(f"annotation of {where}: {key!r} is not a valid key")
        if key in result:
            raise PolicyError(f"annotation of {where}: {key!r} is given twice")
        result[key] = value
    return result


def without_item(comment: str, key: str) -> str:
    """``comment`` (a ``dp:`` annotation) without ``key``; the other items are kept as written."""
    body = comment.strip()[len(PREFIX):]
    items = [item.strip() for item in _split_top_level(body, "the comment")
             if item.strip() and item.split("=", 1)[0].strip().lower() != key]
    return f"{PREFIX} " + ", ".join(items)


def _parse_value(raw: str, *, key: str, where: str) -> Any:
    if not raw:
        raise PolicyError(f"annotation of {where}: {key}= has no value")
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        if raw[0] in "[{\"'":
            raise PolicyError(
                f"annotation of {where}: cannot read the value of {key}",
                hint='write lists as JSON, e.g. values=["a", "b"] or bounds=[0, 100]',
            ) from None
        return raw


def _split_top_level(text: str, where: str) -> list[str]:
    items: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0 or quote:
        raise PolicyError(f"annotation of {where} has an unclosed bracket or quote")
    items.append(text[start:])
    return items

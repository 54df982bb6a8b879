"""Tab completion for ``dpch shell``: SQL keywords, tables and columns from the privacy policy,
the ClickHouse functions dpch allows, dpch's settings, and the shell's backslash commands."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from dpch.sql.functions import TYPED_NAMES
from dpch.sql.settings import SETTING_NAMES

KEYWORDS = (
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "OFFSET", "AND", "OR", "NOT",
    "IN", "BETWEEN", "LIKE", "ILIKE", "IS NULL", "IS NOT NULL", "AS", "JOIN", "LEFT JOIN", "ANY JOIN", "ON",
    "USING", "DISTINCT", "SETTINGS", "EXPLAIN DP", "ASC", "DESC", "CASE", "WHEN", "THEN", "ELSE", "END",
)

#: aggregates dpch answers (dpch/sql/aggregates.py), in ClickHouse's spelling
AGGREGATES = ("count", "countIf", "sum", "sumIf", "avg", "avgIf", "varPop", "varSamp", "stddevPop",
              "stddevSamp", "quantile", "median")

FUNCTIONS = tuple(sorted(TYPED_NAMES, key=str.lower))  # the totality registry, dpch/sql/functions.py

COMMANDS = ("\\budget", "\\tables", "\\policy", "\\explain", "\\refine", "\\format", "\\intervals", "\\set",
            "\\unset", "\\history", "\\help", "\\q")
SHELL_SETTINGS = ("confirm_share",)

_WORD = re.compile(r"[\w.\\]+$")
_SOURCES = re.compile(r"\b(?:FROM|JOIN)\s+`?([\w.]+)`?(?:\s+(?:AS\s+)?(?!(?:WHERE|GROUP|ORDER|JOIN|LEFT|ANY|INNER|"
                      r"ON|USING|LIMIT|SETTINGS|HAVING|FORMAT)\b)(\w+))?", re.IGNORECASE)
_AFTER_TABLE = re.compile(r"\b(FROM|JOIN|\\policy)\s+[\w.]*$", re.IGNORECASE)

Schema = Callable[[], dict[str, list[str]]]


class SqlCompleter(Completer):
    """Completes the word before the cursor. ``schema()`` maps each table with a policy to its
    columns; it is called lazily (the first Tab), so the shell starts without reading it."""

    def __init__(self, schema: Schema) -> None:
        self._schema = schema

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        before = document.text_before_cursor
        match = _WORD.search(before)
        word = match.group(0) if match else ""
        stripped = before.lstrip()
        if stripped.startswith("\\"):
            yield from self._command(stripped, word)
            return
        schema = self._schema()
        if "." in word:  # alias.column or table.column
            qualifier, prefix = word.rsplit(".", 1)
            table = _aliases(document.text).get(qualifier.lower(), qualifier)
            yield from _matching(prefix, schema.get(table, ()), "column")
            return
        if _AFTER_TABLE.search(before):
            yield from _matching(word, schema, "table")
            return
        used = [t for t in _aliases(document.text).values() if t in schema]
        columns = [c for t in (used or schema) for c in schema[t]]
        yield from _matching(word, dict.fromkeys(columns), "column")
        yield from _matching(word, AGGREGATES, "aggregate")
        yield from _matching(word, FUNCTIONS, "function")
        if re.search(r"\bSETTINGS\b", before, re.IGNORECASE):
            yield from _matching(word, SETTING_NAMES, "setting")
        yield from _matching(word, KEYWORDS, "keyword", match_case=True)
        yield from _matching(word, schema, "table")

    def _command(self, line: str, word: str) -> Iterator[Completion]:
        name, _, rest = line.partition(" ")
        if not _:
            yield from _matching(word, COMMANDS, "command")
        elif name == "\\policy":
            yield from _matching(word, self._schema(), "table")
        elif name == "\\format":
            yield from _matching(word, ("table", "json", "csv"), "format")
        elif name == "\\intervals":
            yield from _matching(word, ("half", "full"), "intervals")
        elif name in ("\\set", "\\unset") and " " not in rest.strip():
            yield from _matching(word, (*SETTING_NAMES, *SHELL_SETTINGS), "setting")
        elif name == "\\explain":
            yield from self.get_completions(Document(rest), CompleteEvent())


def _aliases(text: str) -> dict[str, str]:
    """{alias or table name (lowercase): table} for the FROM/JOIN sources in ``text``."""
    out: dict[str, str] = {}
    for table, alias in _SOURCES.findall(text):
        table = table.split(".")[-1]
        out[table.lower()] = table
        if alias:
            out[alias.lower()] = table
    return out


def _matching(prefix: str, candidates: Iterable[str], meta: str, *, match_case: bool = False) -> Iterator[Completion]:
    low = prefix.lower()
    for candidate in candidates:
        if candidate.lower().startswith(low) and candidate.lower() != low:
            text = candidate.lower() if match_case and prefix and prefix.islower() else candidate
            yield Completion(text, start_position=-len(prefix), display_meta=meta)

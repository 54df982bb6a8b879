"""Parse: SQL text → one sqlglot SELECT tree plus dpch's settings.

Rejects, before any analysis, what is not a single read-only SELECT: several statements,
DDL/DML, UNION, INTO OUTFILE, FORMAT. Settings are split off here and checked in
:mod:`.settings`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sqlglot import exp
from sqlglot.dialects.clickhouse import ClickHouse
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError

from dpch.errors import ParseError, QueryRejected
from dpch.sql import limits, sqlglot_log

sqlglot_log.install()  # sqlglot's warnings while dpch parses or renders stay off the user's stderr


class DpchClickHouse(ClickHouse):
    """ClickHouse as sqlglot reads it, rendered back *as written* where sqlglot's ClickHouse generator
    would change the meaning. sqlglot parses ``toStartOfYear(d)`` into a generic truncation and renders
    ``dateTrunc('YEAR', d)``, which returns Date, not Date32: every date before 1970 becomes 1970-01-01.
    Emitted SQL is rendered from trees (docs/design.md rule 4), so such a rename would change answers."""

    class Generator(ClickHouse.Generator):  # type: ignore[misc,valid-type]
        TRANSFORMS = {
            **ClickHouse.Generator.TRANSFORMS,
            exp.TimestampTrunc: lambda gen, node: _to_start_of(gen, node),
        }


def _to_start_of(gen: Any, node: exp.TimestampTrunc) -> str:
    """``toStartOfDay(x[, zone])`` and its kin, with the time zone kept: sqlglot's own rendering drops it,
    which answers in UTC days what the analyst asked in Tokyo days (issue 24)."""
    unit = node.args.get("unit")
    name = {"WEEK": "toMonday"}.get(unit.name.upper(), f"toStartOf{unit.name.capitalize()}") if unit else "toDate"
    zone = node.args.get("zone")
    return f"{name}({gen.sql(node, 'this')}{', ' + gen.sql(zone) if zone is not None else ''})"


#: the dialect dpch reads analysts' SQL in and renders emitted SQL with
DIALECT = DpchClickHouse

_INTO_OUTFILE = re.compile(r"\bINTO\s+OUTFILE\b", re.IGNORECASE)
_EXPLAIN_DP = re.compile(r"^\s*EXPLAIN\s+DP\s+", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedQuery:
    """A single SELECT, its dpch settings, and a hash of its normalized text."""

    text: str
    select: exp.Select
    settings: dict[str, Any]
    #: ``EXPLAIN DP SELECT ...``: show the plan and cost instead of running (spends nothing)
    explain: bool = False

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the normalized SQL (kept in the ledger instead of the text); computed once."""
        normalized = self.select.sql(dialect=DIALECT, normalize=True)
        return hashlib.sha256(normalized.encode()).hexdigest()


_MACRO = re.compile(r"\$\{?__?\w+")
_CLASS = re.compile(r"<class '(?:[\w.]+\.)?(\w+)'>")
_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: .*?>")


def plain_description(desc: str) -> str:
    """sqlglot's parse error in the analyst's words: no Python class names or token dumps."""
    desc = re.sub(r"Required keyword: '(\w+)' missing for <class '(?:[\w.]+\.)?(\w+)'>",
                  lambda m: f"the {m.group(2).upper()} clause or expression is incomplete", desc)
    desc = _TOKEN.sub(lambda m: "the end of the query" if m.group(1) == "SENTINEL" else repr(m.group(2)), desc)
    return _CLASS.sub(lambda m: m.group(1).upper(), desc)


def parse_query(text: str) -> ParsedQuery:
    """Parses ``text`` as one ClickHouse SELECT; raises a :class:`QueryRejected` otherwise, and for
    a query past the planner's limits (:mod:`.limits`: size, nesting, depth, nodes) before the work
    they bound is done."""
    limits.check_text(text)
    if not text or not text.strip().rstrip(";").strip():
        raise ParseError("the query is empty", hint="write a SELECT statement")
    explain_prefix = _EXPLAIN_DP.match(text)
    explain = explain_prefix is not None
    if explain_prefix is not None:
        text = text[explain_prefix.end():]
    if _INTO_OUTFILE.search(text):
        raise QueryRejected(
            "INTO OUTFILE is not allowed: dpch returns results only to you",
            hint="remove INTO OUTFILE and save the released result client-side",
        )
    try:
        dialect = DIALECT()
        tokens = dialect.tokenize(text)
        limits.check_nesting(tokens)  # the parser's recursion follows the brackets
        statements = [s for s in dialect.parser().parse(tokens, text) if s is not None]
    except RecursionError:  # a shape the nesting count does not see (e.g. a long run of NOT)
        raise limits.too_deep() from None
    except SqlglotParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" near line {first.get('line')}, column {first.get('col')}" if first else ""
        desc = plain_description(first.get("description", "invalid syntax") if first else "invalid syntax")
        raise ParseError(
            f"cannot parse the query{where}: {desc}",
            hint="dpch reads ClickHouse SQL; check the syntax",
        ) from None
    except TokenError:
        macro = _MACRO.search(text)
        if macro is not None:
            raise ParseError(f"cannot parse the query: {macro.group(0)} is a macro your tool did not expand",
                             hint="let the tool expand its macros (e.g. set a time range), or write the "
                                  "expression itself") from None
        raise ParseError("cannot parse the query: a quote is not closed, or it contains a character SQL "
                         "does not allow", hint="close every quote and check the query's characters") from None
    if len(statements) != 1:
        raise QueryRejected(
            f"expected one statement, got {len(statements)}",
            hint="send one SELECT at a time",
        )
    tree = statements[0]
    if isinstance(tree, exp.SetOperation):
        raise QueryRejected(
            f"{tree.key.upper()} is not supported",
            hint="run each SELECT as its own query; each is charged separately",
        )
    if not isinstance(tree, exp.Select):
        kind = tree.key.upper() if not isinstance(tree, exp.Command) else str(tree.this).upper()
        raise QueryRejected(
            f"only SELECT queries are allowed, got {kind}",
            hint="dpch is read-only; the data owner manages tables directly",
        )
    if tree.args.get("format") is not None:
        raise QueryRejected(
            "the FORMAT clause is not allowed in dpch queries",
            hint="choose the output format with the client (e.g. --format json)",
        )
    balanced = limits.balance_connectors(tree)
    assert isinstance(balanced, exp.Select)  # only AND/OR lists are rebuilt, never the SELECT itself
    tree = balanced
    limits.check_tree(tree)
    settings = _settings(tree)
    tree = tree.copy()
    tree.set("settings", None)
    return ParsedQuery(text=text, select=tree, settings=settings, explain=explain)


def _settings(tree: exp.Select) -> dict[str, Any]:
    """The SETTINGS clause as ``{name as written: value}``. dpch matches setting names without regard
    to case (:func:`dpch.sql.settings.option_overrides`), so a name given twice in any spelling
    (``DP_EPSILON = 1, dp_epsilon = 0.1``) is refused here: which one won would be invisible."""
    result: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for item in tree.args.get("settings") or []:
        if not (isinstance(item, exp.EQ) and isinstance(item.this, exp.Column)):
            raise QueryRejected("cannot read the SETTINGS clause", hint="write SETTINGS name = value")
        name = item.this.name
        value = item.expression
        if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
            literal: Any = -_literal(value.this)
        elif isinstance(value, exp.Literal):
            literal = _literal(value)
        else:
            raise QueryRejected(f"SETTINGS {name} must be a number or a quoted string")
        first = spelled.setdefault(name.lower(), name)
        if first != name or name in result:
            both = f" (as {first} and {name})" if first != name else ""
            raise QueryRejected(f"SETTINGS {name.lower()} is given twice{both}",
                                hint="give each setting once; setting names are matched without regard to case")
        result[name] = literal
    return result


def _literal(lit: exp.Literal) -> Any:
    if lit.is_string:
        return lit.this
    text = lit.this
    try:
        return int(text)
    except ValueError:
        return float(text)

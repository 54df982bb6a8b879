"""Limits on the planner itself (issue 24, "Limits on the planner itself"; dpch/sql/limits.py).

A query past a limit is refused with a QueryRejected naming the limit, before anything is read or
charged: 300 nested ``addDays`` raised RecursionError, and a 68 KB chain of ``+ INTERVAL 1 DAY`` cost
more than 30 s of CPU in the quadratic walk of time_constants. Within the limits, planning fits in
Python's stack even when dpch is called from deep in another program's stack; long AND/OR lists (a
BI tool's multi-value filter) are not limited by depth; and every BI query of the fixtures is inside
the limits."""

from __future__ import annotations

import glob
import json
import tomllib
from collections.abc import Callable, Iterator

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

import dpch
from dpch.sql import limits
from dpch.sql.parse import DIALECT, parse_query
from dpch.sql.time_constants import fold_time_constants
from tests.helpers import ROOT, query_keyed, refused_uncharged


@pytest.fixture
def session(connect, visits_db, database):
    s = connect(default_budget=dpch.Budget(100.0, 1e-6))
    s.engine.command(f"CREATE TABLE {s.engine.table('visits')} AS {visits_db}.visits")
    s.engine.command(f"INSERT INTO {s.engine.table('visits')} SELECT * FROM {visits_db}.visits LIMIT 20000")
    return s


def _nested(depth: int) -> str:
    text = "toDate('2026-01-01')"
    for _ in range(depth):
        text = f"addDays({text}, 1)"
    return text


def test_300_nested_calls_are_refused_at_once_naming_the_limit(session):
    err = refused_uncharged(session, f"SELECT count() FROM visits WHERE visit_date > {_nested(300)}")
    assert f"at most {limits.MAX_NESTING}" in err.message and "301 levels" in err.message
    assert "addDays(d, 300)" in (err.hint or "")


@pytest.mark.parametrize("start", ["visit_date", "now()", "toDate('2026-01-01')"])
def test_a_68_kb_chain_of_intervals_is_refused_at_once_naming_the_limit(session, start):
    chain = start + " + INTERVAL 1 DAY" * 4250
    assert len(chain) > 68_000
    err = refused_uncharged(session, f"SELECT count() FROM visits WHERE {chain} > toDate('2026-01-01')")
    assert f"more than {limits.MAX_DEPTH} levels" in err.message
    assert "INTERVAL 300 DAY" in (err.hint or "")


def test_a_text_over_the_size_limit_is_refused(session):
    big = "x" * (limits.MAX_QUERY_BYTES + 1)
    err = refused_uncharged(session, f"SELECT count() FROM visits WHERE region = '{big}'")
    assert "256 KiB" in err.message
    # the size is counted in UTF-8 bytes: 70 000 four-byte characters are 280 000 bytes
    err = refused_uncharged(session, f"SELECT count() FROM visits WHERE region = '{'😀' * 70_000}'")
    assert "256 KiB" in err.message


def test_a_query_with_too_many_parts_is_refused(session):
    values = ", ".join(str(i % 90) for i in range(limits.MAX_NODES))
    err = refused_uncharged(session, f"SELECT count() FROM visits WHERE age IN ({values})")
    assert f"more than {limits.MAX_NODES:,} parts" in err.message


def test_too_many_time_constants_are_refused_before_any_is_evaluated(session):
    dates = ", ".join(f"toDate('2026-01-01') + INTERVAL {i} DAY" for i in range(limits.MAX_TIME_CONSTANTS + 1))
    err = refused_uncharged(session, f"SELECT count() FROM visits WHERE visit_date IN ({dates})")
    assert f"{limits.MAX_TIME_CONSTANTS + 1} date or time constants" in err.message


def test_a_long_or_list_plans_like_in_and_renders_as_written(session):
    """Metabase writes a multi-value filter as ``x = 1 OR x = 2 OR …``: 2 000 terms are one level of
    ClickHouse's or(…), rebalanced for dpch's planner, and give the exact answer of the IN list."""
    terms = [f"age = {18 + i % 70}" for i in range(2000)]
    sql = "SELECT count() FROM visits WHERE " + " OR ".join(terms)
    assert parse_query(sql).select.sql(dialect=DIALECT) == sql  # the same condition, the same text
    emitted = session.explain(sql).sql
    listed = session.explain("SELECT count() FROM visits WHERE age IN (" + ", ".join(
        str(18 + i % 70) for i in range(2000)) + ")").sql
    assert query_keyed(session.engine, emitted) == query_keyed(session.engine, listed)  # exact answers
    release = session.query(sql, epsilon=0.5)
    assert release.cost.epsilon == pytest.approx(0.5)


def test_balancing_keeps_the_terms_in_order_and_leaves_short_lists_alone():
    tree = sqlglot.parse_one("SELECT 1 FROM t WHERE " + " AND ".join(f"c{i} = {i}" for i in range(100))
                             + " AND (a OR b)", read=DIALECT)
    before = tree.sql(dialect=DIALECT)
    balanced = limits.balance_connectors(tree)
    assert balanced.sql(dialect=DIALECT) == before
    where = balanced.args["where"].this
    assert isinstance(where, exp.And) and isinstance(where.this, exp.And) and isinstance(where.expression, exp.And)
    short = sqlglot.parse_one("SELECT 1 FROM t WHERE a AND b AND c", read=DIALECT)
    assert repr(limits.balance_connectors(short.copy())) == repr(short)


def test_folding_time_constants_is_linear_in_the_tree(monkeypatch):
    """The old walk asked every node whether its whole subtree was a constant: n²/2 node visits for
    a chain of n (30 s at 68 KB). Counted in visits of a node's children, not in seconds."""
    visits = 0
    real = exp.Expression.iter_expressions  # the node classes' own (sqlglot 30: not Expr's)

    def counting(self, reverse=False):
        nonlocal visits
        visits += 1
        return real(self, reverse)

    chain = sqlglot.parse_one("SELECT 1 FROM t WHERE " + "d" + " + INTERVAL 1 DAY" * 2000 + " > 0", read=DIALECT)
    nodes = sum(1 for _ in chain.walk())
    monkeypatch.setattr(exp.Expression, "iter_expressions", counting)
    folded, _ = fold_time_constants(chain, None)  # no constant in it: nothing to evaluate
    monkeypatch.undo()
    assert folded is chain
    assert nodes <= visits <= 6 * nodes, f"{visits} visits of {nodes} nodes: not linear"


def _deep_stack(frames: int, call: Callable[[], object]) -> object:
    """``call()`` with ``frames`` more frames under it: dpch called from deep in a program."""
    return call() if frames == 0 else _deep_stack(frames - 1, call)


#: query shapes that drive the planner's recursion, n levels deep
SHAPES: dict[str, Callable[[int], str]] = {
    "nested calls": lambda n: "SELECT sum(" + "abs(" * n + "spend" + ")" * n + ") FROM visits",
    "nested if": lambda n: "SELECT sum(" + "if(age > 30, " * n + "spend" + ", 0)" * n + ") FROM visits",
    "nested CASE": lambda n: ("SELECT sum(" + "CASE WHEN age > 30 THEN " * n + "spend" + " ELSE 0 END" * n
                              + ") FROM visits"),
    "brackets in WHERE": lambda n: "SELECT count() FROM visits WHERE " + "(" * n + "age" + ")" * n + " > 30",
    "subqueries": lambda n: "SELECT count() FROM " + "(SELECT * FROM " * n + "visits" + ")" * n,
    "chain of +": lambda n: "SELECT sum(spend" + " + 1" * n + ") FROM visits",
    "chain of + and *": lambda n: "SELECT sum(spend" + " + 1 * 2" * n + ") FROM visits",
    "chain of intervals": lambda n: "SELECT count() FROM visits WHERE visit_date" + " + INTERVAL 1 DAY" * n
                                    + " > toDate('2026-01-01')",
    "chain of NOT": lambda n: "SELECT count() FROM visits WHERE " + "NOT " * n + "(age > 30)",
    "chain of minus": lambda n: "SELECT sum(" + "- " * n + "spend) FROM visits",
}


def _within(sql: str) -> bool:
    try:
        parse_query(sql)
    except dpch.QueryRejected as exc:
        if "planner" in exc.message:
            return False
        raise
    return True


def _largest_within(shape: Callable[[int], str]) -> int:
    n = 1
    while _within(shape(n + 1)):
        n += 1
        assert n < 500, "no limit refuses this shape"
    return n


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_within_the_limits_planning_fits_the_stack_of_a_deep_caller(session, name):
    """The largest query of each shape that passes the limits plans, renders and is probed with 200
    frames of the caller's under it (a web framework, a notebook, pytest: the gateway's worker has 13);
    one level more is refused by a limit, not by RecursionError."""
    shape = SHAPES[name]
    n = _largest_within(shape)
    assert n >= 16, f"{name}: only {n} levels pass the limits"
    try:
        _deep_stack(200, lambda: session.explain(shape(n)))
    except dpch.QueryRejected as exc:
        assert "planner" not in exc.message, f"{name} at {n} levels: {exc}"
    err = refused_uncharged(session, shape(n + 1))
    assert "planner" in err.message


def _fixture_sql() -> Iterator[tuple[str, str]]:
    def strings(obj: object) -> Iterator[str]:
        if isinstance(obj, dict):
            for key, value in obj.items():
                if key in ("sql", "probe", "probe_unfiltered") and isinstance(value, str):
                    yield value
                else:
                    yield from strings(value)
        elif isinstance(obj, list):
            for value in obj:
                yield from strings(value)

    for path in ["dpch/fixtures/corpus.toml", "tests/sql/fixtures/bi_time.toml",
                 *sorted(glob.glob(str(ROOT / "tests/server/replays/*.toml")))]:
        with open(ROOT / path, "rb") as f:
            for sql in strings(tomllib.load(f)):
                yield str(path).rsplit("/", 1)[-1], sql
    with open(ROOT / "tests/sql/fixtures/emitted_sql.json") as f:
        for sql in strings(json.load(f)):
            yield "emitted_sql.json", sql


#: the fixture queries in this many slices, one test each (parsing them all is seconds: sliced, the two
#: workers of the fast tier share it)
SLICES = 4


def test_the_fixture_queries_are_all_there():
    assert sum(1 for _ in _fixture_sql()) > 700


@pytest.mark.parametrize("part", range(SLICES))
def test_every_bi_fixture_and_emitted_query_is_inside_the_limits(part):
    """Grafana, Superset, Metabase, JDBC and clickhouse-connect queries, the corpus, and dpch's own
    emitted SQL (which ClickHouse clients never send, but which is the deepest SQL we have): all far
    inside every limit. The macros of bi_time.toml are expanded by tests/sql/test_time.py; here they are
    made identifiers, which nest the same."""
    checked = 0
    for i, (where, sql) in enumerate(_fixture_sql()):
        if i % SLICES != part:
            continue
        text = sql.replace("$__", "macro__").replace("{db}", "db")
        try:
            trees = sqlglot.parse(text, read=DIALECT)
        except SqlglotError:  # a corpus query dpch rejects before parsing (INTO OUTFILE)
            continue
        try:
            limits.check_text(text)
            limits.check_nesting(DIALECT().tokenize(text))
            for tree in trees:
                if tree is not None:
                    limits.check_tree(limits.balance_connectors(tree))
        except dpch.QueryRejected as exc:
            pytest.fail(f"{where}: {text[:200]}: {exc}")
        checked += 1
    assert checked > 700 // SLICES, f"only {checked} fixture queries found"

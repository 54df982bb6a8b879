"""Stage 3, check: the probe runs before the charge, fails with a clear error that spends
nothing, and is not repeated for a query shape that already passed."""

from __future__ import annotations

import pytest

from dpch import DpchError
from dpch.pipeline.check import Probe
from dpch.sql.rewrite import emit_sql, emit_tree
from dpch.sql.shape import literal_type, probe_shape
from dpch.store.engine import Engine
from tests.helpers import ledger_rows


class CountingEngine(Engine):
    """The real engine, counting the probes it runs (the database stays real)."""

    probes = 0

    def probe(self, sql: str) -> None:
        type(self).probes += 1
        super().probe(sql)


def test_probe_runs_once_per_emitted_text(session, store_dsn):
    engine = CountingEngine(store_dsn, database=session.engine.database)
    try:
        probe = Probe(engine)
        plan, _ = session.plan("SELECT count() FROM t WHERE x > 1")
        emitted = emit_sql(plan, engine.database)
        CountingEngine.probes = 0
        probe.check(plan, emitted)
        ran = CountingEngine.probes
        assert ran == 2  # the filtered and the unfiltered probe
        probe.check(plan, emitted)
        assert CountingEngine.probes == ran  # cached: not probed again
    finally:
        engine.close()


def test_a_failing_probe_spends_nothing(session):
    before = ledger_rows(session)
    with pytest.raises(DpchError):
        session.query("SELECT sum(x) FROM t WHERE region > 1")  # String compared with a number
    assert ledger_rows(session) == before


def test_queries_differing_in_a_number_share_one_probe(session, store_dsn):
    """A dashboard changing a threshold probes once: a number outside a constant argument cannot
    decide whether ClickHouse runs the query (dpch.sql.shape)."""
    engine = CountingEngine(store_dsn, database=session.engine.database)
    try:
        probe = Probe(engine)
        CountingEngine.probes = 0
        for threshold in (1, 2, 7):
            plan, _ = session.plan(f"SELECT sum(x) FROM t WHERE x > {threshold}")
            probe.check(plan, emit_sql(plan, engine.database))
        assert CountingEngine.probes == 2
        # a different type is a different shape: a Float64 literal probes again
        plan, _ = session.plan("SELECT sum(x) FROM t WHERE x > 1.5")
        probe.check(plan, emit_sql(plan, engine.database))
        assert CountingEngine.probes == 4
    finally:
        engine.close()


@pytest.mark.parametrize(("first", "second"), [
    ("round(x, 1)", "round(x, 2)"),                                  # rounding places: compiled
    ("match(region, 'a+')", "match(region, 'b+')"),                  # a regex pattern: compiled
    ("region LIKE 'a%'", "region LIKE 'b%'"),                        # a LIKE pattern
    ("toStartOfWeek(toDateOrNull(region), 1)", "toStartOfWeek(toDateOrNull(region), 3)"),  # week mode
])
def test_constant_arguments_and_strings_stay_in_the_shape(session, first, second):
    """Values ClickHouse compiles (the registry's constant arguments) and strings (which may have to
    parse as a date or an enum) decide whether a query runs, so they are part of the shape."""
    shapes = []
    for condition in (first, second):
        plan, _ = session.plan(f"SELECT count() FROM t WHERE {condition} IS NOT NULL AND x > 3")
        shapes.append(probe_shape(emit_tree(plan)))
    assert shapes[0] != shapes[1]


def test_an_invalid_pattern_is_probed_even_after_a_valid_one(session):
    """The negative control of the shape: had patterns been abstracted, the second query would hit
    the cache, skip its probe and fail only after its charge."""
    session.query("SELECT count() FROM t WHERE match(region, 'a+') SETTINGS dp_epsilon = 0.1")
    before = ledger_rows(session)
    with pytest.raises(DpchError, match="regular expression"):
        session.query("SELECT count() FROM t WHERE match(region, 'a(') SETTINGS dp_epsilon = 0.1")
    assert ledger_rows(session) == before


@pytest.mark.parametrize(("text", "negative", "expected"), [
    ("0", False, "UInt8"), ("255", False, "UInt8"), ("256", False, "UInt16"), ("70000", False, "UInt32"),
    ("5000000000", False, "UInt64"), (str(2**64), False, "UInt128"), ("5", True, "Int8"),
    ("1.5", False, "Float64"), ("1e3", False, "Float64"), (str(2**300), False, "Float64"),
])
def test_literal_types(text, negative, expected):
    assert literal_type(text, negative) == expected


def test_a_literal_is_unsigned_unless_it_is_negated():
    """The default reading of a literal's text (bounds.py reads every unsigned literal so) is the unsigned type."""
    assert (literal_type("5"), literal_type("300"), literal_type("5", negative=True)) == ("UInt8", "UInt16", "Int8")

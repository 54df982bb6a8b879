"""Builds the shell tests' store in a subprocess: the fixture tables plus ``towns``, a public
dimension table whose ``country`` is computed when read (an ALIAS over 1.5 M rows), so reading
its key domain while planning a GROUP BY takes a couple of seconds: the slow step *before* the
charge that the Ctrl-C test interrupts (``python tests/cli/store.py PATH [ANALYST...]``; each ANALYST
gets a budget of ε 3, δ 1e-6, as the data owner's ``dpch budget set`` would give)."""

from __future__ import annotations

import sys

from dpch.accounting.budget import Budget, BudgetStore
from dpch.fixtures import tables
from dpch.store.engine import Engine

TOWNS_ROWS = 1_500_000
TOWNS_DDL = """
CREATE TABLE {table} (
  id      UInt64,
  region  String ALIAS ['north', 'south', 'east', 'west'][id % 4 + 1],
  country String ALIAS concat('c', toString(sipHash64(repeat(toString(id), 200)) % 3))
) ENGINE = MergeTree ORDER BY id
COMMENT 'dp: public'
"""


def build(path: str, analysts: list[str]) -> None:
    engine = Engine(f"chdb://{path}")
    try:
        for analyst in analysts:
            BudgetStore(engine).set(analyst, Budget(3.0, 1e-6))
        tables.load_all(engine, people=2_000)
        engine.command(TOWNS_DDL.format(table=engine.table("towns")))
        engine.command(f"INSERT INTO {engine.table('towns')} (id) SELECT number FROM numbers({TOWNS_ROWS})")
    finally:
        engine.close()


if __name__ == "__main__":
    build(sys.argv[1], sys.argv[2:])

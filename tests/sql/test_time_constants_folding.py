"""A folded date/time constant is what ClickHouse makes of the text as written: it is evaluated in
dpch's dialect, which keeps ``toStartOfYear`` (sqlglot's own ClickHouse rendering turns it into
``dateTrunc('YEAR', …)``, a different function on Date32: 1950-01-01 where ClickHouse's
``toStartOfYear`` gives 1970-01-01)."""

from __future__ import annotations

import pytest
import sqlglot

from dpch.sql.parse import DIALECT
from dpch.sql.time_constants import fold_time_constants


@pytest.mark.parametrize("written", [
    "toStartOfYear(toDate32('1950-05-05'))",
    "toStartOfMonth(toDate32('1960-07-20'))",
    "toStartOfQuarter(toDate('2026-05-05'))",
    "toStartOfDay(toDateTime('2026-05-05 10:11:12'))",
])
def test_a_folded_constant_is_clickhouses_value_of_the_text(keeper, written):
    tree = sqlglot.parse_one(f"SELECT 1 FROM t WHERE d >= {written}", read=DIALECT)
    folded, _ = fold_time_constants(tree, keeper.query_rows)
    constant = folded.args["where"].this.expression.sql(dialect=DIALECT)
    assert constant != written  # folded to a canonical constant
    assert keeper.query_rows(f"SELECT toString({constant}) = toString({written})")[0][0] == 1, constant

"""A deterministic generator for the demo ``visits`` table (about 100k rows, ~20k people).

Each person has a home region, an age and a spending habit; the number of visits per person
is heavy-tailed (some exceed the policy's cap of 10 rows per unit, so the cap matters).
The generator uses a fixed data seed: it makes the same table every time.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import numpy as np

DDL_PATH = Path(__file__).with_name("visits.sql")
REGIONS = ["north", "south", "east", "west"]
DEVICES = ["mobile", "desktop", "tablet"]
COLUMNS = [
    "user_id", "visit_date", "region", "device", "age", "duration_min", "spend", "pages",
    "converted",
]


def ddl(qualified_table: str) -> str:
    """The annotated CREATE TABLE statement for ``qualified_table``."""
    text = DDL_PATH.read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    return body.replace("{table}", qualified_table)


def generate(people: int = 20_000, seed: int = 20261123) -> dict[str, list]:
    """Column-oriented rows of the demo table."""
    rng = np.random.default_rng(seed)
    visits = np.minimum(rng.zipf(1.8, people), 40) + rng.poisson(3, people)
    user_ids = np.repeat(np.arange(1, people + 1, dtype=np.uint64), visits)
    n = len(user_ids)
    home = rng.integers(0, len(REGIONS), people)
    age = np.clip(rng.normal(41, 14, people), 18, 95).astype(np.uint8)
    habit = rng.lognormal(3.2, 0.9, people)
    person = np.repeat(np.arange(people), visits)
    moved = rng.random(n) < 0.1
    region_idx = np.where(moved, rng.integers(0, len(REGIONS), n), home[person])
    device_idx = rng.choice(len(DEVICES), n, p=[0.55, 0.35, 0.10])
    start = date(2026, 1, 1)
    days = rng.integers(0, 300, n)
    duration = np.round(rng.gamma(2.0, 6.0, n), 2)
    converted = (rng.random(n) < 0.08 + 0.002 * (age[person] - 18)).astype(np.uint8)
    spend = np.round(np.where(converted == 1, rng.exponential(habit[person]), 0.0), 2)
    pages = np.clip(rng.poisson(5, n) + 1, 1, 80).astype(np.uint16)
    return {
        "user_id": user_ids.tolist(),
        "visit_date": [start + timedelta(days=int(d)) for d in days],
        "region": [REGIONS[i] for i in region_idx],
        "device": [DEVICES[i] for i in device_idx],
        "age": age[person].tolist(),
        "duration_min": duration.tolist(),
        "spend": spend.tolist(),
        "pages": pages.tolist(),
        "converted": converted.tolist(),
    }


def load(engine, table: str = "visits", *, people: int = 20_000, replace: bool = False) -> int:
    """Creates and fills the table in ``engine``'s database; returns the number of rows.

    An existing table is kept as it is unless ``replace`` is set.
    """
    qualified = engine.table(table)
    if engine.table_exists(table):
        if not replace:
            return engine.query_rows(f"SELECT count() FROM {qualified}")[0][0]
        engine.command(f"DROP TABLE {qualified}")
    engine.command(ddl(qualified))
    data = generate(people)
    engine.insert(table, [data[c] for c in COLUMNS], COLUMNS, column_oriented=True)
    return len(data["user_id"])

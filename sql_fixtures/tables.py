"""The three annotated fixture tables: ``visits`` (events, many rows per person), ``people``
(a census, one row per person) and ``regions`` (a public dimension table).

``load_all(engine)`` creates and fills them deterministically (fixed data seeds).
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import numpy as np

from sql_fixtures import visits

HERE = Path(__file__).parent
OCCUPATIONS = ["teacher", "nurse", "engineer", "driver", "cook", "clerk", "farmer", "artist", "lawyer", "retired"]
REGIONS = [
    ("north", "Nordland", "cold", 4_200_000, 120_500.0),
    ("south", "Sudland", "warm", 6_900_000, 88_000.0),
    ("east", "Ostland", "dry", 3_100_000, 150_250.5),
    ("west", "Westland", "wet", 5_500_000, 97_300.0),
]


def _ddl(name: str, qualified: str) -> str:
    text = (HERE / f"{name}.sql").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    return body.replace("{table}", qualified)


def _create(engine, name: str, replace: bool) -> bool:
    """Creates the table; returns False if it exists and is kept."""
    if engine.table_exists(name):
        if not replace:
            return False
        engine.command(f"DROP TABLE {engine.table(name)}")
    engine.command(_ddl(name, engine.table(name)))
    return True


def generate_people(people: int = 20_000, seed: int = 7) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(44, 17, people), 16, 99).astype(int)
    birth = [date(2026, 6, 30) - timedelta(days=int(a * 365.25 + rng.integers(0, 365))) for a in age]
    income = np.round(np.where(rng.random(people) < 0.1, 0.0, rng.lognormal(10.4, 0.6, people)), 2)
    # a heavy-tailed postcode distribution: many postcodes hold a single person
    postcode = [f"P{int(min(rng.zipf(1.3), 5000)):04d}" for _ in range(people)]
    return {
        "person_id": list(range(1, people + 1)),
        "sex": [("f", "m", "x")[i] for i in rng.choice(3, people, p=[0.49, 0.49, 0.02])],
        "region": [visits.REGIONS[i] for i in rng.integers(0, 4, people)],
        "birth_date": birth,
        "age": age.tolist(),
        "income": income.tolist(),
        "household_size": np.clip(rng.poisson(2.4, people), 1, 9).tolist(),
        "employed": (rng.random(people) < 0.68).astype(int).tolist(),
        "occupation": [OCCUPATIONS[i] for i in rng.choice(10, people, p=[.12, .1, .1, .1, .1, .1, .08, .05, .05, .2])],
        "postcode": postcode,
    }


def load_all(engine, *, replace: bool = False, people: int = 20_000) -> None:
    """Creates and fills ``visits``, ``people`` and ``regions`` in the engine's database."""
    visits.load(engine, "visits", people=people, replace=replace)
    if _create(engine, "people", replace):
        data = generate_people(people)
        columns = list(data)
        engine.insert("people", [data[c] for c in columns], columns, column_oriented=True)
    if _create(engine, "regions", replace):
        engine.insert("regions", [list(r) for r in REGIONS], ["region", "country", "climate", "population", "area_km2"])

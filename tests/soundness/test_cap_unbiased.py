"""The contribution cap drops rows without bias (issue 27, items 1 and 5; docs/design.md rule 10).

Each unit keeps k of its rows chosen uniformly at random per row, under a key drawn for each release
(``dpch.sql.cap.row_order``). So the capped value of a group is, in expectation over the key, the
same fraction of the group's rows wherever those rows lie in the table's stored order and whatever
their values. Tested on the exact pre-noise values (``execute.exact``: no DP noise, only the cap's
own randomness), averaged over ``KEYS`` fixed keys:

- **Time.** Heavy units whose rows span the year, stored in time order (``ORDER BY (uid, ts)``), and
  light units under the cap: the monthly truth is flat and the cap binds for most rows. The ratio
  capped ÷ true per month, regressed on the month, has slope ≈ 0.
- **A second sort-key column.** The same table stored ``ORDER BY (uid, region, ts)``: the ratio is
  flat over regions, and over months.
- **Equal values.** A unit with 90 rows x = 0 and 10 rows x = 10, capped at 3 rows: the capped sum is
  3 × 1 = 3 in expectation (per unit), not 15 (all-or-nothing), nor 30 (keeping the tens).

Tolerances are derived from the cap's own variance, not fitted: a unit keeping n of its N rows, K of
which lie in a group, keeps a hypergeometric number of them (mean nK/N, variance
nK/N·(1−K/N)·(N−n)/(N−1)); summed over independent units and averaged over KEYS keys, that gives the
standard deviation of each group's ratio, and the least-squares slope's standard error is
σ/√Σ(x−x̄)². Each assertion allows ``Z`` standard errors (Z = 5: a false failure below 1e-6 for a
normal statistic; the keys are fixed, so the verdict is the same on every run).

Negative controls, built by replacing the cap's ORDER BY in the emitted tree: keeping the first k
rows in stored order (what dpch did before issue 27) must fail the slope assertion on both tables,
and ordering by a hash of the value (dpch's order on tables not sorted by their unit) the tie case.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta

import numpy as np
import pytest
from sqlglot import exp

from dpch.pipeline.execute import exact
from dpch.sql.nodes import call, column, render
from dpch.sql.rewrite import emit_tree

#: how many fixed keys the exact values are averaged over
KEYS = 24
#: standard errors allowed
Z = 5.0
CAP = 6
MONTHS = 12
REGIONS = ("a", "b", "c", "d")
HEAVY, HEAVY_PER_MONTH = 120, 4  # 120 units × 48 rows, 4 per month (1 per region per month)
LIGHT, LIGHT_ROWS = 240, 4  # 240 units × 4 rows, under the cap (kept whole)

MONTH_SQL = "SELECT month, count(*) FROM visits GROUP BY month"
REGION_SQL = "SELECT region, count(*) FROM visits GROUP BY region"


@pytest.fixture
def session(connect):
    return connect(analyst="unbiased")


def _keys(seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(KEYS)]


def _visits(session, order: str) -> None:
    """Heavy units: one row per region per month (48 rows, cap 6), light units: 4 rows each, as many
    in every month and every region (so the truth is exactly flat). Inserted in the stored order
    (and merged), so the stored order is time (or region, then time) within each unit."""
    rng = random.Random(27)
    rows = []
    start = datetime(2025, 1, 1)
    for uid in range(HEAVY):
        for month in range(1, MONTHS + 1):
            for region in REGIONS:
                rows.append((uid, region, month, start.replace(month=month) + timedelta(hours=rng.randrange(600))))
    for i, uid in enumerate(range(HEAVY, HEAVY + LIGHT)):
        for j in range(LIGHT_ROWS):  # spread evenly: every month and every region has as many light rows
            month = (LIGHT_ROWS * i + j) % MONTHS + 1
            rows.append((uid, REGIONS[j % len(REGIONS)], month,
                         start.replace(month=month) + timedelta(hours=rng.randrange(600))))
    engine = session.engine
    months = ", ".join(str(m) for m in range(1, MONTHS + 1))
    regions = ", ".join(f'"{r}"' for r in REGIONS)
    engine.command(
        f"CREATE TABLE {engine.table('visits')} (uid UInt32, "
        f"region String COMMENT 'dp: public, values=[{regions}]', "
        f"month UInt8 COMMENT 'dp: public, values=[{months}]', ts DateTime) "
        f"ENGINE = MergeTree ORDER BY {order} "
        f"COMMENT 'dp: privacy_unit=uid, max_rows_per_unit={CAP}'")
    engine.insert("visits", sorted(rows), ["uid", "region", "month", "ts"])
    engine.command(f"OPTIMIZE TABLE {engine.table('visits')} FINAL")
    session.policy.reload()


def _truth(session, key: str) -> dict:
    rows = session.engine.query_rows(f"SELECT {key}, count() FROM {session.engine.table('visits')} GROUP BY {key}")
    return {r[0]: r[1] for r in rows}


def _ratios(session, sql: str, keys: list[tuple[int, int]], tree: exp.Expr | None = None) -> dict:
    """Group → mean over ``keys`` of exact capped count ÷ true count (``sql`` groups by its first word
    after SELECT)."""
    plan = session.explain(sql).plan
    text = render(tree if tree is not None else emit_tree(plan))
    truth = _truth(session, sql.split()[1].rstrip(","))
    sums: dict = {}
    for key in keys:
        data = exact(session.engine, plan, text, key)
        for group, value in zip(data.keys, data.measures["m0"], strict=True):
            sums[group[0]] = sums.get(group[0], 0.0) + float(value)
    return {g: sums[g] / len(keys) / truth[g] for g in truth}


def _heavy_sd(rows_in_group: int, rows_per_unit: int, units: int, truth: float) -> float:
    """Standard deviation of a group's ratio averaged over KEYS keys: the hypergeometric variance of
    each heavy unit's kept rows in the group, summed over units (light units are kept whole)."""
    n, big_n, k = CAP, rows_per_unit, rows_in_group
    p = k / big_n
    var = units * n * p * (1 - p) * (big_n - n) / (big_n - 1)
    return math.sqrt(var / KEYS) / truth


def _slope(ratios: dict, x: dict) -> float:
    groups = sorted(ratios)
    xs = np.array([x[g] for g in groups], dtype=float)
    ys = np.array([ratios[g] for g in groups])
    return float(np.polyfit(xs, ys, 1)[0])


def _slope_tolerance(ratios: dict, x: dict, sd: float) -> float:
    xs = np.array([x[g] for g in ratios], dtype=float)
    return Z * sd / math.sqrt(float(((xs - xs.mean()) ** 2).sum()))


def _stored_order(session, sql: str, stored: list[str]) -> exp.Expr:
    """The emitted tree with the cap's row order replaced by the stored order: each unit keeps its
    first k rows as the table stores them (dpch before issue 27)."""
    tree = emit_tree(session.explain(sql).plan)
    order = next(o for o in tree.find_all(exp.Order) if o.find(exp.Placeholder) is not None)
    qualifier = order.expressions[0].this.table
    order.set("expressions", [exp.Ordered(this=column(c, qualifier)) for c in ["uid", *stored]])
    return tree


@pytest.mark.parametrize(("order", "stored"), [("(uid, ts)", ["ts"]), ("(uid, region, ts)", ["region", "ts"])],
                         ids=["time", "region-time"])
def test_monthly_ratio_is_flat(session, order, stored):
    _visits(session, order)
    truth = _truth(session, "month")
    assert len(set(truth.values())) == 1 and min(truth.values()) > 500  # flat, and large
    # the cap binds: most of each month's rows belong to heavy units, who keep 6 of 48
    sd = max(_heavy_sd(HEAVY_PER_MONTH, MONTHS * HEAVY_PER_MONTH, HEAVY, t) for t in truth.values())
    month = {m: m for m in truth}
    ratios = _ratios(session, MONTH_SQL, _keys(1))
    slope, tolerance = _slope(ratios, month), _slope_tolerance(ratios, month, sd)
    print(f"\n{order}: monthly ratios {[round(ratios[m], 4) for m in sorted(ratios)]}; "
          f"slope {slope:.2e}, tolerance {tolerance:.2e}")
    assert abs(slope) < tolerance, f"capped/true drifts with the month: slope {slope:.3g} (±{tolerance:.3g})"
    mean = sum(ratios.values()) / len(ratios)
    expected = (HEAVY * CAP + LIGHT * LIGHT_ROWS) / (HEAVY * MONTHS * HEAVY_PER_MONTH + LIGHT * LIGHT_ROWS)
    assert abs(mean - expected) < Z * sd, (mean, expected)  # the level is right too, not only the slope
    # negative control: the first k rows in stored order
    biased = _ratios(session, MONTH_SQL, _keys(1)[:1], _stored_order(session, MONTH_SQL, stored))
    control = _slope(biased, month)
    print(f"{order}, stored order: monthly ratios {[round(biased[m], 4) for m in sorted(biased)]}; slope {control:.2e}")
    assert abs(control) >= tolerance, "the negative control passed: the test cannot see the stored-order bias"


def test_region_ratio_is_flat(session):
    """Stored region-then-time, the old cap kept the first region's rows: the ratio over regions is
    flat now (each heavy unit has 12 rows per region)."""
    _visits(session, "(uid, region, ts)")
    truth = _truth(session, "region")
    region = {r: i for i, r in enumerate(REGIONS)}
    sd = max(_heavy_sd(MONTHS, MONTHS * HEAVY_PER_MONTH, HEAVY, t) for t in truth.values())
    ratios = _ratios(session, REGION_SQL, _keys(2))
    slope, tolerance = _slope(ratios, region), _slope_tolerance(ratios, region, sd)
    print(f"\nregion ratios {[round(ratios[r], 4) for r in REGIONS]}; slope {slope:.2e}, tolerance {tolerance:.2e}")
    assert abs(slope) < tolerance
    spread = max(ratios.values()) - min(ratios.values())
    assert spread < 2 * Z * sd, spread
    biased = _ratios(session, REGION_SQL, _keys(2)[:1], _stored_order(session, REGION_SQL, ["region", "ts"]))
    print(f"stored order: region ratios {[round(biased[r], 4) for r in REGIONS]}")
    assert abs(_slope(biased, region)) >= tolerance and max(biased.values()) - min(biased.values()) >= 2 * Z * sd


TIE_UNITS, ZEROS, TENS, TIE_CAP = 200, 90, 10, 3


def test_equal_values_do_not_tie(session):
    """90 rows x = 0 and 10 rows x = 10 per unit, cap 3: E[capped sum] = 3 × mean(x) = 3 per unit."""
    engine = session.engine
    engine.command(f"CREATE TABLE {engine.table('ties')} (uid UInt32, x UInt8 COMMENT 'dp: bounds=[0, 10]') "
                   f"ENGINE = MergeTree ORDER BY uid COMMENT 'dp: privacy_unit=uid, max_rows_per_unit={TIE_CAP}'")
    rng = random.Random(5)
    rows = [(u, v) for u in range(TIE_UNITS) for v in [0] * ZEROS + [10] * TENS]
    rng.shuffle(rows)
    engine.insert("ties", rows, ["uid", "x"])
    session.policy.reload()
    sql = "SELECT sum(x) FROM ties"
    plan = session.explain(sql).plan
    text = render(emit_tree(plan))
    keys = _keys(3)
    sums = [float(exact(engine, plan, text, key).measures["m0"][0]) for key in keys]
    mean = sum(sums) / len(sums)
    n, big_n, k = TIE_CAP, ZEROS + TENS, TENS
    expected = TIE_UNITS * n * k / big_n * 10
    var = TIE_UNITS * 100 * n * (k / big_n) * (1 - k / big_n) * (big_n - n) / (big_n - 1)
    tolerance = Z * math.sqrt(var / len(keys))
    print(f"\ntie case: mean capped sum {mean:.1f} over {len(keys)} keys, expected {expected:.1f} ± {tolerance:.1f}")
    assert abs(mean - expected) < tolerance
    # negative control: ordered by a hash of the value (equal values tie), the old order off the unit
    tree = emit_tree(plan)
    order = next(o for o in tree.find_all(exp.Order) if o.find(exp.Placeholder) is not None)
    order.expressions[1].set("this", call("cityHash64", column("c0")))
    control = float(exact(engine, plan, render(tree), keys[0]).measures["m0"][0])
    print(f"value-hash order: capped sum {control:.1f}")
    assert abs(control - expected) >= tolerance


def test_stored_order_is_the_owners_explicit_choice(session):
    """``cap_order=stored`` (the owner's annotation, for speed) keeps each unit's first k rows as
    stored: the emitted SQL has no key, EXPLAIN and `dpch policy show` say so, and the monthly ratio
    is the biased one. A table not stored ordered by its unit cannot declare it."""
    _visits(session, "(uid, ts)")
    engine = session.engine
    engine.command(f"ALTER TABLE {engine.table('visits')} MODIFY COMMENT "
                   f"'dp: privacy_unit=uid, max_rows_per_unit={CAP}, cap_order=stored'")
    session.policy.reload()
    policy = session.policy.table(engine, "visits")
    assert policy.cap_order == "stored" and "cap_order=stored" in policy.annotation()
    assert "first k rows in the stored order" in policy.describe()
    explained = session.explain(MONTH_SQL)
    assert "sipHash64Keyed" not in explained.sql and "dpch_cap_key" not in explained.sql
    assert any("cap_order=stored" in note for note in explained.notes)
    ratios = _ratios(session, MONTH_SQL, _keys(1)[:1])
    assert ratios[1] == 1.0 and ratios[MONTHS] < 0.2  # January kept whole, December mostly dropped
    engine.command(f"CREATE TABLE {engine.table('heap')} (uid UInt32, ts DateTime) ENGINE = MergeTree "
                   "ORDER BY ts COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=3, cap_order=stored'")
    session.policy.reload()
    with pytest.raises(Exception, match="cap_order=stored needs a table stored ORDER BY its privacy_unit"):
        session.explain("SELECT count(*) FROM heap")

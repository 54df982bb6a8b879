"""A series-limited query answered as the two releases it needs (issue 28, part 2; :mod:`dpch.sql.series_limit`).

1. The top-N query is released as any query is (a top-k selection of its keys, charged).
2. The series query, limited to the keys release 1 chose, is released as any query is (charged).

Release 2 is chosen by post-processing release 1 (its keys are released values), so the pair is the
adaptive composition of two releases: each is admitted and charged by the filter like any other (Rogers
et al. 2016, the filter's guarantee holds for adaptively chosen releases), and the answer reports their
composed cost. Before release 1 runs, release 2 is planned with stand-in keys and the two costs are checked
together against the budget, so a query dpch cannot answer, or a budget that fits only the first release,
is refused before anything is charged. (Another process spending in between can still leave release 2
refused after release 1 was charged: budget lost, never privacy; the refusal says so.) Accuracy targets and
watches, whose costs are settled after the fact, are refused: the pair could not be checked beforehand.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from dpch.errors import QueryRejected
from dpch.pipeline.kinds import release_kind
from dpch.pipeline.report import Explanation, Release
from dpch.policy.model import base_type
from dpch.privacy.cost import PrivacyCost
from dpch.sql.nodes import render
from dpch.sql.parse import ParsedQuery
from dpch.sql.series_limit import SeriesLimit, restricted
from dpch.sql.settings import option_overrides

if TYPE_CHECKING:
    from dpch.accounting.accountant import Accountant, BudgetStatus
    from dpch.sql.analyze import QueryPlan
    from dpch.sql.settings import QueryOptions


class Session(Protocol):
    """What a series limit uses of the connection that asks (a :class:`dpch.session.Session`)."""

    @property
    def accountant(self) -> Accountant: ...

    def plan(self, sql: str, **options: Any) -> tuple[QueryPlan, QueryOptions]: ...

    def explain_plan(self, plan: QueryPlan, opts: QueryOptions) -> Explanation: ...

    def query(self, sql: str, **options: Any) -> Release: ...

    def datasets(self, plan: QueryPlan) -> tuple[str, ...]: ...

    def budget(self) -> BudgetStatus: ...


def _stand_in(plan: QueryPlan, name: str) -> Any:
    """A value of the top-N query's key ``name`` to plan the series query with before the keys are chosen:
    its domain's first value, or a constant of its type (the plan and cost do not depend on which)."""
    output = plan.outputs[plan.columns.index(name)]
    if output.key_index is None:
        raise QueryRejected(f"series limit: the top-N query's column {name} is not one of its GROUP BY keys")
    key = plan.keys[output.key_index]
    if key.values:
        return key.values[0]
    kind = base_type(key.type)
    if kind.startswith(("Int", "UInt")):
        return 0
    if kind == "String":
        return ""
    raise QueryRejected(f"series limit: the key {name} is of type {kind}, which dpch cannot list back into the "
                        "series query", hint="limit the series by a String or integer column")


@dataclass(frozen=True)
class SeriesPlans:
    """The two queries of a series limit, planned: the top-N query, and the series query with stand-in keys
    (its columns, types and cost are those of the series query the chosen keys give)."""

    top: tuple[QueryPlan, QueryOptions]
    series: tuple[QueryPlan, QueryOptions]
    #: the options both queries are planned with (the caller's, then the query's SETTINGS)
    overrides: dict[str, Any]

    def explained(self, session: Session) -> tuple[list[Explanation], PrivacyCost]:
        """Both queries' explanations, and the cost of the two releases together."""
        explained = [session.explain_plan(*self.top), session.explain_plan(*self.series)]
        return explained, PrivacyCost.composed([e.cost for e in explained])


def plans(session: Session, parsed: ParsedQuery, limit: SeriesLimit, options: dict[str, Any]) -> SeriesPlans:
    """Plans both queries (each refused in words as any query is, before anything is charged)."""
    overrides = {**options, **option_overrides(parsed.settings)}
    top = session.plan(render(limit.top), **overrides)
    kind = release_kind(*top)
    if not kind.fixed_cost:
        # its cost is settled after the fact (ex post), and an accuracy run may withhold its answer once
        # charged: the pair could neither be checked together beforehand nor reported as one composed cost
        raise QueryRejected(f"a series limit is answered as two fixed-cost releases, and a {kind.name} release's "
                            "cost is settled after it runs (accuracy targets and watches do not apply to it)",
                            hint="set an ε (dp_epsilon) instead")
    stand_in = tuple(_stand_in(top[0], n) for n in limit.names)  # output names of the top-N query (find() checked)
    series = session.plan(render(restricted(limit, [stand_in])), **overrides)
    return SeriesPlans(top, series, overrides)


def presented_plan(session: Session, parsed: ParsedQuery, limit: SeriesLimit,
                   options: dict[str, Any]) -> tuple[QueryPlan, QueryOptions]:
    """The plan a client is shown for the whole query: the series query's (its columns and types), holding
    the whole query's text (its fingerprint names the whole query, e.g. in the release cache's key)."""
    planned = plans(session, parsed, limit, options)
    plan, opts = planned.series
    return dataclasses.replace(plan, query=parsed), opts


def explanation(session: Session, parsed: ParsedQuery, limit: SeriesLimit, options: dict[str, Any]) -> Explanation:
    """The series query's explanation, with the two releases' composed cost and a note saying so."""
    (top, series), cost = plans(session, parsed, limit, options).explained(session)
    return dataclasses.replace(series, cost=cost, notes=[
        *series.notes, f"series limit: two releases, the series keys ({_cost_text(top.cost)}) "
        f"and their series ({_cost_text(series.cost)})"])


def answer(session: Session, parsed: ParsedQuery, limit: SeriesLimit, options: dict[str, Any],
           started: float) -> Release:
    """Answers a series-limited query (see the module): release 1, the top-N keys; release 2, the series of
    those keys. The answer is release 2's rows, with the two releases' composed cost."""
    planned = plans(session, parsed, limit, options)
    explained, cost = planned.explained(session)
    if parsed.explain:
        return dataclasses.replace(_explanation(explained, cost, session), elapsed_ms=_elapsed_ms(started))
    top_plan, series_plan = planned.top[0], planned.series[0]
    datasets = tuple(dict.fromkeys([*session.datasets(top_plan), *session.datasets(series_plan)]))
    session.accountant.check(cost, datasets=datasets)  # both fit now, or neither runs
    first = session.query(render(limit.top), **planned.overrides)
    keys = list(dict.fromkeys(tuple(row[first.columns.index(n)] for n in limit.names) for row in first.rows))
    if not keys:  # no series chosen (a selection released none): the series query has no rows to show
        return dataclasses.replace(first, columns=list(series_plan.columns), rows=[], intervals=[],
                                   notes=[*first.notes, _note(first, None)])
    second = session.query(render(restricted(limit, keys)), **planned.overrides)
    total = PrivacyCost.composed([first.cost, second.cost])
    return dataclasses.replace(second, cost=total, notes=[*second.notes, _note(first, second)],
                               elapsed_ms=_elapsed_ms(started))


def _elapsed_ms(started: float) -> float:
    """The time the whole answer took (both releases), as a release reports it."""
    return (time.perf_counter() - started) * 1000.0


def _cost_text(cost: PrivacyCost) -> str:
    return f"ε {cost.epsilon:g}" + (f", δ {cost.delta:g}" if cost.delta else "")


def _note(first: Release, second: Release | None) -> str:
    chosen = f"series limit: release {first.release_id} chose the series ({_cost_text(first.cost)})"
    if second is None:
        return chosen + "; it chose none, so the series query was not run"
    return chosen + f"; release {second.release_id} is their values ({_cost_text(second.cost)})"


def _explanation(explained: list[Explanation], cost: PrivacyCost, session: Session) -> Release:
    """EXPLAIN DP of a series limit: both releases' explanations and their composed cost; free."""
    top, series = explained
    lines = ["series limit: answered as two releases, the top-N series keys, then the series of those keys",
             f"together they cost {_cost_text(cost)}",
             "", "release 1, the series keys:", *top.describe().splitlines(),
             "", "release 2, the series (its key list is release 1's keys):", *series.describe().splitlines()]
    return Release(columns=["explain"], rows=[(line,) for line in lines], intervals=[[None] for _ in lines],
                   cost=PrivacyCost.zero(), confidence=series.options.confidence, mechanism="none",
                   measures=[*top.measures, *series.measures], budget=session.budget(), release_id="",
                   notes=[f"EXPLAIN DP spends nothing; running the query would cost {_cost_text(cost)}"])


__all__ = ["SeriesPlans", "answer", "explanation", "plans", "presented_plan"]

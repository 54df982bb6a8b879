"""Typed privacy costs, the named conversions between them, and their composition.

Four kinds of cost (docs/algorithms.md C8):

- :class:`PureDP` — ε-DP (Dwork et al. 2006).
- :class:`ApproxDP` — (ε, δ)-DP.
- :class:`ZCDP` — δ-approximate ρ-zCDP (Bun & Steinke 2016, Def 1.1; δ = 0 is plain ρ-zCDP;
  the approximate form as in Rogers et al. 2023, Def 2.2).
- :class:`ExPost` — (E, δ)-ex-post privacy with the realized E and its worst case (Whitehouse et
  al. 2022, Def 2.2; Rogers et al. 2023, Def 4.1).

:func:`compose` sums costs of one kind (the theorem each kind uses is in its docstring); the
conversions (:func:`pure_to_approx`, :func:`pure_to_zcdp`, :func:`approx_to_zcdp`,
:func:`zcdp_to_approx`, :func:`ex_post_to_approx`) each name their lemma.

:class:`PrivacyCost` is the record of one release as the ledger stores it and the filters read
it: its (ε, δ)-DP view (``epsilon``, ``delta``), its zCDP view where it has a better one than the
conversion of its (ε, δ) (``rho``, ``rho_delta``), and, for an ex-post release, its worst case.
Build it from typed costs — :meth:`PrivacyCost.of` (a fixed cost), :meth:`PrivacyCost.realized`
(an ex-post one), :meth:`PrivacyCost.composed`, :meth:`PrivacyCost.zero` — or, for the ledger,
:meth:`PrivacyCost.of_release` (a release of a known kind against its reservation) and
:meth:`PrivacyCost.from_dict` (a stored or wire record read back); read a view back with
:meth:`PrivacyCost.approx_dp`, :meth:`PrivacyCost.zcdp`, :meth:`PrivacyCost.realized_ex_post`,
:meth:`PrivacyCost.at_worst`. Code outside :mod:`dpch.privacy` builds records only through these
(tests/privacy/test_costs_built_typed.py), so each way a record is made is written, and argued, once.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar, overload

from dpch.privacy import conversions


class CostKind(enum.Enum):
    """The kinds of privacy cost; filters declare which they accept and which they compose in."""

    PURE = "pure ε-DP"
    APPROX = "(ε, δ)-DP"
    ZCDP = "ρ-zCDP"
    EX_POST = "ex-post (ε, δ)"


def _non_negative(**values: float) -> None:
    for name, value in values.items():
        if not value >= 0:  # also refuses NaN
            raise ValueError(f"{name} must be non-negative, got {value!r}")


@dataclass(frozen=True)
class PureDP:
    """ε-DP."""

    epsilon: float
    kind = CostKind.PURE

    def __post_init__(self) -> None:
        _non_negative(epsilon=self.epsilon)


@dataclass(frozen=True)
class ApproxDP:
    """(ε, δ)-DP."""

    epsilon: float
    delta: float = 0.0
    kind = CostKind.APPROX

    def __post_init__(self) -> None:
        _non_negative(epsilon=self.epsilon, delta=self.delta)


@dataclass(frozen=True)
class ZCDP:
    """δ-approximate ρ-zCDP (``delta`` = 0: ρ-zCDP)."""

    rho: float
    delta: float = 0.0
    kind = CostKind.ZCDP

    def __post_init__(self) -> None:
        _non_negative(rho=self.rho, delta=self.delta)


@dataclass(frozen=True)
class ExPost:
    """(E, δ)-ex-post privacy: realized E = ``epsilon``, at most ``worst_epsilon`` in every outcome."""

    epsilon: float
    delta: float
    worst_epsilon: float
    kind = CostKind.EX_POST

    def __post_init__(self) -> None:
        _non_negative(epsilon=self.epsilon, delta=self.delta, worst_epsilon=self.worst_epsilon)


TypedCost = PureDP | ApproxDP | ZCDP | ExPost


@overload
def compose(costs: Iterable[PureDP]) -> PureDP: ...
@overload
def compose(costs: Iterable[ApproxDP]) -> ApproxDP: ...
@overload
def compose(costs: Iterable[ZCDP]) -> ZCDP: ...
@overload
def compose(costs: Iterable[ExPost]) -> ExPost: ...


def compose(costs: Iterable[TypedCost]) -> TypedCost:
    """The composition of costs of one kind: each parameter sums.

    - pure ε and (ε, δ): basic composition (Dwork et al. 2006; Dwork & Roth 2014, Thm 3.16; for
      adaptively chosen parameters under a filter, Rogers et al. 2016, Thm 3.4);
    - δ-approximate ρ-zCDP: ρ's add and δ's add (Bun & Steinke 2016, Lemma 1.7; Rogers et al.
      2023, Lemma 2.4);
    - ex-post: basic ex-post composition, (Σ E_i, Σ δ_i) (Rogers et al. 2023, Lemma 5.1); the worst
      cases add too.

    Costs of different kinds do not compose here: convert them first (the conversion names its
    lemma). An empty sequence is an error (its kind is unknown); use the kind's zero.
    """
    items = list(costs)
    if not items:
        raise ValueError("compose() needs at least one cost (its kind is unknown otherwise)")
    kinds = {type(c) for c in items}
    if len(kinds) > 1:
        names = ", ".join(sorted(k.kind.value for k in kinds))
        raise TypeError(f"compose() sums costs of one kind; got {names}: convert them first")
    first = items[0]
    result: TypedCost
    if isinstance(first, PureDP):
        result = PureDP(math.fsum(c.epsilon for c in _each(items, PureDP)))
    elif isinstance(first, ApproxDP):
        approx = _each(items, ApproxDP)
        result = ApproxDP(math.fsum(c.epsilon for c in approx), math.fsum(c.delta for c in approx))
    elif isinstance(first, ZCDP):
        zcdp = _each(items, ZCDP)
        result = ZCDP(math.fsum(c.rho for c in zcdp), math.fsum(c.delta for c in zcdp))
    else:
        post = _each(items, ExPost)
        result = ExPost(math.fsum(c.epsilon for c in post), math.fsum(c.delta for c in post),
                        math.fsum(c.worst_epsilon for c in post))
    return result


_K = TypeVar("_K")


def _each(items: Sequence[object], kind: type[_K]) -> list[_K]:
    return [c for c in items if isinstance(c, kind)]


# -- named conversions -------------------------------------------------------------------------


def pure_to_approx(cost: PureDP) -> ApproxDP:
    """ε-DP is (ε, 0)-DP (by definition)."""
    return ApproxDP(cost.epsilon, 0.0)


def pure_to_zcdp(cost: PureDP) -> ZCDP:
    """ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop 1.4)."""
    return ZCDP(conversions.pure_dp_to_zcdp_rho(cost.epsilon), 0.0)


def approx_to_zcdp(cost: ApproxDP) -> ZCDP:
    """(ε, δ)-DP ⇒ δ-approximate (ε²/2)-zCDP (Rogers et al. 2023, Lemma 2.3).

    With δ = 0 this is Bun & Steinke 2016, Prop 1.4."""
    return ZCDP(conversions.approx_dp_to_zcdp_rho(cost.epsilon), cost.delta)


def zcdp_to_approx(cost: ZCDP, delta_conversion: float, *, printed_theorem_6: bool = False) -> ApproxDP:
    """δ-approximate ρ-zCDP ⇒ (ρ + 2√(ρ·log(1/δ'')), δ + δ'')-DP (Bun & Steinke 2016, Prop 1.3;
    Rogers et al. 2023, Lemma 2.3), δ'' = ``delta_conversion``; ``printed_theorem_6`` uses the form
    printed in Rogers et al. 2023, Thm 6 (2√(2ρ·log(1/δ''))), see docs/algorithms.md A4."""
    eps = conversions.zcdp_to_dp_epsilon(cost.rho, delta_conversion, printed_theorem_6=printed_theorem_6)
    return ApproxDP(eps, cost.delta + delta_conversion)


def zcdp_to_approx_optimal(cost: ZCDP, epsilon: float) -> ApproxDP:
    """δ-approximate ρ-zCDP ⇒ (ε, δ + δ(ρ, ε))-DP by the optimal conversion (Canonne, Kamath &
    Steinke 2020, Cor 13; the δ's add as in Rogers et al. 2023, Lemma 2.3)."""
    return ApproxDP(epsilon, cost.delta + conversions.zcdp_delta(cost.rho, epsilon))


def ex_post_to_approx(cost: ExPost) -> ApproxDP:
    """An (E, δ)-ex-post private release whose E never exceeds ``worst_epsilon`` is
    (``worst_epsilon``, δ)-DP: its privacy loss exceeds ``worst_epsilon`` with probability at most
    δ (Whitehouse et al. 2022, Def 2.2), the tail form of (ε, δ)-DP."""
    return ApproxDP(cost.worst_epsilon, cost.delta)


def as_approx(cost: PureDP | ApproxDP) -> ApproxDP:
    """The (ε, δ)-DP form of a pure or approximate DP cost."""
    return pure_to_approx(cost) if isinstance(cost, PureDP) else cost


# -- the ledger's record of a charge -----------------------------------------------------------


@dataclass(frozen=True)
class PrivacyCost:
    """What one release costs, as the ledger records it and the filters read it.

    ``epsilon``/``delta`` is the (ε, δ)-DP guarantee of the release (δ = 0 for pure DP).
    ``rho`` is its zCDP parameter where the mechanism has one better than the conversion of its
    (ε, δ) (Gaussian: Δ2²/(2σ²)); the release is then ``rho_delta``-approximate ``rho``-zCDP.
    ``None`` when it has no zCDP view of its own (a zCDP filter converts its (ε, δ),
    :func:`approx_to_zcdp`). ``ex_post`` marks a *realized* cost known only after the release
    (noise reduction, Gaussian Above Threshold): ``epsilon`` is then the ex-post ε of the outcome
    (Whitehouse et al. 2022, Def 2.2; Rogers et al. 2023, Def 4.1) and ``delta`` its failure
    probability; a filter must have admitted the mechanism on its worst case
    (``worst_epsilon``/``worst_rho``) beforehand.
    """

    epsilon: float
    delta: float = 0.0
    rho: float | None = None
    ex_post: bool = False
    #: the most this mechanism could have cost, for the filter's admission check
    worst_epsilon: float | None = None
    worst_rho: float | None = None
    #: the δ of the zCDP view (δ-approximate ρ-zCDP); 0 for mechanisms that are ρ-zCDP outright
    rho_delta: float = 0.0

    def __post_init__(self) -> None:
        if not (self.epsilon >= 0 and self.delta >= 0):
            raise ValueError("privacy cost must be non-negative")
        if self.rho is not None and not self.rho >= 0:  # also refuses NaN, as the checks beside it do
            raise ValueError("rho must be non-negative")
        if not self.rho_delta >= 0:
            raise ValueError("rho_delta must be non-negative")

    @classmethod
    def of(cls, dp: PureDP | ApproxDP, zcdp: ZCDP | None = None) -> PrivacyCost:
        """The record of a fixed-cost release that is ``dp`` and, if given, also ``zcdp``."""
        approx = as_approx(dp)
        if zcdp is None:
            return cls(approx.epsilon, approx.delta)
        return cls(approx.epsilon, approx.delta, zcdp.rho, rho_delta=zcdp.delta)

    @classmethod
    def composed(cls, records: Sequence[PrivacyCost]) -> PrivacyCost:
        """The record of fixed-cost releases run together: each view is the :func:`compose` of the
        parts' views — (ε, δ) by basic composition; ρ by zCDP composition of each part's own ρ
        where it has one, else of its converted (ε, δ)."""
        if not records:
            return cls.zero()
        if any(r.ex_post for r in records):
            raise ValueError("ex-post releases are settled one at a time, not composed into one record")
        dp = compose([r.approx_dp() for r in records])
        zcdp = compose([r.zcdp() for r in records])
        return cls.of(dp, zcdp)

    def approx_dp(self) -> ApproxDP:
        """The (ε, δ)-DP view (an ex-post release: at its worst case, :func:`ex_post_to_approx`)."""
        if self.ex_post:
            return ex_post_to_approx(self.realized_ex_post())
        return ApproxDP(self.epsilon, self.delta)

    def zcdp(self) -> ZCDP:
        """The zCDP view of a fixed-cost release: its own ρ, or its (ε, δ) converted
        (:func:`approx_to_zcdp`, Rogers et al. 2023, Lemma 2.3)."""
        if self.rho is not None:
            return ZCDP(self.rho, self.rho_delta)
        return approx_to_zcdp(ApproxDP(self.epsilon, self.delta))

    def realized_ex_post(self) -> ExPost:
        """The ex-post view: realized ε, δ, and the worst case (a fixed cost is its own worst case).

        For a fixed-cost (ε, δ)-DP release this is *not* a claim that its own privacy loss exceeds ε
        with probability at most δ (a Gaussian's does so with probability ≈ 16·δ at (1, 1e-5)): the ex-post
        filters may count it so because it is a post-processing of the randomized response R_{ε,δ},
        whose loss is bounded that way (Kairouz, Oh & Viswanath 2015; Murtagh & Vadhan 2016, Lemma 3.2;
        docs/filters-and-ledger.md, "Fixed-cost releases beside ex-post ones")."""
        worst = self.worst_epsilon if self.ex_post and self.worst_epsilon is not None else self.epsilon
        return ExPost(self.epsilon, self.delta, worst)

    @classmethod
    def realized(cls, cost: ExPost, *, rho: float | None = None, worst_rho: float | None = None,
                 rho_delta: float = 0.0) -> PrivacyCost:
        """The record of an ex-post release (noise reduction, Above Threshold, a sparse-vector watch):
        ``cost`` is its realized (E, δ) and the worst E it could have reached (Whitehouse et al. 2022,
        Def 2.2; Rogers et al. 2023, Def 4.1), which the filters admit it on beforehand.

        ``rho``/``worst_rho``: the realized and worst ρ of a run that also has a zCDP view (a Brownian
        run stopped at T is Δ2²/(2T)-zCDP, Rogers et al. 2023, Thm 6), ``rho_delta`` that view's δ;
        ``None`` where it has none (a zCDP filter then counts it at its worst (ε, δ) converted)."""
        return cls(cost.epsilon, cost.delta, rho, ex_post=True, worst_epsilon=cost.worst_epsilon,
                   worst_rho=worst_rho, rho_delta=rho_delta)

    @classmethod
    def of_release(cls, cost: PrivacyCost, *, ex_post: bool, worst: PrivacyCost | None) -> PrivacyCost:
        """The ledger's record of one release: what it cost (``cost``'s ε, δ, ρ and ρ's δ), its kind
        (``ex_post``), and the worst case later admissions count it at (``worst``'s ε and ρ; ``None``:
        none).

        The ledger keeps a release's kind and worst case apart from what it cost (the reservation row
        and the ``worst_*`` columns), so each record it puts together — a settled charge, an open
        reservation counted at its worst case, a row read back — is made here from the two."""
        return cls(cost.epsilon, cost.delta, cost.rho, ex_post=ex_post,
                   worst_epsilon=None if worst is None else worst.epsilon,
                   worst_rho=None if worst is None else worst.rho, rho_delta=cost.rho_delta)

    def at_worst(self) -> PrivacyCost:
        """This release as a fixed-cost record at its worst case: what a filter that cannot use a
        realized cost counts, and what the ledger stores as a request's worst case.

        An ex-post release whose privacy loss is at most ``worst_epsilon`` in every outcome is
        ``worst_epsilon``-DP ex ante (at δ, :func:`ex_post_to_approx`), and its zCDP view is its worst ρ
        (a Brownian run at its finest grid point, Rogers et al. 2023, Thm 6); without a stated worst
        case it counts at what it says. A fixed-cost record is its own worst case: returned as it is,
        or without the ``worst_*`` a counted reservation carries (they mean nothing on a fixed cost)."""
        if not self.ex_post:
            if self.worst_epsilon is None and self.worst_rho is None:
                return self
            return PrivacyCost(self.epsilon, self.delta, self.rho, rho_delta=self.rho_delta)
        eps = self.worst_epsilon if self.worst_epsilon is not None else self.epsilon
        rho = self.worst_rho if self.worst_rho is not None else self.rho
        # a worst case without a ρ of its own has no ρ's δ either (its zCDP view is its (ε, δ) converted)
        return PrivacyCost(eps, self.delta, rho, rho_delta=self.rho_delta if rho is not None else 0.0)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrivacyCost:
        """A record read back from its fields by name: all of them as :func:`dataclasses.asdict` wrote
        them (the shared admission state), or some with ``epsilon`` among them (the wire carries ε, δ
        and ρ), the others at their defaults.

        It is data from outside this process, so it is checked before it is believed: a name that is
        no field, a missing ε, a number that is not an int or float (a bool is not one), an ``ex_post``
        that is not a bool, or a negative or NaN ``worst_*`` (a filter admits on it) is a ValueError;
        the constructor refuses negative ε, δ, ρ and ρ's δ as always."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"a privacy cost has no field {', '.join(map(repr, unknown))}")
        if "epsilon" not in data:
            raise ValueError("a privacy cost needs its epsilon")
        for name, value in data.items():
            if name == "ex_post":
                if not isinstance(value, bool):
                    raise ValueError(f"ex_post must be a bool, got {value!r}")
            elif value is None and name in _OPTIONAL:
                continue
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, got {value!r}")
            elif name in _OPTIONAL and not value >= 0:  # worst_* (and ρ): also refuses NaN
                raise ValueError(f"{name} must be non-negative, got {value!r}")
        return cls(**data)

    @classmethod
    def zero(cls, *, ex_post: bool = False) -> PrivacyCost:
        """Nothing spent, in every view (ρ 0, not ``None``: its zCDP view is its own zero ρ).

        ``ex_post``: the realized cost of an ex-post run before its first release; it states no worst
        case (the run's reservation holds it)."""
        return cls(0.0, 0.0, 0.0, ex_post=ex_post)


#: the fields of a :class:`PrivacyCost` that may be ``None`` (no such view)
_OPTIONAL = frozenset({"rho", "worst_epsilon", "worst_rho"})

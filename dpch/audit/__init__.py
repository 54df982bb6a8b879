"""Empirical privacy audit on neighbouring datasets (DPCH paper §1 item 3; issue 6).

- :mod:`.neighbours` — D and D′ differing in one worst-case privacy unit, as real tables.
- :mod:`.runner` — sample a query on both (fast: noise redrawn over exact aggregates; full:
  every trial through :meth:`Session.query`, charged to a scratch audit analyst).
- :mod:`.estimators` — ε lower bounds with confidence (threshold tests, a classifier).
- :mod:`.ex_post` — the loss of one outcome against an outcome-dependent (ex-post) claim.
- :mod:`.profile` — a Gaussian release's privacy profile δ(ε), bounded from below (DKW) and
  compared with the curve its calibration claims.
- :mod:`.experiment` — :func:`audit_query`: neighbours → samples → bounds → verdict.
- :mod:`.report` — the text summary and the HTML/PNG report.
- :mod:`.suite` — the fixed audit suite on the demo table.
"""

from dpch.audit.estimators import EpsilonBound, classifier_bound, threshold_bound
from dpch.audit.experiment import AUDIT_ANALYST, AuditResult, audit_query
from dpch.audit.neighbours import NeighbourPair, build_neighbours
from dpch.audit.profile import ClaimedProfile, ProfileBound, claimed_profile, profile_bound
from dpch.audit.runner import AuditRunner, AuditSamples

__all__ = [
    "AUDIT_ANALYST",
    "AuditResult",
    "AuditRunner",
    "AuditSamples",
    "ClaimedProfile",
    "EpsilonBound",
    "NeighbourPair",
    "ProfileBound",
    "audit_query",
    "build_neighbours",
    "claimed_profile",
    "classifier_bound",
    "profile_bound",
    "threshold_bound",
]

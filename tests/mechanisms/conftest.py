"""Fixtures for mechanism tests: deterministic noise sources (fixed seeds are test-only)."""

from __future__ import annotations

import numpy as np
import pytest

from dpch.mechanisms.sampling import FIXED_SEED_ENV, NoiseSource


@pytest.fixture(autouse=True)
def _allow_fixed_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FIXED_SEED_ENV, "1")


@pytest.fixture
def source(_allow_fixed_seeds: None) -> NoiseSource:
    return NoiseSource(seed=20240601)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)

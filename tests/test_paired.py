"""Paired differences: known values, the interval's invariants, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from trace_selector.paired import Paired, paired_difference, points


def test_known_values_and_counts():
    p = paired_difference([1, 1, 0, 0], [0, 1, 0, 1])
    assert (p.diff, p.won, p.lost, p.n) == (0.0, 1, 1, 4)
    assert p.low < 0.0 < p.high and not p.significant
    # Every question won: no resample can differ, so the interval collapses onto the difference.
    q = paired_difference([1, 1, 1], [0, 0, 0], resamples=50)
    assert (q.diff, q.low, q.high, q.won, q.lost) == (100.0, 100.0, 100.0, 3, 0) and q.significant


def test_interval_contains_mean_is_seeded_and_antisymmetric():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    ab, ab2, ba = paired_difference(a, b, seed=3), paired_difference(a, b, seed=3), paired_difference(b, a, seed=3)
    assert ab == ab2
    assert ab.low <= ab.diff <= ab.high
    assert ba.diff == pytest.approx(-ab.diff) and (ba.won, ba.lost) == (ab.lost, ab.won)
    # Same draws, mirrored differences: the interval mirrors too.
    assert (ba.low, ba.high) == pytest.approx((-ab.high, -ab.low))


def test_text_and_round_trip():
    p = paired_difference([1, 0, 1, 1], [0, 0, 1, 1], resamples=200)
    assert Paired(**p.to_dict()).to_text() == p.to_text()
    assert p.to_text().startswith("+25.0 [") and p.to_text().endswith("] 1/0")
    assert points(-0.04) == "+0.0" and points(-1.25) == "-1.2"


def test_bad_input_and_empty():
    with pytest.raises(ValueError, match="equal-length"):
        paired_difference([1, 0], [1])
    with pytest.raises(ValueError, match="resamples"):
        paired_difference([1], [0], resamples=0)
    assert paired_difference([], []).n == 0


def test_scale_keeps_other_quantities_in_their_unit():
    # Trajectories used per question: A uses 2 fewer on every question.
    p = paired_difference([4, 6, 8], [6, 8, 10], resamples=20, scale=1.0)
    assert (p.diff, p.low, p.high, p.won, p.lost) == (-2.0, -2.0, -2.0, 0, 3)

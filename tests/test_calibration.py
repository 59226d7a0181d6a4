"""Selector confidence: answer-aggregated softmax mass and margin, ECE on hand-made data, temperature
fitting recovering a known temperature, and the reliability diagram."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trace_selector.calibration import (
    Scored,
    calibrate,
    confidences,
    expected_calibration_error,
    fit_temperature,
    nll,
    plot_reliability,
    reliability,
    scored_pick,
)
from trace_selector.records.pick import Pick

from tests.conftest import make_group


def test_mass_is_summed_over_one_normalised_answer():
    # "Paris" and "paris." are one answer: logits 0, 0 against London's ln 2 -> 2 / (1 + 1 + 2).
    group = make_group(answers=("Paris", "paris.", "London"))
    pick = Pick("q1", 0, "Paris", scores={0: 0.0, 1: 0.0, 2: math.log(2)})
    item = scored_pick(group, pick, correct=True)
    assert item == Scored((0.0, 0.0, math.log(2)), (0, 0, 1), True)
    assert confidences([item], 1.0) == [pytest.approx(0.5)]
    assert confidences([item], 1.0, "margin") == [pytest.approx(0.0)]
    # T = 2: weights 1, 1, sqrt 2; T -> infinity: uniform over candidates, 2 / 3.
    assert confidences([item], 2.0)[0] == pytest.approx(2 / (2 + math.sqrt(2)))
    assert confidences([item], 1e6)[0] == pytest.approx(2 / 3, abs=1e-5)
    # Missing items stay None in place; a pick without scores (a fallback) has no item.
    assert confidences([None, item, None], 1.0) == [None, pytest.approx(0.5), None]
    assert scored_pick(group, Pick("q1", 0, "Paris")) is None
    with pytest.raises(ValueError, match="temperature must be > 0"):
        confidences([item], 0.0)


def test_unanimous_candidates_are_sure_at_any_temperature():
    item = scored_pick(make_group(answers=("Paris", "Paris")), Pick("q1", 0, "Paris", scores={0: -3.0, 1: 5.0}))
    assert item.unanimous and confidences([item], 0.1) == confidences([item], 100.0) == [pytest.approx(1.0)]
    # Nothing to learn about T from such picks: the fit falls back to 1.
    assert fit_temperature([Scored(item.logits, item.answer, False)]) == 1.0


def test_ece_on_hand_made_data():
    # Bin 0: conf .05, acc 0; bin 1: conf .15, acc 0; bin 9: two at .95 (and 1.0 lands there too), acc 1/2.
    conf, right = [0.05, 0.15, 0.95, 0.95], [False, False, True, False]
    assert expected_calibration_error(conf, right) == pytest.approx((0.05 + 0.15 + 2 * 0.45) / 4)
    rel = reliability(conf + [1.0], right + [True])
    assert rel.counts == (1, 1, 0, 0, 0, 0, 0, 0, 0, 3)
    assert rel.accuracy[9] == pytest.approx(2 / 3) and rel.confidence[9] == pytest.approx(2.9 / 3)
    assert rel.confidence[4] is None
    # One bin [0.5, 0.6): half right at mean confidence 0.525; half right at 0.5 exactly is calibrated.
    assert expected_calibration_error([0.5, 0.5, 0.55, 0.55], [True, False, True, False]) == pytest.approx(0.025)
    assert expected_calibration_error([0.5, 0.5], [True, False]) == 0.0
    assert expected_calibration_error([], []) == 0.0
    with pytest.raises(ValueError, match="3 confidences for 2 outcomes"):
        reliability([0.1, 0.2, 0.3], [True, False])


def test_temperature_fit_recovers_a_known_temperature():
    # The right candidate is drawn from softmax(z / T) and the pick is the argmax: the chosen answer is
    # correct with probability softmax(z / T)[argmax], so the NLL's minimiser is T (up to noise).
    rng = np.random.default_rng(0)
    true_t, items = 2.5, []
    for _ in range(3000):
        z = rng.normal(0.0, 4.0, size=4)
        p = np.exp(z / true_t - np.max(z / true_t))
        right = rng.choice(4, p=p / p.sum())
        best = int(np.argmax(z))
        order = [best] + [i for i in range(4) if i != best]
        items.append(Scored(tuple(float(z[i]) for i in order), (0, 1, 2, 3), bool(right == best)))
    fitted = fit_temperature(items)
    assert fitted == pytest.approx(true_t, rel=0.15)
    assert nll(items, fitted) <= min(nll(items, true_t), nll(items, 1.0), nll(items, 10.0)) + 1e-9
    # Calibrating at the fitted temperature lowers the ECE of the (overconfident) T = 1 reading.
    cal = calibrate(items, source="in-sample")
    assert cal.temperature == pytest.approx(fitted) and cal.calibrated.ece < cal.uncalibrated.ece
    assert cal.n == 3000 and cal.unanimous == 0 and cal.to_dict()["temperature_source"] == "in-sample"


def test_reliability_diagram_png(tmp_path):
    items = [Scored((1.0, 0.0), (0, 1), bool(i % 3)) for i in range(9)] + [Scored((0.2, 0.1), (0, 1), None), None]
    cal = calibrate(items, temperature=2.0, source="given")
    assert cal.n == 9 and cal.unscored == 2 and cal.temperature == 2.0
    plot_reliability({"trace": cal}, tmp_path / "rel.png", title="toy")
    assert (tmp_path / "rel.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

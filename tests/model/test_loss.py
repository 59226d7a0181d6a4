"""Selection loss: known values, masking and gradients."""

from __future__ import annotations

import math

import pytest
import torch

from trace_selector.model.loss import LossConfig, group_logsumexp, pos_weight_of, selection_loss
from tests.conftest import one_thread

LN2 = math.log(2.0)


_one_thread = pytest.fixture(autouse=True)(one_thread)


def test_known_values_at_zero_scores():
    scores = torch.zeros(6)
    labels = torch.tensor([1.0, 0, 1, 1, 0, 0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    terms = selection_loss(scores, labels, groups, pos_weight=1.0)
    # BCE of a zero logit is ln 2 for either label.
    assert math.isclose(float(terms.bce), LN2, rel_tol=1e-6)
    # Listwise, questions with a positive: q0 = ln 2 - ln 1, q1 = ln 2 - ln 2 = 0 -> mean ln2 / 2.
    assert math.isclose(float(terms.listwise), 0.5 * LN2, rel_tol=1e-6)
    # Hard negative, mixed questions (q0 only): softplus(0 - 0) = ln 2.
    assert math.isclose(float(terms.hard_negative), LN2, rel_tol=1e-6)
    assert math.isclose(float(terms.total), 2.5 * LN2, rel_tol=1e-6)


def test_pos_weight_scales_positive_bce():
    scores = torch.zeros(4)
    labels = torch.tensor([1.0, 0, 0, 0])
    terms = selection_loss(scores, labels, torch.zeros(4, dtype=torch.long), pos_weight=3.0, config=LossConfig(1, 0, 0))
    # mean of (3 ln2, ln2, ln2, ln2)
    assert math.isclose(float(terms.total), 1.5 * LN2, rel_tol=1e-6)
    assert pos_weight_of(labels) == 3.0
    assert pos_weight_of(torch.tensor([1.0, float("nan")])) == 1.0


def test_listwise_and_hard_negative_reference_values():
    scores = torch.tensor([2.0, 0.0, -1.0, 3.0])
    labels = torch.tensor([0.0, 1.0, 1.0, 0.0])
    group = torch.tensor([0, 0, 0, 1])
    terms = selection_loss(scores, labels, group)
    lse_all = math.log(math.exp(2) + 1 + math.exp(-1))
    lse_pos = math.log(1 + math.exp(-1))
    assert math.isclose(float(terms.listwise), lse_all - lse_pos, rel_tol=1e-6)
    assert math.isclose(float(terms.hard_negative), math.log1p(math.exp(2.0 - 0.0)), rel_tol=1e-6)


def test_unknown_labels_are_ignored_and_gradients_are_finite():
    scores = torch.tensor([0.5, -0.2, 1.0, 0.3], requires_grad=True)
    labels = torch.tensor([1.0, float("nan"), 0.0, 0.0])
    group = torch.tensor([0, 0, 1, 1])  # question 1 has no positive: no listwise, no hard term
    terms = selection_loss(scores, labels, group)
    terms.total.backward()
    assert torch.isfinite(scores.grad).all()
    assert float(scores.grad[1]) == 0.0
    ref = selection_loss(scores[[0, 2, 3]].detach(), labels[[0, 2, 3]], torch.tensor([0, 1, 1]))
    assert math.isclose(float(terms.total.detach()), float(ref.total), rel_tol=1e-6)


def test_no_positive_anywhere_gives_bce_only():
    terms = selection_loss(torch.zeros(2), torch.zeros(2), torch.tensor([0, 1]))
    assert float(terms.listwise) == 0.0 and float(terms.hard_negative) == 0.0
    assert math.isclose(float(terms.total), LN2, rel_tol=1e-6)


def test_group_logsumexp_empty_group_is_minus_inf():
    out = group_logsumexp(torch.tensor([0.0, 0.0]), torch.tensor([0, 0]), 2)
    assert math.isclose(float(out[0]), LN2, rel_tol=1e-6) and out[1] == float("-inf")


def test_loss_config_validation():
    with pytest.raises(ValueError):
        LossConfig(bce=-1)
    with pytest.raises(ValueError):
        LossConfig(0, 0, 0)

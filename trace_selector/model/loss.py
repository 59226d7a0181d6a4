"""Selection loss: weighted BCE per candidate + listwise per question + hard-negative margin.

    terms = selection_loss(scores, labels, group, pos_weight=3.0)
    terms.total.backward()

- BCE with ``pos_weight = negatives / positives`` over the training candidates, so a pool where most
  trajectories are wrong does not teach the model to call everything wrong.
- Listwise: for each question with at least one positive, ``logsumexp(all) - logsumexp(positives)``,
  i.e. minus the log of the softmax mass on the correct candidates; averaged over those questions.
  This is what argmax selection needs: correct candidates ranked above wrong ones *within* a question.
- Hard negative: for each question with both kinds, ``softplus(max negative - max positive)``,
  averaged over those questions; it targets exactly the pair that decides the argmax.

Candidates with an unknown label (NaN) are ignored by every term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass
class LossConfig:
    """Weights of the three loss terms."""

    bce: float = 1.0
    """Weight of the per-candidate weighted binary cross-entropy."""
    listwise: float = 1.0
    """Weight of the per-question listwise term."""
    hard_negative: float = 1.0
    """Weight of the hard-negative softplus margin."""

    def __post_init__(self) -> None:
        for name in ("bce", "listwise", "hard_negative"):
            if getattr(self, name) < 0:
                raise ValueError(f"loss weight {name} must be >= 0, got {getattr(self, name)}")
        if self.bce + self.listwise + self.hard_negative == 0:
            raise ValueError("at least one loss weight must be positive")


class LossTerms(NamedTuple):
    """The weighted total and each unweighted term (scalars)."""

    total: Tensor
    bce: Tensor
    listwise: Tensor
    hard_negative: Tensor


def group_logsumexp(values: Tensor, group: Tensor, num_groups: int) -> Tensor:
    """logsumexp of `values` per group; -inf for groups with no finite entry.

    Shapes: values [N], group [N] -> [num_groups].
    """
    top = values.new_full((num_groups,), float("-inf"))
    top = top.scatter_reduce(0, group, values, "amax", include_self=True)
    safe = torch.where(torch.isfinite(top), top, torch.zeros_like(top)).detach()
    total = values.new_zeros(num_groups).index_add_(0, group, torch.exp(values - safe[group]))
    # log(0) of an empty group would send NaN gradients back through the sum; keep it off the graph.
    nonempty = total > 0
    lse = torch.log(torch.where(nonempty, total, torch.ones_like(total))) + safe
    return torch.where(nonempty, lse, torch.full_like(lse, float("-inf")))


def group_max(values: Tensor, group: Tensor, num_groups: int) -> Tensor:
    """Maximum per group (-inf for empty groups). Shapes: [N], [N] -> [num_groups]."""
    out = values.new_full((num_groups,), float("-inf"))
    return out.scatter_reduce(0, group, values, "amax", include_self=True)


def pos_weight_of(labels: Tensor) -> float:
    """negatives / positives over known labels (1.0 when either count is zero)."""
    known = labels[~torch.isnan(labels)]
    pos = int((known > 0.5).sum())
    neg = int(known.numel() - pos)
    return neg / pos if pos and neg else 1.0


def selection_loss(
    scores: Tensor,
    labels: Tensor,
    group: Tensor,
    pos_weight: float = 1.0,
    config: LossConfig | None = None,
) -> LossTerms:
    """Loss of one batch of candidates.

    Args:
        scores: candidate logits.
        labels: 1.0 correct, 0.0 wrong, NaN unknown.
        group: question index of each candidate (0..G-1, e.g. the answer nodes' batch vector).
        pos_weight: BCE weight of positive candidates (negatives / positives in the training set).
        config: term weights (default all 1).

    Shapes:
        scores [A], labels [A], group [A] -> `LossTerms` of scalars.
    """
    config = config or LossConfig()
    known = ~torch.isnan(labels)
    scores, labels, group = scores[known], labels[known], group[known]
    zero = scores.sum() * 0.0
    if scores.numel() == 0:
        return LossTerms(zero, zero, zero, zero)
    weight = torch.tensor(pos_weight, dtype=scores.dtype, device=scores.device)
    bce = F.binary_cross_entropy_with_logits(scores, labels, pos_weight=weight)

    num_groups = int(group.max()) + 1
    positive = labels > 0.5
    neg_inf = torch.full_like(scores, float("-inf"))
    lse_all = group_logsumexp(scores, group, num_groups)
    lse_pos = group_logsumexp(torch.where(positive, scores, neg_inf), group, num_groups)
    has_pos = torch.isfinite(lse_pos)
    listwise = (lse_all - lse_pos)[has_pos].mean() if bool(has_pos.any()) else zero

    max_pos = group_max(torch.where(positive, scores, neg_inf), group, num_groups)
    max_neg = group_max(torch.where(positive, neg_inf, scores), group, num_groups)
    mixed = torch.isfinite(max_pos) & torch.isfinite(max_neg)
    hard = F.softplus(max_neg[mixed] - max_pos[mixed]).mean() if bool(mixed.any()) else zero

    total = config.bce * bce + config.listwise * listwise + config.hard_negative * hard
    return LossTerms(total, bce, listwise, hard)

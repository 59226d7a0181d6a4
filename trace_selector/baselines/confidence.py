"""Trajectory confidence from token log-probabilities, in the sense of DeepConf (Fu et al. 2025,
https://arxiv.org/abs/2508.15260), adapted to pools that record only the sampled token's log-prob.

DeepConf's token confidence is C_i = -mean_j log P_i(j) over the top-k candidate tokens at position i
(k around 20): a peaked distribution has very negative tail log-probs and therefore a high C_i. Our
pools (DESIGN §Records) store only log P of the token that was sampled. With k = 1 the same formula,
-log P(sampled), is the token's *surprisal*, which grows when the model is unsure, so using it as a
confidence would rank the most surprised trajectories first. We therefore use the sampled token's
log-probability itself as the per-token confidence (c_i = log P(sampled) <= 0; higher = surer) and
keep DeepConf's trajectory scores on top of it:

- ``mean``: mean c_i over all tokens;
- ``tail``: mean c_i over the last `tail` tokens (DeepConf: 2048);
- ``bottom10``: mean of the lowest 10% of group confidences, a group being a sliding window of
  `window` tokens (DeepConf: 2048) moved one token at a time; at least one group is kept;
- ``lowest``: the lowest group confidence.

The window and tail are clipped to the trajectory length, so short trajectories have one group.
A trajectory's tokens are the sampled tokens of every turn in order (`Step.logprobs` of each step,
then `Trajectory.final_logprobs`). Votes weight a trajectory by exp(score), the geometric-mean token
probability of the scored span, which is positive and monotone in the score; with `keep_top` < 1 only
the most confident trajectories vote (DeepConf's confidence filtering).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from trace_selector.records import Trajectory

ConfScore = Literal["mean", "tail", "bottom10", "lowest"]
"""Trajectory-level confidence scores."""

CONF_SCORES: tuple[str, ...] = ("mean", "tail", "bottom10", "lowest")


@dataclass(slots=True)
class ConfidenceConfig:
    """How token log-probabilities become one trajectory score."""

    score: ConfScore = "bottom10"
    """Which trajectory score to use (DeepConf reports bottom-10% group as the strongest offline)."""
    window: int = 2048
    """Sliding-window group size in tokens, clipped to the trajectory length."""
    tail: int = 2048
    """Number of final tokens for the ``tail`` score, clipped to the trajectory length."""
    bottom_fraction: float = 0.1
    """Fraction of lowest groups averaged by ``bottom10``."""
    keep_top: float = 1.0
    """DeepConf filtering: only this fraction of a question's answered trajectories, the most confident
    (rounded up), vote (DeepConf-low 0.1, DeepConf-high 0.9; 1.0 = all vote, weighted)."""

    def __post_init__(self) -> None:
        if self.score not in CONF_SCORES:
            raise ValueError(f"score must be one of {', '.join(CONF_SCORES)}, got {self.score!r}")
        if self.window < 1 or self.tail < 1:
            raise ValueError(f"window and tail must be >= 1, got window={self.window}, tail={self.tail}")
        if not 0.0 < self.bottom_fraction <= 1.0:
            raise ValueError(f"bottom_fraction must be in (0, 1], got {self.bottom_fraction}")
        if not 0.0 < self.keep_top <= 1.0:
            raise ValueError(f"keep_top must be in (0, 1], got {self.keep_top}")


def token_logprobs(traj: Trajectory) -> list[float] | None:
    """All sampled-token log-probs of a trajectory in generation order, or None if it has none."""
    parts = [s.logprobs for s in traj.steps if s.logprobs] + ([traj.final_logprobs] if traj.final_logprobs else [])
    if not parts:
        return None
    return [float(x) for p in parts for x in p]


def group_confidences(logprobs: Sequence[float], window: int) -> list[float]:
    """Mean log-prob of every window of `window` consecutive tokens (stride 1; clipped to the length)."""
    n = len(logprobs)
    if n == 0:
        return []
    w = min(window, n)
    # Running sum: O(n) instead of O(n * w) for 2048-token windows over long trajectories.
    total = math.fsum(logprobs[:w])
    out = [total / w]
    for i in range(w, n):
        total += logprobs[i] - logprobs[i - w]
        out.append(total / w)
    return out


def trajectory_confidence(logprobs: Sequence[float], cfg: ConfidenceConfig) -> float:
    """The configured trajectory score of a non-empty sequence of sampled-token log-probs."""
    if not logprobs:
        raise ValueError("no log-probabilities")
    if cfg.score == "mean":
        return math.fsum(logprobs) / len(logprobs)
    if cfg.score == "tail":
        tail = logprobs[-min(cfg.tail, len(logprobs)) :]
        return math.fsum(tail) / len(tail)
    groups = group_confidences(logprobs, cfg.window)
    if cfg.score == "lowest":
        return min(groups)
    keep = max(1, math.ceil(cfg.bottom_fraction * len(groups) - 1e-9))
    lowest = sorted(groups)[:keep]
    return math.fsum(lowest) / keep

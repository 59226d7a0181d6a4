"""Voting baselines: single rollout (expectation), majority vote, votes weighted by stated or token
confidence, and the grounded vote (answers found in the evidence their trajectory read).

All votes use `records.answers.vote` (normalised answers, empty answers never vote, ties to the answer
whose first trajectory has the smallest sample_id). Weighted votes need a signal the pool may not have:

- a pool (or subset) where no trajectory carries the signal makes the method *skipped* with a reason;
- a question where no answered trajectory carries it falls back to the majority vote, recorded in
  `Pick.fallback`;
- within a question, an answered trajectory without the signal gets the mean weight of those that
  have it (neutral imputation, counted in ``Pick.extra["imputed"]``), so it is neither dropped nor
  favoured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trace_selector.baselines.confidence import ConfidenceConfig, DeepConfVote, deepconf_vote
from trace_selector.baselines.pick import majority_pick, pick_from
from trace_selector.records import QuestionGroup, Trajectory
from trace_selector.records.answers import has_answer, vote
from trace_selector.records.evidence import is_grounded
from trace_selector.records.pick import Pick


class Single:
    """Single rollout: the expected correctness of one trajectory drawn uniformly from the K.

    Trajectories without an answer are part of the draw (they count as wrong), so this is the mean
    over all K, the usual "pass@1" of the pool.
    """

    name = "single"

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        return None

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        picks = []
        for g in groups:
            n = len(g.trajectories)
            weights = {t.sample_id: 1.0 / n for t in g.trajectories} if n else {}
            picks.append(Pick(g.question_id, None, "", weights=weights))
        return picks


class Majority:
    """Majority vote over normalised answers."""

    name = "majority"

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        return None

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        return [majority_pick(g) for g in groups]


@dataclass(slots=True)
class WeightedVote:
    """Vote weighted by a per-trajectory signal (`weight_of` returns None when a trajectory lacks it)."""

    name: str
    weight_of: Callable[[Trajectory], float | None]
    """Trajectory -> non-negative weight, or None when the trajectory lacks the signal."""
    missing: str
    """Skip reason when no trajectory has the signal."""
    keep_top: float = 1.0
    """Fraction of answered trajectories (highest weight first, rounded up) that vote."""
    _cache: dict[tuple[str, int], float | None] = field(default_factory=dict)

    def _weight(self, traj: Trajectory) -> float | None:
        # Subsets of the budget curve revisit the same trajectories many times: compute each weight once.
        key = (traj.question_id, traj.sample_id)
        if key not in self._cache:
            self._cache[key] = self.weight_of(traj)
        return self._cache[key]

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        if any(self._weight(t) is not None for g in groups for t in g.trajectories):
            return None
        return self.missing

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        return [self._select_one(g) for g in groups]

    def _select_one(self, group: QuestionGroup) -> Pick:
        answered = [t for t in group.trajectories if has_answer(t)]
        raw = {t.sample_id: self._weight(t) for t in answered}
        known = [w for w in raw.values() if w is not None]
        if not known:
            fallback = "no answered trajectory has the signal; majority vote" if answered else None
            return majority_pick(group, fallback=fallback)
        mean = math.fsum(known) / len(known)
        weights = [raw[t.sample_id] if raw[t.sample_id] is not None else mean for t in answered]
        scores = {t.sample_id: w for t, w in zip(answered, weights)}
        if self.keep_top < 1.0:
            n = math.ceil(self.keep_top * len(answered) - 1e-9)
            top = sorted(zip(answered, weights), key=lambda tw: (-tw[1], tw[0].sample_id))[:n]
            answered, weights = [t for t, _ in top], [w for _, w in top]
        winner, _ = vote(answered, weights)
        imputed = sum(1 for w in raw.values() if w is None)
        return pick_from(group, winner, scores=scores, extra={"imputed": imputed} if imputed else {})


def _stated(traj: Trajectory) -> float | None:
    if traj.confidence is None:
        return None
    return min(1.0, max(0.0, float(traj.confidence)))


def stated_confidence_vote() -> WeightedVote:
    """Vote weighted by the confidence in [0, 1] the agent stated with its answer."""
    return WeightedVote("weighted_stated", _stated, "pool has no stated confidences (Trajectory.confidence)")


def token_confidence_vote(cfg: ConfidenceConfig | None = None, name: str = "weighted_token") -> DeepConfVote:
    """DeepConf vote weighted by token confidence (see `baselines.confidence`)."""
    return deepconf_vote(cfg, name)


UNGROUNDED_WEIGHT = 1e-3
"""Vote of a trajectory whose answer is not in its evidence: small enough that 16 of them lose to one
grounded answer, non-zero so that they still decide among themselves when nothing is grounded."""


def grounded_vote() -> WeightedVote:
    """Majority vote among trajectories whose answer occurs in the evidence they read (`evidence`);
    the plain majority among the rest only when no answer is grounded."""
    return WeightedVote(
        "grounded_vote", lambda t: 1.0 if is_grounded(t) else UNGROUNDED_WEIGHT, "pool has no trajectories"
    )

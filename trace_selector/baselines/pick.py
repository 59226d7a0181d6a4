"""What every selection method returns for one question, and the shared vote with its tie rule.

A `Pick` names the chosen trajectory (so selection-based methods always return an existing answer),
the answer text, optional per-trajectory scores, and the method's cost and fallbacks. The `single`
baseline is not a choice but an expectation; it sets `weights` (a distribution over trajectories) and
is scored as the weighted mean of their correctness.

Tie rule (used by every vote in `baselines/`): the answers are grouped by `normalize_answer`; the
group with the largest total weight wins; among tied groups, the one whose first member has the
smallest `sample_id` wins, and the returned trajectory is that first member. Trajectories whose
answer normalises to "" never vote. With no non-empty answer the pick is empty (`sample_id` None,
answer ""), which scores as wrong because no trajectory answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trace_selector.answers import normalize_answer
from trace_selector.records import QuestionGroup, Trajectory

# Totals within this distance count as tied, so float sums of equal weights in a different order
# (0.1 + 0.2 vs 0.2 + 0.1) do not break ties arbitrarily.
TIE_EPS = 1e-9


@dataclass(slots=True)
class Pick:
    """One method's answer for one question."""

    question_id: str
    """The question."""
    sample_id: int | None
    """Chosen trajectory; None when nothing was chosen (no answers) or for an expectation (`single`)."""
    answer: str
    """The chosen answer text as the trajectory stated it ("" when nothing was chosen)."""
    scores: dict[int, float] = field(default_factory=dict)
    """Per-trajectory score the method ranked by (sample_id -> score), when it has one."""
    weights: dict[int, float] | None = None
    """Distribution over trajectories for expectation methods; the pick is scored as their weighted mean."""
    tokens_in: int = 0
    """Prompt tokens the method spent on this question (LLM methods)."""
    tokens_out: int = 0
    """Generated tokens the method spent on this question (LLM methods)."""
    parse_failures: int = 0
    """Model outputs that could not be parsed and needed a fallback."""
    fallback: str | None = None
    """Why the method fell back to another rule for this question (None when it did not)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Method-specific details (report tokens, judge rubric scores, agent turns, ...)."""


class Method(Protocol):
    """A selection method: skipped on pools that lack what it needs, else one `Pick` per group."""

    name: str

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        """Why the method cannot run on these groups (None when it can)."""
        ...

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        """One pick per group, in order (groups may be subsets of a pool's trajectories)."""
        ...


def has_answer(traj: Trajectory) -> bool:
    """True if the trajectory's answer is non-empty after normalisation."""
    return bool(normalize_answer(traj.answer))


def vote(trajs: Sequence[Trajectory], weights: Sequence[float] | None = None) -> tuple[Trajectory | None, dict[str, float]]:
    """Weighted vote over normalised answers with the module's tie rule.

    Returns the winning group's first trajectory (by sample_id) or None when no trajectory answered,
    and the total weight per normalised answer.
    """
    if weights is None:
        weights = [1.0] * len(trajs)
    if len(weights) != len(trajs):
        raise ValueError(f"{len(weights)} weights for {len(trajs)} trajectories")
    totals: dict[str, float] = {}
    first: dict[str, Trajectory] = {}
    for traj, w in sorted(zip(trajs, weights), key=lambda tw: tw[0].sample_id):
        key = normalize_answer(traj.answer)
        if not key:
            continue
        totals[key] = totals.get(key, 0.0) + float(w)
        first.setdefault(key, traj)
    if not totals:
        return None, totals
    best = max(totals.values())
    tied = [k for k, v in totals.items() if v >= best - TIE_EPS]
    winner = min(tied, key=lambda k: first[k].sample_id)
    return first[winner], totals


def pick_from(group: QuestionGroup, traj: Trajectory | None, **kwargs: Any) -> Pick:
    """A `Pick` of `traj` (or the empty pick when None)."""
    if traj is None:
        return Pick(group.question_id, None, "", **kwargs)
    return Pick(group.question_id, traj.sample_id, traj.answer, **kwargs)


def majority_pick(group: QuestionGroup, **kwargs: Any) -> Pick:
    """Plain majority vote over the group (also the fallback of every other method)."""
    traj, _ = vote(group.trajectories)
    return pick_from(group, traj, **kwargs)


def by_sample(group: QuestionGroup) -> dict[int, Trajectory]:
    """sample_id -> trajectory."""
    return {t.sample_id: t for t in group.trajectories}

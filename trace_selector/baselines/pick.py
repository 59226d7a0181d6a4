"""The selection-method protocol and the helpers every baseline builds its `records.pick.Pick`s with.

Votes use the one `records.answers.vote` (and its tie rule); `majority_pick` is also the fallback of
every other method.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from trace_selector.records import QuestionGroup, Trajectory
from trace_selector.records.answers import vote
from trace_selector.records.pick import Pick


class Method(Protocol):
    """A selection method: skipped on pools that lack what it needs, else one `Pick` per group."""

    name: str

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        """Why the method cannot run on these groups (None when it can)."""
        ...

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        """One pick per group, in order (groups may be subsets of a pool's trajectories)."""
        ...


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

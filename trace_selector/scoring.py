"""Scoring one pick and one method's run: EM and F1 of a pick against the question's gold aliases (the
stored `correct` of the picked trajectory when a pool has none), and `MethodRun`, a method's picks on
the whole pool with their scores. Every row of `evaluate`, the budget curve and the adaptive tables
score through `score_pick`, so all methods are scored the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from trace_selector.records import QuestionGroup
from trace_selector.records.answers import exact_match, f1_score, is_correct
from trace_selector.records.pick import Pick


def score_pick(group: QuestionGroup, pick: Pick) -> tuple[float, float]:
    """(EM, F1) in [0, 1] of one pick (expectations for `Pick.weights`)."""
    by_id = {t.sample_id: t for t in group.trajectories}
    if pick.weights is not None:
        em = f1 = 0.0
        for sid, w in pick.weights.items():
            e, f = score_pick(group, Pick(group.question_id, sid, by_id[sid].answer))
            em += w * e
            f1 += w * f
        return em, f1
    if pick.sample_id is None and not pick.answer:
        return 0.0, 0.0
    if group.golden_answers:
        return exact_match(pick.answer, group.golden_answers), f1_score(pick.answer, group.golden_answers)
    traj = by_id.get(pick.sample_id) if pick.sample_id is not None else None
    ok = float(traj is not None and bool(is_correct(traj, group.golden_answers)))
    return ok, ok


def em_of(group: QuestionGroup, pick: Pick) -> float:
    """EM in [0, 1] of a pick (what adaptive tables and calibration labels read)."""
    return score_pick(group, pick)[0]


@dataclass(slots=True)
class MethodRun:
    """A method's picks on the full pool and what they took."""

    picks: list[Pick]
    seconds: float
    scores: list[tuple[float, float]] = field(default_factory=list)
    """(EM, F1) of each pick, filled once by `MethodRun.score` for the summary, pairing and JSONL."""

    def score(self, groups: Sequence[QuestionGroup]) -> "MethodRun":
        self.scores = [score_pick(g, p) for g, p in zip(groups, self.picks)]
        return self

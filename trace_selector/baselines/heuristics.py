"""Heuristic baselines: fewest / most tool calls, and the oracle (pass@K).

Tool calls are steps whose action is a real tool (search, open, find); "invalid" steps, where the
model produced no usable action, do not count. Only answered trajectories compete. Ties on the
count are broken by a majority vote among the tied trajectories (then the earliest sample_id, as in
`records.answers.vote`), so the rule is deterministic and never prefers an arbitrary order.
"""

from __future__ import annotations

from collections.abc import Sequence

from trace_selector.baselines.pick import pick_from
from trace_selector.records import QuestionGroup, Trajectory
from trace_selector.records.answers import has_answer, is_correct, vote
from trace_selector.records.pick import Pick

TOOL_ACTIONS = frozenset({"search", "open", "find"})


def tool_calls(traj: Trajectory) -> int:
    """Number of real tool calls in a trajectory."""
    return sum(1 for s in traj.steps if s.action in TOOL_ACTIONS)


class ToolCount:
    """Pick the answered trajectory with the fewest (or most) tool calls."""

    def __init__(self, fewest: bool):
        self.fewest = fewest
        self.name = "fewest_tools" if fewest else "most_tools"

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        return None

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        picks = []
        for g in groups:
            answered = [t for t in g.trajectories if has_answer(t)]
            counts = {t.sample_id: float(tool_calls(t)) for t in answered}
            if not answered:
                picks.append(pick_from(g, None))
                continue
            best = min(counts.values()) if self.fewest else max(counts.values())
            winner, _ = vote([t for t in answered if counts[t.sample_id] == best])
            picks.append(pick_from(g, winner, scores=counts))
        return picks


class Oracle:
    """Pass@K: picks a correct trajectory whenever one exists (an upper bound, not a method)."""

    name = "oracle"

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        return None

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        picks = []
        for g in groups:
            hit = next((t for t in sorted(g.trajectories, key=lambda t: t.sample_id) if is_correct(t, g.golden_answers)), None)
            picks.append(pick_from(g, hit) if hit else pick_from(g, vote(g.trajectories)[0]))
        return picks

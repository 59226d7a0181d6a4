"""The ``standard`` strategy: K independent samples of the same prompt."""

from __future__ import annotations

from collections.abc import Sequence

from trace_selector.rollout.strategies.context import Groups, QuestionLike, StrategyContext


def run_standard(ctx: StrategyContext, questions: Sequence[QuestionLike],
                 sample_ids: Sequence[Sequence[int]]) -> Groups:
    """K independent samples of the same prompt (only the ids still missing, after a resume)."""
    groups = [[ctx.start(q, s) for s in ids] for q, ids in zip(questions, sample_ids)]
    ctx.agent.run([r for g in groups for r in g], on_batch=ctx.on_batch)
    return groups

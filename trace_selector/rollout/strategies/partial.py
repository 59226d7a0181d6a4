"""Partial rollout (ParallelMuse): branch the K-budget from the most uncertain steps of a few rollouts.

1. M initial rollouts per question.
2. Every sampled step gets a perplexity exp(-mean log p) of its sampled tokens, separately over the
   reasoning region (tokens before `tool_start`) and the tool-call region (from `tool_start`), plus
   over all its tokens.
3. The top-k steps by the chosen region are branch points: ``reasoning`` and ``exploration`` rank
   by that region's perplexity, ``homogeneous`` by all tokens, ``mixed`` alternates between the
   reasoning and the exploration ranking.
4. Each branch point gets b branches, resampled from the prompt token ids up to the start of that
   step (token-identical, so the prefix cache serves the shared part) with the earlier steps
   inherited. Branches record `parent_sample` and `branch_step`.
5. Fresh rollouts fill the budget N = K when there are fewer branch points than asked for.

Defaults are ParallelMuse's released setting at a budget of N = 8: M = 1, k = 2, b = 3, so one
initial rollout, 2 x 3 branches and one fresh fill. Step 0 may be a branch point: the exploration
perplexity of these agents peaks at the first tool call, where the whole search plan is chosen, and
branching there still explores even though it reuses only the prompt. Our earlier setting (M = 2,
k = 1, b = 1 or 2, `min_step` = 1, which spends the budget on complete rollouts and never branches
at the first step) is ``partial.initial=2 partial.top_steps=1 partial.branches=2 partial.min_step=1``.

Injected steps (DivInit) and steps without log-probabilities are never branch points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trace_selector.records import Step
from trace_selector.rollout.agent import Rollout
from trace_selector.rollout.strategies.context import Groups, QuestionLike, StrategyContext, require_full
from trace_selector.types import Region


@dataclass
class PartialConfig:
    """ParallelMuse parameters (the budget N is the rollout's k); defaults are the paper's at N = 8."""

    initial: int = 1
    """M: full rollouts sampled first (ParallelMuse: 1)."""
    top_steps: int = 2
    """k: branch points chosen per question (ParallelMuse: 2)."""
    branches: int = 3
    """b: branches per branch point (ParallelMuse: 3); M + k * b = 7 at N = 8, one fresh rollout fills."""
    region: Region = "exploration"
    """Which tokens' perplexity ranks the steps: reasoning | exploration | mixed | homogeneous."""
    min_step: int = 0
    """First step index that may be a branch point. ParallelMuse allows step 0 (its exploration
    perplexity peaks there), although such a branch shares only the initial prompt and so saves no
    computation; 1 keeps the budget for branches that reuse a prefix."""

    def __post_init__(self) -> None:
        if self.initial < 1:
            raise ValueError(f"initial must be >= 1, got {self.initial}")
        if self.top_steps < 0 or self.branches < 0:
            raise ValueError("top_steps and branches must be >= 0")
        if self.min_step < 0:
            raise ValueError(f"min_step must be >= 0, got {self.min_step}")
        if self.region not in ("reasoning", "exploration", "mixed", "homogeneous"):
            raise ValueError(f"region must be reasoning|exploration|mixed|homogeneous, got {self.region!r}")

    def budget(self) -> int:
        """Trajectories this config produces before filling: M + k * b."""
        return self.initial + self.top_steps * self.branches


def perplexity(logprobs: Sequence[float]) -> float | None:
    """exp(-mean log p); None for an empty region."""
    return math.exp(-sum(logprobs) / len(logprobs)) if logprobs else None


def step_perplexity(step: Step) -> dict[str, float | None]:
    """Perplexity of a step's reasoning, exploration (tool-call) and all tokens."""
    lps = step.logprobs or []
    cut = len(lps) if step.tool_start is None else step.tool_start
    return {
        "reasoning": perplexity(lps[:cut]),
        "exploration": perplexity(lps[cut:]) if step.tool_start is not None else None,
        "homogeneous": perplexity(lps),
    }


def select_steps(rollouts: Sequence[Rollout], k: int, region: Region, min_step: int = 0) -> list[tuple[int, int]]:
    """Top-`k` (rollout index, step index >= `min_step`) branch points by perplexity of `region`
    (highest first, ties to the earlier rollout and step)."""
    scored: dict[str, list[tuple[float, int, int]]] = {"reasoning": [], "exploration": [], "homogeneous": []}
    for i, r in enumerate(rollouts):
        for j, step in enumerate(r.steps):
            if j < min_step or not step.logprobs:
                continue
            for name, value in step_perplexity(step).items():
                if value is not None:
                    scored[name].append((-value, i, j))
    ranked = {name: [(i, j) for _, i, j in sorted(v)] for name, v in scored.items()}
    if region != "mixed":
        return ranked[region][:k]
    picks: list[tuple[int, int]] = []
    streams = [iter(ranked["reasoning"]), iter(ranked["exploration"])]
    while len(picks) < k and streams:
        for stream in list(streams):
            nxt = next((p for p in stream if p not in picks), None)
            if nxt is None:
                streams.remove(stream)
            elif len(picks) < k:
                picks.append(nxt)
    return picks


def run_partial(ctx: StrategyContext, questions: Sequence[QuestionLike],
                sample_ids: Sequence[Sequence[int]]) -> Groups:
    """M initial rollouts, b branches at each of the top-k uncertain steps, fresh fills up to K."""
    require_full(ctx, sample_ids, "partial")
    cfg: PartialConfig = ctx.options or PartialConfig()
    m = min(cfg.initial, ctx.k)
    groups = [[ctx.start(q, s) for s in range(m)] for q in questions]
    ctx.agent.run([r for g in groups for r in g], on_batch=ctx.on_batch)

    second: list[Rollout] = []
    toolbox = ctx.agent.toolbox
    for q, group in zip(questions, groups):
        initial = list(group)
        room = ctx.k - m
        points = select_steps(initial, min(cfg.top_steps, room // max(cfg.branches, 1)), cfg.region, cfg.min_step)
        for i, j in points:
            for _ in range(cfg.branches):
                child = initial[i].branch(j, len(group), toolbox)
                child.seed = ctx.seed_for(q.id, child.sample_id)
                group.append(child)
                second.append(child)
        ctx.stats["partial_branches"] += len(group) - m
        while len(group) < ctx.k:
            fresh = ctx.start(q, len(group))
            group.append(fresh)
            second.append(fresh)
            ctx.stats["partial_fresh_fill"] += 1
    ctx.agent.run(second, on_batch=ctx.on_batch)
    return groups

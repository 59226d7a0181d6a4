"""What every rollout strategy gets and returns: the `StrategyContext` (agent, budget, seeds, counters)
and groups of finished `Rollout`s, one list per question. The strategies themselves and their name
table are in this package's other modules and `__init__`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trace_selector.engines.base import GenRequest, GenResult
from trace_selector.rollout import prompts
from trace_selector.rollout.agent import Agent, Rollout


class QuestionLike(Protocol):
    """What a strategy needs of a question (`search.setting.Question` has these)."""

    id: str
    question: str
    golden_answers: list[str]


@dataclass
class StrategyContext:
    """Everything a strategy run needs besides the questions."""

    agent: Agent
    k: int
    """Trajectories per question (the budget N of partial rollout)."""
    seed: int = 0
    """Base seed; trajectory seeds are derived from it, the question position and the sample id."""
    options: Any = None
    """The strategy's own config section (DivInitConfig, PartialConfig, ReplicasConfig) or None."""
    on_batch: Callable[[list[GenResult]], None] | None = None
    """Called after every engine batch (progress bars)."""
    positions: dict[str, int] = field(default_factory=dict)
    """Question id -> position in the split, for seeds that do not depend on chunking."""
    stats: Counter = field(default_factory=Counter)
    """Strategy counters for the pool metadata (fills, branches, proposal calls)."""

    def seed_for(self, question_id: str, sample_id: int) -> int:
        return self.seed + 1000 * self.positions.get(str(question_id), 0) + sample_id

    def start(self, q: QuestionLike, sample_id: int, system_suffix: str = "") -> Rollout:
        return self.agent.start(q.id, q.question, list(q.golden_answers), sample_id,
                                system_suffix=system_suffix, seed=self.seed_for(q.id, sample_id))

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """One accounted engine batch outside the agent loop (proposal calls)."""
        import time

        t0 = time.perf_counter()
        results = self.agent.engine.generate(requests)
        self.agent.accounting.add_results(results, time.perf_counter() - t0)
        if self.on_batch is not None:
            self.on_batch(results)
        return results

    def list_request(self, text: str, max_tokens: int, temperature: float) -> GenRequest:
        """A request for a numbered list (DivInit queries, OHG strategies): the reply starts at "1."."""
        engine = self.agent.engine
        ids = engine.chat_token_ids([{"role": "user", "content": text}], add_generation_prompt=True)
        ids = ids + engine.encode(prompts.LIST_PREFILL)
        return GenRequest(prompt_token_ids=ids, max_tokens=max_tokens, temperature=temperature,
                          top_p=self.agent.cfg.top_p)


Groups = list[list[Rollout]]
StrategyFn = Callable[[StrategyContext, Sequence[QuestionLike], Sequence[Sequence[int]]], Groups]


def require_full(ctx: StrategyContext, sample_ids: Sequence[Sequence[int]], name: str) -> None:
    """Coupled strategies produce a question's whole group at once (the runner drops partial groups)."""
    for ids in sample_ids:
        if sorted(ids) != list(range(ctx.k)):
            raise ValueError(f"{name} needs all {ctx.k} samples of a question at once, got {list(ids)}")

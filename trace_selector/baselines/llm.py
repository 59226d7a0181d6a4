"""The LLM side shared by the aggregator baselines: settings, batched chat calls with token
accounting, token-budget clipping, and mapping a small model's free text back onto one of the
existing candidate answers.

The aggregators run on the same `Engine` as rollouts (rollout/generation.py), greedy by default, so
results are reproducible and the prefix cache is shared across calls with a common prompt head.

Mapping model output to a candidate (`match_candidate`), in order:
1. the answer span: the last ``<answer>...</answer>``, else ``\\boxed{...}``, else the text after the
   last "answer:" / "final answer:", else the first non-empty line;
2. a candidate whose normalised answer equals the span's (so a numeric answer "3" is not read as a
   reference);
3. a reference to an answered candidate by number ("3", "Candidate 3", "Report #3");
4. the longest candidate answer contained (as whole words) in the span, then in the whole output;
5. the candidate with the best token F1 against the span, if that F1 >= 0.5.
Anything else is a parse failure; the caller falls back to the majority vote and counts it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from trace_selector.answers import f1_score, normalize_answer
from trace_selector.records import Trajectory
from trace_selector.rollout.generation import Engine, GenRequest


@dataclass(slots=True)
class LLMConfig:
    """Settings of every LLM aggregator and judge."""

    max_prompt_tokens: int = 1536
    """Prompt budget per call; trajectory text is clipped to fit (keep prompt + output <= the engine's max_model_len)."""
    answer_tokens: int = 160
    """Most generated tokens for an integrate / final-answer call (SolAgg, SummAgg)."""
    report_tokens: int = 256
    """Most generated tokens for one SummAgg trajectory report."""
    judge_tokens: int = 64
    """Most generated tokens for one rubric judgement."""
    action_tokens: int = 48
    """Most generated tokens for one AggAgent action."""
    temperature: float = 0.0
    """Sampling temperature of every call (0 = greedy, reproducible)."""
    constrained: bool = True
    """Constrain judge scores and agent actions with a structured-output regex (small models rarely follow formats)."""
    agent_max_turns: int = 4
    """AggAgent tool turns before it must finish (the last turn only allows finish)."""
    observation_tokens: int = 256
    """Most tokens of one AggAgent tool observation."""
    doc_chars: int = 240
    """Characters kept of each retrieved document in rendered transcripts."""
    skip_unanimous: bool = True
    """Make no call for a question whose answered trajectories all agree (any selection would return that answer)."""

    def __post_init__(self) -> None:
        for name in ("max_prompt_tokens", "answer_tokens", "report_tokens", "judge_tokens", "action_tokens",
                     "agent_max_turns", "observation_tokens", "doc_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_prompt_tokens < 256:
            raise ValueError(f"max_prompt_tokens must be >= 256 to hold the instructions, got {self.max_prompt_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")


@dataclass(slots=True)
class Reply:
    """One chat completion and what it cost."""

    text: str
    tokens_in: int
    tokens_out: int


class Chat:
    """Batched single-turn or multi-turn chat calls on an `Engine`, with token clipping helpers."""

    def __init__(self, engine: Engine, cfg: LLMConfig):
        self.engine = engine
        self.cfg = cfg

    def count(self, text: str) -> int:
        """Tokens of `text` under the engine's tokenizer."""
        return len(self.engine.encode(text))

    def clip(self, text: str, max_tokens: int) -> str:
        """Keep the head and the tail of `text` within `max_tokens` (the tail holds the answer)."""
        ids = self.engine.encode(text)
        if len(ids) <= max_tokens:
            return text
        head = max(1, max_tokens * 2 // 3)
        tail = max(1, max_tokens - head - 4)
        return f"{self.engine.decode(ids[:head])}\n[...]\n{self.engine.decode(ids[-tail:])}"

    def __call__(
        self,
        conversations: Sequence[list[dict[str, str]]],
        max_tokens: int,
        regex: str | Sequence[str | None] | None = None,
        stop: Sequence[str] = (),
    ) -> list[Reply]:
        """Generate one reply per conversation in one batch (order kept)."""
        if not conversations:
            return []
        regexes = list(regex) if isinstance(regex, (list, tuple)) else [regex] * len(conversations)
        if not self.cfg.constrained:
            regexes = [None] * len(conversations)
        requests = [
            GenRequest(
                prompt_token_ids=self.engine.chat_token_ids(conv),
                max_tokens=max_tokens,
                temperature=self.cfg.temperature,
                stop=list(stop),
                regex=rx,
                logprobs=False,
            )
            for conv, rx in zip(conversations, regexes)
        ]
        # vLLM's own progress bar, only for batches long enough to be worth watching.
        results = self.engine.generate(requests, progress=len(requests) >= 32)
        return [Reply(r.text, r.prompt_tokens, len(r.token_ids)) for r in results]


_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S | re.I)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ANSWER_LINE = re.compile(r"(?:final\s+answer|answer)\s*[:：]\s*(.+)", re.I)
_NUMBER_REF = re.compile(r"^(?:candidate|solution|report|trajectory|answer|option)?\s*#?\s*(\d{1,3})\s*[.)]?$", re.I)


def answer_span(text: str) -> str:
    """The part of a model output that states the answer (see the module docstring)."""
    tags = _ANSWER_TAG.findall(text)
    if tags and tags[-1].strip():
        return tags[-1].strip()
    boxed = _BOXED.findall(text)
    if boxed:
        return boxed[-1].strip()
    lines = _ANSWER_LINE.findall(text)
    if lines:
        return lines[-1].strip()
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _contains(haystack: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {haystack} "


def match_candidate(text: str, candidates: Sequence[Trajectory]) -> Trajectory | None:
    """Map a model output onto one of `candidates` (numbered from 1 in prompts), or None."""
    span = answer_span(text)
    answered = [c for c in candidates if normalize_answer(c.answer)]
    norm_span = normalize_answer(span)
    for c in answered:
        if normalize_answer(c.answer) == norm_span:
            return c
    ref = _NUMBER_REF.match(span)
    if ref and 1 <= int(ref.group(1)) <= len(candidates) and candidates[int(ref.group(1)) - 1] in answered:
        return candidates[int(ref.group(1)) - 1]
    for haystack in (norm_span, normalize_answer(text)):
        inside = [c for c in answered if _contains(haystack, normalize_answer(c.answer))]
        if inside:
            return max(inside, key=lambda c: len(normalize_answer(c.answer)))
    if norm_span and answered:
        best = max(answered, key=lambda c: f1_score(span, [c.answer]))
        if f1_score(span, [best.answer]) >= 0.5:
            return best
    return None

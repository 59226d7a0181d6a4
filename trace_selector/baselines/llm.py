"""The LLM side shared by the aggregator baselines: settings, batched chat calls with token
accounting, token-budget clipping, and mapping a small model's free text back onto one of the
existing candidate answers.

The aggregators run on the same `Engine` as rollouts (engines/base.py) and sample as ParallelMuse
does (temperature 0.6, top_p 0.95; its presence penalty 1.1 is not applied because the engine contract
has no such field). Prompt budgets fit the engine's context: a call that generates up to m tokens gets
at most min(`max_prompt_tokens`, max_model_len - m) prompt tokens, and every method reports the tokens
it had to cut from trajectories (`Pick.extra["cut_tokens"]`).

Mapping model output to a candidate (`match_candidate`), in order:
1. the answer span: the last ``<answer>...</answer>``, else ``\\boxed{...}``, else the text after the
   last "answer:" / "final answer:", else the first non-empty line;
2. a candidate whose normalised answer equals the span's (so a numeric answer "3" is not read as a
   reference);
3. a reference to an answered candidate by number ("3", "Candidate 3", "Report #3");
4. the longest candidate answer contained (as whole words) in the span, then in the whole output;
5. the candidate with the best token F1 against the span, if that F1 >= 0.5.
Anything else is a parse failure; the caller falls back to the majority vote and counts it.

The free aggregators do not map: their answer is `free_answer`, the text of the last ``<answer>`` tag
(an unclosed one runs to the end), else of the last ``\\boxed{...}``, else none, as ParallelMuse
extracts it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trace_selector.engines.base import Engine, GenRequest
from trace_selector.errors import InputError
from trace_selector.records import Trajectory
from trace_selector.records.answers import f1_score, normalize_answer


@dataclass(slots=True)
class LLMConfig:
    """Settings of every LLM aggregator and judge."""

    max_prompt_tokens: int = 3072
    """Prompt budget per call, further capped by the engine's context (max_model_len minus the call's
    output tokens); trajectory text is clipped to fit and the cut is reported."""
    answer_tokens: int = 512
    """Most generated tokens for an integrate call (SolAgg, SummAgg): free reasoning, then the answer.
    A call cut off before ``<answer>`` is continued with only the answer allowed (reported as forced)."""
    forced_answer_tokens: int = 48
    """Most generated tokens of that forced answer continuation (and of a judge's forced scores)."""
    report_tokens: int = 512
    """Most generated tokens for one SummAgg trajectory report."""
    judge_tokens: int = 256
    """Most generated tokens for one rubric judgement: brief reasoning, then the scores (a judgement
    cut off before its scores is continued with only the scores allowed)."""
    action_tokens: int = 384
    """Most generated tokens for one AggAgent reply (thoughts, then a tool call or the finish solution)."""
    temperature: float = 0.6
    """Sampling temperature of every call (ParallelMuse: 0.6; 0 = greedy, reproducible)."""
    top_p: float = 0.95
    """Nucleus sampling mass of every call (ParallelMuse: 0.95)."""
    constrained: bool = True
    """Constrain judge scores, agent actions and the ``*_choice`` aggregators' answers with a
    structured-output regex (small models rarely follow formats); solagg and summagg are never constrained."""
    agent_max_iterations: int = 100
    """AggAgent calls per question before it must finish (the paper's 100; the last one only allows
    finish). On a small context the context usually ends the loop first; results.json reports the cap."""
    observation_tokens: int = 512
    """Most tokens of one AggAgent tool result (cut from the middle; the cut is reported)."""
    doc_chars: int = 240
    """Characters kept of each retrieved document in rendered transcripts."""
    skip_unanimous: bool = True
    """Make no call for a question whose answered trajectories all agree (any selection would return that
    answer); not solagg and summagg, which may answer otherwise and are always called."""

    def __post_init__(self) -> None:
        for name in ("max_prompt_tokens", "answer_tokens", "report_tokens", "judge_tokens", "action_tokens", "forced_answer_tokens",
                     "agent_max_iterations", "observation_tokens", "doc_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_prompt_tokens < 256:
            raise ValueError(f"max_prompt_tokens must be >= 256 to hold the instructions, got {self.max_prompt_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass(slots=True)
class Reply:
    """One chat completion and what it cost."""

    text: str
    tokens_in: int
    tokens_out: int
    finish_reason: str = "stop"
    """"stop" or "length" (cut by max_tokens), as the engine reports it."""


class Chat:
    """Batched single-turn or multi-turn chat calls on an `Engine`, with token clipping helpers."""

    def __init__(self, engine: Engine, cfg: LLMConfig):
        self.engine = engine
        self.cfg = cfg
        self.memo: dict[str, dict[Any, Any]] = {}
        """Outputs that the methods of one run on this chat share, by method family (SummAgg's reports:
        ``summagg`` and ``summagg_choice`` integrate the same reports, so the two differ only in the
        integrate step, and each report is generated once)."""

    def count(self, text: str) -> int:
        """Tokens of `text` under the engine's tokenizer."""
        return len(self.engine.encode(text))

    @property
    def context(self) -> int | None:
        """The engine's context length in tokens, when it says (vLLM engines carry ``config.max_model_len``)."""
        cfg = getattr(self.engine, "config", None)
        value = getattr(cfg, "max_model_len", None) or getattr(self.engine, "max_model_len", None)
        return int(value) if value else None

    def prompt_tokens(self, text: str) -> int:
        """Tokens of a one-message user prompt holding `text`, chat template included."""
        return len(self.engine.chat_token_ids([{"role": "user", "content": text}]))

    def prompt_budget(self, out_tokens: int) -> int:
        """Most prompt tokens for a call generating up to `out_tokens` (see the module docstring)."""
        budget = self.cfg.max_prompt_tokens
        if self.context is not None:
            budget = min(budget, self.context - out_tokens)
        if budget < 256:
            raise InputError(f"llm: context {self.context} leaves {budget} prompt tokens for {out_tokens} output tokens; "
                             "lower the output budget (llm.*_tokens) or raise the engine's max_model_len")
        return budget

    def clip(self, text: str, max_tokens: int) -> str:
        """Keep the head and the tail of `text` within `max_tokens` (the tail holds the answer)."""
        return self.fit(text, max_tokens)[0]

    def fit(self, text: str, max_tokens: int) -> tuple[str, int]:
        """`clip`, and how many tokens were cut (0 when it fits)."""
        ids = self.engine.encode(text)
        if len(ids) <= max_tokens:
            return text, 0
        marker = "\n[...]\n"
        room = max(2, max_tokens - self.count(marker))
        head = max(1, room * 2 // 3)
        tail = max(1, room - head)
        return f"{self.engine.decode(ids[:head])}{marker}{self.engine.decode(ids[-tail:])}", len(ids) - head - tail

    def __call__(
        self,
        conversations: Sequence[list[dict[str, str]]],
        max_tokens: int,
        regex: str | Sequence[str | None] | None = None,
        stop: Sequence[str] = (),
        prefixes: Sequence[str] | None = None,
    ) -> list[Reply]:
        """Generate one reply per conversation in one batch (order kept). `prefixes` are assistant text
        already written, appended after the generation prompt (a continuation); replies exclude them."""
        if not conversations:
            return []
        regexes = list(regex) if isinstance(regex, (list, tuple)) else [regex] * len(conversations)
        if not self.cfg.constrained:
            regexes = [None] * len(conversations)
        heads = list(prefixes) if prefixes is not None else [""] * len(conversations)
        requests = [
            GenRequest(
                prompt_token_ids=self.engine.chat_token_ids(conv) + (self.engine.encode(head) if head else []),
                max_tokens=max_tokens,
                temperature=self.cfg.temperature,
                top_p=self.cfg.top_p,
                stop=list(stop),
                regex=rx,
                logprobs=False,
            )
            for conv, rx, head in zip(conversations, regexes, heads)
        ]
        # vLLM's own progress bar, only for batches long enough to be worth watching.
        results = self.engine.generate(requests, progress=len(requests) >= 32)
        return [Reply(r.text, r.prompt_tokens, len(r.token_ids), r.finish_reason) for r in results]


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


def free_answer(text: str) -> str:
    """The answer a free aggregator wrote (module docstring); "" when it wrote none."""
    tags = _ANSWER_TAG.findall(text)
    if tags:
        return tags[-1].strip()
    boxed = _BOXED.findall(text)
    return boxed[-1].strip() if boxed else ""


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

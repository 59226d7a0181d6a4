"""The pool records: one `Trajectory` per sampled run of a search agent on a question, its `Step`s and
retrieved `Document`s, the `QuestionGroup` of a question's trajectories, and the `Pool` with its
sidecar `PoolMeta`. Plain slotted dataclasses; reading and writing them is `codec` (dicts) and
`files` (JSONL / Parquet), which are the only places that know the on-disk field names.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trace_selector.types import Action, PoolStyle

ACTIONS: tuple[str, ...] = typing.get_args(Action)
"""Step actions in their canonical order."""
SEED_OFFSET = 42
"""Browsing pools number samples by seed starting at 42 (sample_id = seed - 42)."""


@dataclass(slots=True)
class Document:
    """One retrieved passage or page as the agent saw it in an observation."""

    rank: int
    """1-based position in the result list."""
    title: str
    """Title as shown in "Doc i (Title: ...)"."""
    text: str
    """Passage text (without the title)."""
    doc_id: str | None = None
    """Corpus id when the writer knew it (our pools); None for the public raw formats."""
    score: float | None = None
    """Retriever score, if recorded."""
    url: str | None = None
    """Page URL (browsing settings)."""


@dataclass(slots=True)
class Step:
    """One tool call of a trajectory and what came back."""

    action: Action
    """"search", "open", "find" (tool calls) or "invalid" (the model produced no valid action)."""
    content: str
    """The query (search), URL or page id (open), or pattern (find)."""
    search_result: str = ""
    """The observation text exactly as given to the model ("Doc 1 (Title: T) text\\n...")."""
    documents: list[Document] = field(default_factory=list)
    """Structured form of the observation; parsed from `search_result` when a raw pool lacks it."""
    raw_text: str | None = None
    """The model's generated text for this turn (reasoning plus the tool call)."""
    logprobs: list[float] | None = None
    """Log-probability of every sampled token of `raw_text`, in processed mode (after temperature)."""
    tool_start: int | None = None
    """Index into `logprobs` where the tool-call region starts; tokens before it are reasoning."""
    token_conf: list[float] | None = None
    """DeepConf token confidence of every sampled token (minus the mean log-prob of the top-20
    candidates), aligned with `logprobs`; None when the rollout did not record it."""
    prompt_tokens: int | None = None
    """Prompt length of the call that produced this step."""
    cached_tokens: int | None = None
    """Prompt tokens served from the prefix cache for that call."""


@dataclass(slots=True)
class Trajectory:
    """One sampled run of the agent on one question."""

    question_id: str
    """Question key: ``question_index`` (WebQA) or ``qid`` (browsing), as a string."""
    question: str
    """Question text."""
    sample_id: int
    """Index of this trajectory among the question's samples (unique per question)."""
    answer: str
    """Final answer, "" if the run ended without one."""
    steps: list[Step] = field(default_factory=list)
    """Tool calls in order."""
    golden_answers: list[str] = field(default_factory=list)
    """Gold aliases (may be empty in browsing pools that only carry `correct`)."""
    correct: bool | None = None
    """Correctness as stored in the pool (browsing style); None when it must be computed."""
    style: PoolStyle = "webqa"
    """Which public format the record follows."""
    messages: list[dict[str, Any]] | None = None
    """Raw chat messages (browsing style), kept for aggregators that read whole transcripts."""
    final_text: str | None = None
    """The model's last turn (the one containing the answer), for LLM aggregators."""
    final_logprobs: list[float] | None = None
    """Token log-probabilities of the final turn."""
    final_token_conf: list[float] | None = None
    """DeepConf token confidence of the final turn's tokens, aligned with `final_logprobs`."""
    confidence: float | None = None
    """Stated confidence in [0, 1] if the agent was asked for one."""
    finish_reason: str | None = None
    """"answer", "forced" (answered when told to), "no_answer", "length" (forced turn cut by max_tokens),
    "context" (no room left for another turn), ... as recorded by the rollout."""
    parent_sample: int | None = None
    """For branched trajectories (partial rollout): the sample it was branched from."""
    branch_step: int | None = None
    """For branched trajectories: the step index at which it diverged from its parent."""
    seed: int | None = None
    """Sampling seed of this trajectory if one was applied."""
    generated_tokens: int | None = None
    """Tokens generated for this trajectory (all turns)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Unknown top-level fields, preserved on round trip."""


@dataclass(slots=True)
class PoolMeta:
    """Pool-level metadata (sidecar ``<pool>.meta.json``)."""

    setting: str | None = None
    """Search setting name, e.g. "wikileads"."""
    split: str | None = None
    """Question split the pool was drawn from."""
    policy_model: str | None = None
    """Model path or id that generated the trajectories."""
    strategy: str | None = None
    """Rollout strategy: standard, divinit, partial, replicas."""
    sampling: dict[str, Any] = field(default_factory=dict)
    """Sampling parameters (temperature, top_p, max_tokens, ...)."""
    logprob_mode: str | None = None
    """vLLM logprobs mode the log-probabilities were recorded in (e.g. "processed_logprobs")."""
    vllm_version: str | None = None
    """vLLM version that generated the pool."""
    seed: int | None = None
    """Base seed of the run."""
    accounting: dict[str, Any] = field(default_factory=dict)
    """Per-pool totals: generated/prompt/cached tokens, wall seconds, tool calls, diversity figures."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else (strategy parameters, notes)."""


@dataclass(slots=True)
class QuestionGroup:
    """All trajectories of one question."""

    question_id: str
    question: str
    golden_answers: list[str]
    trajectories: list[Trajectory]
    """In file order."""


@dataclass(slots=True)
class Pool:
    """A rollout pool: trajectories grouped by question, in first-seen order."""

    groups: list[QuestionGroup]
    meta: PoolMeta = field(default_factory=PoolMeta)
    path: str | None = field(default=None, compare=False)
    """File it was read from, for messages (not part of equality: a copy written elsewhere is equal)."""

    def trajectories(self) -> Iterator[Trajectory]:
        """All trajectories, group by group."""
        for group in self.groups:
            yield from group.trajectories

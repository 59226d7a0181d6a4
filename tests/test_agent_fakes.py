"""Test doubles for the rollout layer: a character-level fake engine with a simulated prefix cache, a
5-passage in-memory index, and a few questions. Imported by the agent, strategy and writer tests."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from trace_selector.engines.base import GenRequest, GenResult
from trace_selector.search.bm25 import SearchHit

EOS = 0  # chr(0) never occurs in prompts

Policy = Callable[[str, GenRequest], str]


class FakeEngine:
    """Engine protocol over a character tokenizer (token id = code point). `policy(prompt_text,
    request)` returns the completion; stop strings, max_tokens and EOS behave as in vLLM. The prefix
    cache serves the longest common prefix with any earlier sequence, in blocks of `block` tokens."""

    model_name = "fake"

    def __init__(self, policy: Policy, block: int = 4, logprob: Callable[[int, str], float] | None = None,
                 eos: bool = False):
        self.policy = policy
        self.block = block
        self.logprob = logprob or (lambda i, ch: -0.1 - 0.01 * (i % 7))
        self.eos = eos
        self.requests: list[GenRequest] = []
        self.batches: list[int] = []
        self._seen: list[list[int]] = []
        self.tokenizer = type("Tok", (), {"eos_token_id": EOS})()

    def chat_token_ids(self, messages, add_generation_prompt=True):
        text = "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in messages)
        return self.encode(text + ("<|assistant|>" if add_generation_prompt else ""))

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, token_ids):
        return "".join(chr(t) for t in token_ids if t != EOS)

    def _cached(self, prompt: list[int]) -> int:
        best = 0
        for seq in self._seen:
            n = 0
            for a, b in zip(seq, prompt):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        best = min(best, len(prompt) - 1)
        return best // self.block * self.block

    def generate(self, requests, progress=False):
        self.batches.append(len(requests))
        out = []
        for r in requests:
            self.requests.append(r)
            prompt_text = self.decode(r.prompt_token_ids)
            text = self.policy(prompt_text, r)
            finish = "stop"
            cut = [text.find(s) + len(s) for s in r.stop if s in text]
            if cut:
                text = text[: min(cut)]
            if len(text) > r.max_tokens:
                text, finish = text[: r.max_tokens], "length"
            ids = self.encode(text)
            if self.eos and finish == "stop" and not cut:
                ids.append(EOS)
            cached = self._cached(r.prompt_token_ids)
            self._seen.append(list(r.prompt_token_ids) + ids)
            lps = [self.logprob(i, chr(t)) for i, t in enumerate(ids)]
            out.append(GenResult(text=text, token_ids=ids, logprobs=lps if r.logprobs else None,
                                 prompt_tokens=len(r.prompt_token_ids), cached_tokens=cached,
                                 finish_reason=finish))
        return out

    def info(self):
        return {"model": "fake", "engine": "fake", "vllm_version": None, "logprobs_mode": "processed_logprobs",
                "per_request_seeds": False}

    def close(self):
        pass


PASSAGES = [
    ("d1", "Paris", "Paris is the capital and largest city of France."),
    ("d2", "France", "France is a country in Western Europe. Its capital is Paris."),
    ("d3", "Danube", "The Danube flows through Budapest and Vienna."),
    ("d4", "Mount Everest", "Mount Everest is the highest mountain above sea level."),
    ("d5", "Nile", "The Nile is a major river in northeastern Africa."),
]


class FakeIndex:
    """Word-overlap search over `PASSAGES` (ties by corpus order)."""

    def __init__(self, passages=PASSAGES):
        self.passages = passages

    def search(self, query: str, k: int = 3):
        words = set(re.findall(r"\w+", query.lower()))
        scored = []
        for i, (doc_id, title, text) in enumerate(self.passages):
            score = len(words & set(re.findall(r"\w+", (title + " " + text).lower())))
            if score:
                scored.append((-score, i, doc_id, title, text))
        scored.sort()
        return [SearchHit(rank=r + 1, doc_id=d, title=t, text=x, score=float(-s))
                for r, (s, _, d, t, x) in enumerate(scored[:k])]


@dataclass
class Q:
    id: str
    question: str
    golden_answers: list[str] = field(default_factory=list)


QUESTIONS = [
    Q("0", "What is the capital of France?", ["Paris"]),
    Q("1", "Which river flows through Budapest?", ["Danube"]),
    Q("2", "What is the highest mountain?", ["Mount Everest"]),
]


def turn_of(prompt_text: str) -> int:
    """How many observations the assistant part of the prompt already holds."""
    return prompt_text.split("<|assistant|>", 1)[-1].count("<information>")


def search_then_answer(prompt_text: str, request: GenRequest) -> str:
    """Searches the question's key word once, then answers with the first retrieved title."""
    if "Confidence (0-100)" in prompt_text[-30:]:
        return "85"
    if "One per line, numbered" in prompt_text:
        return " capital France\n2. Paris city\n3. France capital\n4. Danube river"
    body = prompt_text.split("<|assistant|>", 1)[-1]
    if turn_of(prompt_text) == 0:
        question = re.search(r"Question: (.*?)<\|end\|>", prompt_text.split("<|user|>")[-1]).group(1)
        return f"<think>I should search.</think>\n<search>{question.rstrip('?')}</search>"
    title = re.findall(r"Doc 1 \(Title: (.*?)\)", body)[-1]
    return f"<think>Found it.</think>\n<answer>{title}</answer>"


def always_search(prompt_text: str, request: GenRequest) -> str:
    if prompt_text.endswith("<answer>"):
        return "Nile</answer>"
    if request.regex and "search" not in request.regex:
        return "<think>Out of turns.</think><answer>Nile</answer>"
    return f"<think>more</think><search>river {turn_of(prompt_text)}</search>"

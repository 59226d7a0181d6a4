"""Shared test doubles, imported by the tests as ``from tests.conftest import ...``:

- rollout: `FakeEngine`, a character-level engine with a simulated prefix cache, its scripted policies,
  a 5-passage in-memory `FakeIndex` and a few `QUESTIONS`;
- baselines: `ScriptedEngine`, a character-level engine answering from a ``respond(prompt, request)``
  script, and `make_group`, a question with three answered trajectories;
- graphs and models: `toy_graph` (a hand-built WebQA graph following graph/schema.py), browsing steps
  (`hit`, `page`, `traj`, `browsing_group`, `orphan_group`) and `one_thread`;
- slow end-to-end tests: `tiny_setting`, a five-passage search setting on disk;
- `DATA`: the hand-written pools in tests/data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trace_selector.engines.base import GenRequest, GenResult
from trace_selector.records import Document, QuestionGroup, Step, Trajectory
from trace_selector.search.bm25 import SearchHit

if TYPE_CHECKING:
    from torch_geometric.data import HeteroData

DATA = Path(__file__).parent / "data"
"""Hand-written WebQA and browsing pools (tests/data/README.md)."""

# --- rollout ----------------------------------------------------------------------------------------

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


# --- baselines ------------------------------------------------------------------------------------


class ScriptedEngine:
    """Character-level tokenizer and a `respond(prompt_text, request)` script instead of a model."""

    model_name = "fake"

    def __init__(self, respond):
        self.respond = respond
        self.requests = []
        self.batches = 0

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)

    def chat_token_ids(self, messages, add_generation_prompt=True):
        return self.encode("".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>")

    def generate(self, requests, progress=False):
        self.batches += 1
        out = []
        for r in requests:
            self.requests.append(r)
            text = self.respond(self.decode(r.prompt_token_ids), r)
            out.append(GenResult(text, self.encode(text), None, len(r.prompt_token_ids), 0, "stop"))
        return out

    def info(self):
        return {"engine": "fake"}

    def close(self):
        pass


def doc_step(query, title, text):
    return Step("search", query, search_result=f"Doc 1 (Title: {title}) {text}")


def make_group(qid="q1", answers=("Paris", "London", "Paris"), gold=("Paris",)):
    trajs = [
        Trajectory(qid, "What is the capital of France?", i, a,
                   steps=[doc_step(f"capital of France {i}", "France", f"The capital of France is {a}.")],
                   final_text=f"The documents say {a}. <answer>{a}</answer>")
        for i, a in enumerate(answers)
    ]
    return QuestionGroup(qid, "What is the capital of France?", list(gold), trajs)


# --- graphs and models ----------------------------------------------------------------------------


def toy_graph(seed: int = 0, k: int = 3, dim: int = 8, steps: int = 2, chunks: int = 2, empty_traj: int | None = None) -> HeteroData:
    """A question with `k` trajectories of `steps` searches returning `chunks` chunks each.

    Chunk 0 of every trajectory's first search is the same passage (linked by same_across), and
    trajectory `empty_traj` (if given) has no searches at all.
    """
    import torch
    from torch_geometric.data import HeteroData

    from trace_selector.graph.plan import MENTIONS
    from trace_selector.graph.schema import WEBQA

    g = torch.Generator().manual_seed(seed)
    data = HeteroData()
    sub_traj, chunk_traj, chunk_of, first_chunk = [], [], [], []
    starts, nexts = [], []
    for t in range(k):
        n = 0 if t == empty_traj else steps
        for s in range(n):
            sq = len(sub_traj)
            sub_traj.append(t)
            starts.append(sq) if s == 0 else nexts.append((sq - 1, sq))
            for c in range(chunks):
                if s == 0 and c == 0:
                    first_chunk.append(len(chunk_traj))
                chunk_of.append((sq, len(chunk_traj), c + 1))
                chunk_traj.append(t)
    data["query"].x = torch.randn(1, dim, generator=g)
    data["query"].traj = torch.tensor([-1])
    data["subquery"].x = torch.randn(len(sub_traj), dim, generator=g)
    data["subquery"].traj = torch.tensor(sub_traj, dtype=torch.long)
    data["chunk"].x = torch.randn(len(chunk_traj), dim, generator=g)
    data["chunk"].traj = torch.tensor(chunk_traj, dtype=torch.long)
    data["answer"].x = torch.randn(k, dim, generator=g)
    data["answer"].traj = torch.arange(k)
    counts = torch.randint(1, k + 1, (k,), generator=g).float()
    read = torch.randint(0, 2, (k,), generator=g).float()
    echo = (torch.arange(k) % 3 == 2).float()  # not drawn from `g`: the other tensors stay as they were
    last = read * (torch.arange(k) % 2 == 0).float()  # read in the last hop: a subset of read, not drawn either
    data["answer"].vote = torch.stack([counts.log1p(), counts / k, read, read * counts / k, echo, last], 1)
    y = torch.zeros(k)
    y[seed % k] = 1.0
    data["answer"].y = y
    data["answer"].sample_id = torch.arange(k) + 10
    data.question_id = f"q{seed}"
    data.answers = [f"a{i}" for i in range(k)]

    def edges(pairs: list[tuple[int, int]]) -> torch.Tensor:
        return torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)

    shared = [(a, b) for a in first_chunk for b in first_chunk if a != b and chunk_traj[a] != chunk_traj[b]]
    for et in WEBQA.edge_types:
        src, rel, dst = et
        if rel == "starts":
            pairs = [(0, s) for s in starts]
        elif rel == "next":
            pairs = nexts
        elif rel.startswith("rank_"):
            pairs = [(sq, c) for sq, c, r in chunk_of if r == int(rel[5:])]
        elif rel.startswith("rev_rank_"):
            pairs = [(c, sq) for sq, c, r in chunk_of if r == int(rel[9:])]
        elif rel == "same_across":
            pairs = shared
        else:
            pairs = []
        data[et].edge_index = edges(pairs)
    # Bookkeeping for trajectory subsets (graph/plan.py): each grounded answer is read by its own trajectory.
    data[MENTIONS].edge_index = edges([(i, i) for i in range(k) if read[i]])
    return data


def one_thread():
    """Fixture body: run with 1 torch thread. On the shared 2-core machine 2 OpenMP threads made
    these tiny graphs ~50x slower (spinning workers), not faster."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def toy_selector(folder: Path, **card) -> Path:
    """A saved hash-encoder `trace_grounded` selector whose vote weights are away from their zero init
    (so candidates score differently, and a load that skipped a weight would show); `card` goes to
    `save_selector` (setting, metrics)."""
    import torch

    from trace_selector.model import ModelConfig, SelectorNet
    from trace_selector.model.hub import save_selector

    torch.manual_seed(0)
    net = SelectorNet(ModelConfig(embed_dim=16, hidden=16, layers=1, encoder="hash", grounding=True, vote_prior=True))
    with torch.no_grad():
        net.vote.weight.normal_()
        net.prior.weight.normal_()
    return save_selector(net, folder, **{"setting": "toy", **card})


PAGE_X = "URL: https://wiki.org/X\nTitle: X\nL0: X was founded by Alice in 1901."
FIND_X = "URL: https://wiki.org/X\n[1 lines matching 'founded']\nL0: X was founded by Alice in 1901."
PAGE_Z = "URL: https://wiki.org/Z\nTitle: Z\nL0: Z is unrelated."


def hit(rank, url, title="t"):
    return Document(rank=rank, title=title, text="snippet", doc_id=url, url=url)


def page(url, text):
    return Document(rank=1, title="p", text=text, doc_id=url, url=url)


def traj(sample, answer, steps):
    return Trajectory("b1", "Who founded X?", sample, answer, steps, ["Alice"], style="browsing")


def browsing_group() -> QuestionGroup:
    """Four browsing trajectories over pages X, Y and Z: search / open / find steps, URLs in several
    spellings, a missing page, one trajectory that only failed to open and one without an answer."""
    trajs = [
        traj(0, "Alice", [
            Step("search", "X founder", documents=[hit(1, "https://Wiki.ORG/X#top"), hit(2, "https://wiki.org/Y")]),
            Step("open", "https://wiki.org/X", PAGE_X, [page("https://wiki.org/X", PAGE_X)]),
            Step("find", "founded", FIND_X),  # no documents: URL from the header
            Step("open", "https://wiki.org/Missing", "Page not found: https://wiki.org/Missing"),
        ]),
        traj(1, "Bob", [
            Step("search", "X history", documents=[hit(1, "https://wiki.org/Y"), hit(3, "HTTPS://WIKI.ORG/X")]),
            Step("open", "https://wiki.org/%58", PAGE_X, [page("https://wiki.org/%58", PAGE_X)]),
            Step("open", "https://wiki.org/Z", PAGE_Z),  # never listed: hangs off the latest subquery, rank_5
        ]),
        traj(2, "Alice", [Step("open", "https://wiki.org/Missing", "Page not found: https://wiki.org/Missing")]),
        traj(3, "", [Step("search", "X", documents=[hit(1, "https://wiki.org/X")])]),
    ]
    return QuestionGroup("b1", trajs[0].question, ["Alice"], trajs)


def orphan_group() -> QuestionGroup:
    """Browsing trajectories whose opens and finds come before any search (orphan subqueries)."""
    trajs = [
        traj(0, "Alice", [
            Step("open", "https://wiki.org/X", PAGE_X, [page("https://wiki.org/X", PAGE_X)]),  # before any search
            Step("find", "founded", FIND_X),
            Step("search", "X founder", documents=[hit(1, "https://wiki.org/Y")]),
            Step("open", "https://wiki.org/Z", PAGE_Z),
        ]),
        traj(1, "Alice", [
            Step("search", "q", documents=[hit(1, "https://wiki.org/X")]),
            Step("open", "https://wiki.org/X", PAGE_X, [page("https://wiki.org/X", PAGE_X)]),
            Step("search", "more", documents=[hit(1, "https://wiki.org/Y")]),
        ]),
    ]
    return QuestionGroup("b1", trajs[0].question, ["Alice"], trajs)


# --- slow end-to-end tests: a search setting on disk ----------------------------------------------

SETTING_PASSAGES = [
    ("d1", "Paris", "Paris is the capital and largest city of France."),
    ("d2", "France", "France is a country in Western Europe. Its capital is Paris."),
    ("d3", "Danube", "The Danube is a river that flows through Budapest and Vienna."),
    ("d4", "Mount Everest", "Mount Everest is the highest mountain above sea level."),
    ("d5", "Nile", "The Nile is a major river in northeastern Africa."),
]
SETTING_QUESTIONS = [
    {"id": "q1", "question": "What is the capital of France?", "golden_answers": ["Paris"]},
    {"id": "q2", "question": "Which river flows through Budapest?", "golden_answers": ["Danube"]},
]


def tiny_setting(folder: Path, pages: bool = False) -> Path:
    """Write a five-passage setting (corpus, dev questions, BM25 index, optionally pages) into `folder`.
    Call it after the vLLM engine is built: the index imports bm25s (numba)."""
    from trace_selector.search.bm25 import build_index

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w") as fh:
        for doc_id, title, text in SETTING_PASSAGES:
            fh.write(json.dumps({"id": doc_id, "contents": f'"{title}"\n{text}'}) + "\n")
    if pages:
        with open(folder / "pages.jsonl", "w") as fh:
            for _, title, text in SETTING_PASSAGES:
                fh.write(json.dumps({"url": f"https://wiki.local/{title.replace(' ', '_')}", "title": title,
                                     "text": text}) + "\n")
    with open(folder / "questions_dev.jsonl", "w") as fh:
        for q in SETTING_QUESTIONS:
            fh.write(json.dumps(q) + "\n")
    build_index(folder / "corpus.jsonl", folder / "index")
    return folder

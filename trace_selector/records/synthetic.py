"""Synthetic WebQA-style pools where the right answer is recoverable from evidence sharing.

Each question asks for the <relation> of a made-up <subject>. Its K trajectories answer with the
gold entity, a distractor entity or a one-off wrong entity. The gold answer is stated in *one*
chunk that every gold trajectory retrieves (so its occurrences are linked across trajectories);
each distractor trajectory cites its own, never-repeated chunk stating the distractor, in the same
templates. In most questions the distractor is the majority, so majority vote fails, but a reader
that checks which answer is backed by evidence shared across trajectories succeeds. Without
cross-trajectory links a gold chunk and a distractor chunk look alike (same templates, one answer
word apart), which is what the ablation benchmark measures.

Noise keeps it non-trivial: K varies per question, some gold trajectories miss the gold chunk, some
distractor trajectories also retrieve it, some questions share a misleading distractor chunk, some
have the gold answer as the majority, and a few have no correct trajectory at all.

    pool = make_pool(SyntheticConfig(questions=300, k=8, seed=0))
    enc = make_encoder("bow", 128)          # graph/encoder.py: words -> fixed random vectors, summed

Everything is deterministic given the config (string-seeded `random.Random` per question).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from trace_selector.records.trajectory import Document, Pool, PoolMeta, QuestionGroup, Step, Trajectory

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "st", "th", "sh"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ei"]
_CODAS = ["", "n", "r", "s", "th", "l", "x", "m"]
_RELATIONS = ["founder", "architect", "first mayor", "composer", "discoverer", "author", "patron", "chief engineer"]
_KINDS = ["river town", "observatory", "guild", "fortress", "island", "library", "canal", "monastery"]
# Every claim names a source drawn fresh per chunk, so two claims never coincide by chance: only the
# gold chunk (one text per question) is ever retrieved by several trajectories.
_CLAIMS = [
    "{title}: records kept by {src} state that {ans} was the {rel} of {subj}.",
    "{title}: {ans} is remembered as the {rel} of {subj}, writes {src}.",
    "{title}: according to the {src} archive, the {rel} of {subj} was {ans}.",
    "{title}: {subj} owes much to {ans}, its {rel}, says {src}.",
]
_BACKGROUND = [
    "{subj} is an old {kind} known for its {noun}.",
    "{subj} lies near {place} and was rebuilt after the great {noun}.",
    "Visitors to {subj} often mention the {noun} and the old {kind}.",
    "The history of {subj} is tied to {place} and its {noun}.",
]
_NOUNS = ["bridges", "harbour", "festival", "flood", "towers", "orchards", "bells", "markets", "quarries", "gardens"]
_QUERIES = ["{rel} of {subj}", "{subj} {rel}", "who was the {rel} of {subj}", "{subj} history", "{subj} {kind}"]


@dataclass
class SyntheticConfig:
    """Size, difficulty and seed of a synthetic pool."""

    questions: int = 300
    """Number of questions."""
    k: int = 8
    """Largest number of trajectories per question."""
    k_min: int = 6
    """Smallest number of trajectories per question (K is drawn uniformly in [k_min, k])."""
    majority_right: float = 0.25
    """Fraction of questions whose gold answer is also the (strict) majority."""
    no_correct: float = 0.05
    """Fraction of questions where no trajectory is correct."""
    noise: float = 0.15
    """Probability of each nuisance event (gold chunk missed, gold chunk seen by a wrong trajectory,
    misleading distractor chunk shared by two trajectories)."""
    chunks_per_search: int = 3
    """Passages returned per search."""
    seed: int = 0
    """Seed; with the other fields it fixes every question."""
    offset: int = 0
    """Index of the first question (disjoint train/test pools: same seed, different offsets)."""

    def __post_init__(self) -> None:
        if self.questions < 0:
            raise ValueError(f"questions must be >= 0, got {self.questions}")
        if not 4 <= self.k_min <= self.k:
            raise ValueError(f"need 4 <= k_min <= k, got k_min={self.k_min}, k={self.k}")
        for name in ("majority_right", "no_correct", "noise"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.chunks_per_search < 2:
            raise ValueError(f"chunks_per_search must be >= 2, got {self.chunks_per_search}")


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))


def _entity(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = _word(rng, rng.randint(2, 3)).capitalize()
        if name not in taken:
            taken.add(name)
            return name


def _counts(rng: random.Random, cfg: SyntheticConfig, k: int) -> tuple[int, int]:
    """(gold, distractor) trajectory counts; the rest answer one-off wrong entities."""
    draw = rng.random()
    if draw < cfg.no_correct:
        return 0, rng.randint(k // 2, k - 1)
    if draw < cfg.no_correct + cfg.majority_right:
        gold = rng.randint(k // 2, k - 1)
        return gold, rng.randint(1, min(gold - 1, k - gold))
    gold = rng.randint(2, (k - 1) // 2)
    dist = rng.randint(gold + 1, k - gold)
    return gold, dist


def make_question(cfg: SyntheticConfig, index: int) -> QuestionGroup:
    """Question number `index` of the family (deterministic)."""
    rng = random.Random(f"trace-synthetic:{cfg.seed}:{index}")
    taken: set[str] = set()
    subj, gold, dist = _entity(rng, taken), _entity(rng, taken), _entity(rng, taken)
    place = _entity(rng, taken)
    rel, kind = rng.choice(_RELATIONS), rng.choice(_KINDS)
    question = f"Who was the {rel} of {subj}, the {kind}?"
    k = rng.randint(cfg.k_min, cfg.k)
    n_gold, n_dist = _counts(rng, cfg, k)
    roles = ["gold"] * n_gold + ["dist"] * n_dist + ["other"] * (k - n_gold - n_dist)
    rng.shuffle(roles)

    def claim(ans: str, title: str) -> Document:
        text = rng.choice(_CLAIMS).format(title=title, ans=ans, rel=rel, subj=subj, src=_entity(rng, taken))
        return Document(rank=0, title=title, text=text)

    def background() -> Document:
        tmpl = rng.choice(_BACKGROUND)
        return Document(0, subj, tmpl.format(subj=subj, kind=kind, noun=rng.choice(_NOUNS), place=place))

    gold_doc = claim(gold, subj)
    shared_bg = [background() for _ in range(3)]
    # A misleading chunk stating the distractor that two wrong trajectories both retrieve.
    shared_dist = claim(dist, _entity(rng, taken)) if rng.random() < cfg.noise else None
    shared_dist_left = 2
    trajectories = []
    for sample_id, role in enumerate(roles):
        evidence: list[Document] = []
        if role == "gold":
            answer = gold
            if rng.random() >= cfg.noise:
                evidence.append(gold_doc)
        else:
            answer = dist if role == "dist" else _entity(rng, taken)
            if role == "dist" and shared_dist is not None and shared_dist_left:
                evidence.append(shared_dist)
                shared_dist_left -= 1
            else:
                evidence.append(claim(answer, rng.choice([subj, _entity(rng, taken)])))
            if rng.random() < cfg.noise:
                evidence.append(gold_doc)
        n_steps = rng.randint(1, 3)
        slots = n_steps * cfg.chunks_per_search - len(evidence)
        for _ in range(slots):
            if rng.random() < 0.6:
                evidence.append(rng.choice(shared_bg))
            else:  # unrelated passage retrieved by this trajectory only
                evidence.append(Document(0, _entity(rng, taken), f"{_word(rng, 3)} {rng.choice(_NOUNS)} of {_entity(rng, taken)}."))
        rng.shuffle(evidence)
        steps = []
        for s in range(n_steps):
            docs = [
                Document(rank=r + 1, title=d.title, text=d.text)
                for r, d in enumerate(evidence[s * cfg.chunks_per_search : (s + 1) * cfg.chunks_per_search])
            ]
            query = rng.choice(_QUERIES).format(rel=rel, subj=subj, kind=kind)
            result = "\n".join(f"Doc {d.rank} (Title: {d.title}) {d.text}" for d in docs)
            steps.append(Step(action="search", content=query, search_result=result, documents=docs))
        trajectories.append(
            Trajectory(
                question_id=str(index),
                question=question,
                sample_id=sample_id,
                answer=answer,
                steps=steps,
                golden_answers=[gold],
                extra={"role": role},
            )
        )
    return QuestionGroup(question_id=str(index), question=question, golden_answers=[gold], trajectories=trajectories)


def make_pool(cfg: SyntheticConfig) -> Pool:
    """A pool of `cfg.questions` questions, numbered from `cfg.offset`."""
    groups = [make_question(cfg, i) for i in range(cfg.offset, cfg.offset + cfg.questions)]
    meta = PoolMeta(setting="synthetic", strategy="standard", seed=cfg.seed, extra={"synthetic": vars(cfg).copy()})
    return Pool(groups=groups, meta=meta, path=f"synthetic(seed={cfg.seed}, offset={cfg.offset})")

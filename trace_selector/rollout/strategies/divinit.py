"""DivInit: diverse first queries, and the diversity measures every pool reports.

One call per question, at temperature 1.0, asks the policy for `n` candidate first queries (a numbered
list; n = max(16, 2k) unless set, and always more than the k seeded threads, so MMR has a choice). Maximal
marginal relevance with Jaccard distance on lowercased, punctuation-free word sets picks k of them:
start from the farthest pair, then repeatedly add the candidate maximising
``lam * sim(c, question) + (1 - lam) * min_{s in chosen} dist(c, s)`` (lam = 0 by default: pure
diversity). Each chosen query is played as turn 1 of one trajectory; when fewer than k distinct
candidates come back, the rest are ordinary samples and the pool metadata counts them.

Diversity measures (all strategies, written to the pool accounting):
- QPD: mean pairwise Jaccard distance of the turn-1 queries of a question's trajectories.
- ATD: the same at every turn t (over trajectories that searched at t), averaged over turns.
- doc overlap: mean pairwise Jaccard similarity of the sets of doc ids each trajectory retrieved.
Each is averaged over questions.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean

from trace_selector.records import Trajectory
from trace_selector.rollout import prompts
from trace_selector.rollout.strategies.context import Groups, QuestionLike, StrategyContext, require_full


@dataclass
class DivInitConfig:
    """DivInit parameters."""

    candidates: int | None = None
    """n: candidate first queries asked for in the proposal call. None: max(16, 2k), the paper's 16
    for k <= 8. Must exceed k, else MMR would have nothing to choose and every candidate is used."""
    lam: float = 0.0
    """MMR trade-off: weight of relevance (Jaccard similarity to the question); 0 = pure diversity."""
    temperature: float = 1.0
    """Sampling temperature of the proposal call (the paper samples the candidates at 1.0)."""
    max_tokens: int = 480
    """Token limit of the proposal call: room for 16 keyword queries of up to ~25 tokens each."""

    def __post_init__(self) -> None:
        if self.candidates is not None and self.candidates < 2:
            raise ValueError(f"candidates must be >= 2, got {self.candidates}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {self.lam}")
        if self.max_tokens < 8:
            raise ValueError(f"max_tokens must be >= 8, got {self.max_tokens}")


_WORD = re.compile(r"[^\w\s]", re.UNICODE)


def word_set(text: str) -> frozenset[str]:
    """Lowercased words with punctuation removed."""
    return frozenset(_WORD.sub(" ", text.lower()).split())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity; two empty sets count as identical."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def jaccard_distance(a: str, b: str) -> float:
    return 1.0 - jaccard(word_set(a), word_set(b))


def mmr_select(candidates: Sequence[str], k: int, question: str = "", lam: float = 0.0) -> list[int]:
    """Indices of up to `k` distinct candidates chosen by MMR (see the module docstring).

    Candidates whose word sets are empty or repeat an earlier one are skipped; ties go to the lower
    index. k = 1 picks the candidate most similar to the question.
    """
    sets, distinct = [], []
    for i, c in enumerate(candidates):
        ws = word_set(c)
        if ws and ws not in sets:
            sets.append(ws)
            distinct.append(i)
    if k <= 0 or not distinct:
        return []
    q = word_set(question)
    rel = {i: jaccard(s, q) for i, s in zip(distinct, sets)}
    ws_of = dict(zip(distinct, sets))
    if k == 1:
        return [max(distinct, key=lambda i: (rel[i], -i))]
    if len(distinct) <= k:
        return distinct
    best = max(itertools.combinations(distinct, 2),
               key=lambda p: (1 - jaccard(ws_of[p[0]], ws_of[p[1]]), -p[0], -p[1]))
    chosen = list(best)
    while len(chosen) < k:
        def score(i: int) -> tuple[float, int]:
            div = min(1 - jaccard(ws_of[i], ws_of[j]) for j in chosen)
            return (lam * rel[i] + (1 - lam) * div, -i)

        chosen.append(max((i for i in distinct if i not in chosen), key=score))
    return chosen


def pairwise_distance(queries: Sequence[str]) -> float | None:
    """Mean pairwise Jaccard distance (None with fewer than two queries)."""
    pairs = list(itertools.combinations(queries, 2))
    return mean(jaccard_distance(a, b) for a, b in pairs) if pairs else None


def _searches(t: Trajectory) -> list[str]:
    return [s.content for s in t.steps if s.action == "search"]


def qpd(group: Sequence[Trajectory]) -> float | None:
    """Turn-1 query pairwise diversity of one question."""
    return pairwise_distance([q[0] for q in map(_searches, group) if q])


def atd(group: Sequence[Trajectory]) -> float | None:
    """Average trajectory diversity: pairwise query distance at each turn, averaged over turns."""
    per_traj = [_searches(t) for t in group]
    turns = max((len(q) for q in per_traj), default=0)
    values = [pairwise_distance([q[t] for q in per_traj if len(q) > t]) for t in range(turns)]
    values = [v for v in values if v is not None]
    return mean(values) if values else None


def doc_overlap(group: Sequence[Trajectory]) -> float | None:
    """Mean pairwise Jaccard similarity of the doc-id sets the trajectories retrieved."""
    sets = [frozenset(d.doc_id or d.title for s in t.steps for d in s.documents) for t in group]
    pairs = [(a, b) for a, b in itertools.combinations(sets, 2) if a or b]
    return mean(jaccard(a, b) for a, b in pairs) if pairs else None


def diversity(groups: Sequence[Sequence[Trajectory]]) -> dict[str, float | None]:
    """QPD, ATD and document overlap averaged over questions (None where undefined everywhere)."""
    out: dict[str, float | None] = {}
    for name, fn in (("qpd_turn1", qpd), ("atd", atd), ("doc_overlap", doc_overlap)):
        values = [v for v in map(fn, groups) if v is not None]
        out[name] = round(mean(values), 4) if values else None
    return out


def n_candidates(cfg: DivInitConfig, k: int) -> int:
    """The proposal size for k seeded threads; a one-line error when it does not exceed k."""
    n = cfg.candidates if cfg.candidates is not None else max(16, 2 * k)
    if n <= k:
        raise ValueError(f"divinit.candidates ({n}) must exceed k ({k}): MMR picks k of n candidates")
    return n


def run_divinit(ctx: StrategyContext, questions: Sequence[QuestionLike],
                sample_ids: Sequence[Sequence[int]]) -> Groups:
    """One proposal call per question, MMR picks k first queries, each seeds one trajectory."""
    require_full(ctx, sample_ids, "divinit")
    cfg: DivInitConfig = ctx.options or DivInitConfig()
    n = n_candidates(cfg, ctx.k)
    requests = [
        ctx.list_request(prompts.DIVINIT_PROMPT.format(question=q.question, n=n),
                         cfg.max_tokens, cfg.temperature)
        for q in questions
    ]
    proposals = ctx.generate(requests)
    ctx.stats["divinit_proposal_calls"] += len(requests)
    groups = []
    for q, res in zip(questions, proposals):
        candidates = prompts.parse_numbered_list(prompts.LIST_PREFILL + res.text)[:n]
        chosen = [candidates[i] for i in mmr_select(candidates, ctx.k, q.question, cfg.lam)]
        ctx.stats["divinit_candidates"] += len(candidates)
        ctx.stats["divinit_filled"] += ctx.k - len(chosen)
        group = []
        for s in range(ctx.k):
            r = ctx.start(q, s)
            if s < len(chosen):
                r.extra["divinit_query"] = chosen[s]
                ctx.agent.inject(r, "search", chosen[s])
            else:
                r.extra["divinit_fill"] = True
            group.append(r)
        groups.append(group)
    ctx.agent.run([r for g in groups for r in g], on_batch=ctx.on_batch)
    return groups

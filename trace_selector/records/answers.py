"""Answer normalisation and metrics shared by every method, so all are scored the same way.

Normalisation follows the SQuAD / HotpotQA evaluation scripts: lowercase, drop punctuation, drop the
articles a/an/the, collapse whitespace. An empty prediction (or one that normalises to nothing) is
never correct. Token F1 has no yes/no special case. Gold answers are a list of aliases; each metric
takes the best alias.

The one correctness rule (`is_correct`): exact match against the gold aliases; without gold (browsing
pools that carry only a judged ``correct`` flag) the stored flag; None when a trajectory has neither.

The one vote (`vote`), used by every voting baseline and by `validate`, so they never disagree on a
pool: answers are grouped by `normalize_answer`; the group with the largest total weight wins;
among tied groups, the one whose first member has the smallest `sample_id` wins, and the returned
trajectory is that first member. Trajectories whose answer normalises to "" never vote.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence

from trace_selector.records.trajectory import Trajectory

_PUNCT = set(string.punctuation)
# Vote totals within this distance count as tied, so float sums of equal weights in a different order
# (0.1 + 0.2 vs 0.2 + 0.1) do not break ties arbitrarily.
TIE_EPS = 1e-9
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _is_punct(ch: str) -> bool:
    # ASCII punctuation as in SQuAD, extended to unicode the same way: string.punctuation is exactly
    # the ASCII characters of the punctuation (P*) and symbol (S*) categories ("$" is Sc, "+" Sm), so
    # curly quotes, en dashes and "€" go too and "Rock ’n’ roll" == "Rock 'n' roll", "€100" == "100".
    return ch in _PUNCT or unicodedata.category(ch)[0] in "PS"


class _DropPunct(dict):
    """`str.translate` table deleting `_is_punct` characters, filled on first sight of each code point.

    Same result as a per-character Python filter, but the loop runs in C: graph building normalises
    every trajectory's whole evidence (`evidence.evidence_words`), and the filter was 60% of the time
    of building a K=16 graph.
    """

    def __missing__(self, code: int) -> int | None:
        value = None if _is_punct(chr(code)) else code
        self[code] = value
        return value


_DROP_PUNCT = _DropPunct()


def normalize_answer(text: str) -> str:
    """Lowercase, strip punctuation and articles, collapse whitespace (SQuAD/HotpotQA)."""
    text = unicodedata.normalize("NFKC", text or "").lower()
    text = text.translate(_DROP_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def restates_question(answer: str, question: str) -> bool:
    """True if every word of the normalised, non-empty answer occurs in the normalised question: an answer
    that only repeats the question ("Continuum mechanics" for "Which branch of continuum mechanics ...")."""
    words = set(normalize_answer(answer).split())
    return bool(words) and words <= set(normalize_answer(question).split())


def _golds(golden_answers: str | Sequence[str]) -> list[str]:
    return [golden_answers] if isinstance(golden_answers, str) else list(golden_answers)


def exact_match(prediction: str, golden_answers: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised non-empty alias, else 0.0."""
    pred = normalize_answer(prediction)
    if not pred:
        return 0.0
    return float(any(pred == normalize_answer(g) for g in _golds(golden_answers)))


def _token_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golden_answers: str | Sequence[str]) -> float:
    """Best token-level F1 over aliases; 0.0 for an empty prediction."""
    pred_tokens = normalize_answer(prediction).split()
    if not pred_tokens:
        return 0.0
    best = 0.0
    for gold in _golds(golden_answers):
        gold_tokens = normalize_answer(gold).split()
        if gold_tokens:
            best = max(best, _token_f1(pred_tokens, gold_tokens))
    return best


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): chance that k of n samples, c of them correct, hit one.

    1 - C(n-c, k) / C(n, k), computed as a product to stay exact for large n.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def any_correct(predictions: Sequence[str], golden_answers: str | Sequence[str]) -> float:
    """Oracle over a set of predictions: 1.0 if any of them is an exact match."""
    return float(any(exact_match(p, golden_answers) for p in predictions))


def is_correct(traj: Trajectory, golden_answers: Sequence[str] = ()) -> bool | None:
    """Exact match of the trajectory's answer against `golden_answers` (else its own gold aliases);
    without gold, the pool's stored `correct`; None when neither says."""
    gold = list(golden_answers) or traj.golden_answers
    if gold:
        return bool(exact_match(traj.answer, gold))
    return traj.correct


def has_answer(traj: Trajectory) -> bool:
    """True if the trajectory's answer is non-empty after normalisation."""
    return bool(normalize_answer(traj.answer))


def vote(trajs: Sequence[Trajectory], weights: Sequence[float] | None = None) -> tuple[Trajectory | None, dict[str, float]]:
    """Weighted vote over normalised answers with the module's tie rule.

    Returns the winning group's first trajectory (by sample_id) or None when no trajectory answered,
    and the total weight per normalised answer.
    """
    if weights is None:
        weights = [1.0] * len(trajs)
    if len(weights) != len(trajs):
        raise ValueError(f"{len(weights)} weights for {len(trajs)} trajectories")
    totals: dict[str, float] = {}
    first: dict[str, Trajectory] = {}
    for traj, w in sorted(zip(trajs, weights), key=lambda tw: tw[0].sample_id):
        key = normalize_answer(traj.answer)
        if not key:
            continue
        totals[key] = totals.get(key, 0.0) + float(w)
        first.setdefault(key, traj)
    if not totals:
        return None, totals
    best = max(totals.values())
    tied = [k for k, v in totals.items() if v >= best - TIE_EPS]
    winner = min(tied, key=lambda k: first[k].sample_id)
    return first[winner], totals

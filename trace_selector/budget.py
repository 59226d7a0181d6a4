"""The budget curve: EM of each method as the number of trajectories per question grows.

For k = 1, 2, 4, ... up to K (and K itself), EM is averaged over `EvalConfig.budget_subsets` random
size-k subsets of each question's trajectories, drawn once with `EvalConfig.seed` and shared by all
methods (k >= K has a single subset). The oracle line is the unbiased pass@k. LLM methods join the
curve only with `EvalConfig.budget_llm` (each subset is a full rerun); adaptive rows choose their own
subset size and are drawn against trajectories used instead (`report.plot_budget`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from trace_selector.baselines.pick import Method
from trace_selector.records import QuestionGroup
from trace_selector.records.answers import is_correct, pass_at_k
from trace_selector.scoring import score_pick


def subset_sizes(max_k: int) -> list[int]:
    """1, 2, 4, ... below max_k, then max_k."""
    ks, k = [], 1
    while k < max_k:
        ks.append(k)
        k *= 2
    return ks + [max_k] if max_k >= 1 else []


def draw_subsets(groups: Sequence[QuestionGroup], k: int, n: int, rng: random.Random) -> list[list[QuestionGroup]]:
    """`n` sets of size-k subsets (one per question, sample_id order kept); one set when k >= K."""
    if k >= max((len(g.trajectories) for g in groups), default=0):
        n = 1
    sets = []
    for _ in range(n):
        sets.append([
            QuestionGroup(g.question_id, g.question, g.golden_answers,
                          sorted(rng.sample(g.trajectories, min(k, len(g.trajectories))), key=lambda t: t.sample_id))
            for g in groups
        ])
    return sets


def oracle_at(groups: Sequence[QuestionGroup], k: int) -> float:
    """Mean unbiased pass@k over questions, in percent (an empty question scores 0)."""
    total = 0.0
    for g in groups:
        n = len(g.trajectories)
        if n:
            c = sum(1 for t in g.trajectories if is_correct(t, g.golden_answers))
            total += pass_at_k(n, c, min(k, n))
    return 100.0 * total / max(1, len(groups))


def budget_curve(methods: dict[str, Method], groups: Sequence[QuestionGroup], n_subsets: int, seed: int) -> dict[str, dict[str, float]]:
    """EM (percent) per method and subset size, plus ``oracle_pass_at_k``."""
    from tqdm import tqdm

    max_k = max((len(g.trajectories) for g in groups), default=0)
    rng = random.Random(seed)
    curve: dict[str, dict[str, float]] = {name: {} for name in methods}
    curve["oracle_pass_at_k"] = {}
    for k in tqdm(subset_sizes(max_k), desc="budget curve", unit="k", leave=False):
        sets = draw_subsets(groups, k, n_subsets, rng)
        for name, method in methods.items():
            ems = []
            for subset in sets:
                picks = method.select(subset)
                ems.append(sum(score_pick(g, p)[0] for g, p in zip(subset, picks)) / max(1, len(subset)))
            curve[name][str(k)] = round(100.0 * sum(ems) / len(ems), 4)
        curve["oracle_pass_at_k"][str(k)] = round(oracle_at(groups, k), 4)
    return curve

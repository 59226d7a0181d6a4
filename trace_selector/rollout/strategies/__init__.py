"""Rollout strategies: how the K trajectories of each question are produced.

A strategy takes a chunk of questions and, for each, the sample ids still to produce, and returns one
list of finished `Rollout`s per question. All trajectories of a chunk advance together through
`Agent.run`, one batched engine call per turn.

- ``standard``: K independent samples from the same prompt (`standard.py`).
- ``divinit``: diverse first queries picked by MMR (`divinit.py`).
- ``partial``: ParallelMuse uncertainty-guided branching (`partial.py`).
- ``replicas``: TIPEX random-isomorphic vs orthogonal-heterogeneous replicas (`replicas.py`).

``STRATEGIES[name](ctx, questions, sample_ids)`` is the dispatch table the runner uses; `context` holds
what they share.
"""

from __future__ import annotations

from trace_selector.rollout.strategies.context import StrategyFn
from trace_selector.rollout.strategies.divinit import run_divinit
from trace_selector.rollout.strategies.partial import run_partial
from trace_selector.rollout.strategies.replicas import run_replicas
from trace_selector.rollout.strategies.standard import run_standard

STRATEGIES: dict[str, StrategyFn] = {
    "standard": run_standard, "divinit": run_divinit, "partial": run_partial, "replicas": run_replicas,
}
"""Strategy name (`types.Strategy`) -> function."""

COUPLED = frozenset({"divinit", "partial", "replicas"})
"""Strategies whose trajectories of one question depend on each other (resume regenerates the group)."""

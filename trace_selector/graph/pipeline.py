"""The graph pipeline of a pool: plan every question's graph, embed all texts in one encoder call,
materialise ``HeteroData`` (or hand plans and the embedding table to graph/collate.py).

    plans, report = plan_graphs(pool, GraphOptions())    # no embeddings yet; report says what was dropped
    rows, table = embed_plans(plans, encoder)             # each distinct text encoded once
    graphs, report = build_graphs(pool, encoder)          # both steps, then HeteroData per question
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from trace_selector.graph.encoder import Encoder
from trace_selector.graph.plan import DropReport, GraphOptions, GraphPlan, materialize
from trace_selector.records import Pool, QuestionGroup


def _planner(kind: str) -> Callable[[QuestionGroup, GraphOptions, DropReport | None], GraphPlan]:
    if kind == "browsing":
        from trace_selector.graph.browsing import plan_browsing

        return plan_browsing
    from trace_selector.graph.webqa import plan_webqa

    return plan_webqa


def plan_graph(group: QuestionGroup, options: GraphOptions, report: DropReport | None = None) -> GraphPlan:
    """Nodes, edges and texts of `group`'s graph (no embeddings); `InputError` if nothing is kept."""
    return _planner(options.resolve_kind(group))(group, options, report)


def _embed(plans: list[GraphPlan], encoder: Encoder) -> tuple[dict[str, int], torch.Tensor]:
    rows: dict[str, int] = {}
    for plan in plans:
        for text in plan.all_texts():
            rows.setdefault(text, len(rows))
    return rows, encoder.encode(list(rows))


def build_graph(group: QuestionGroup, encoder: Encoder, options: GraphOptions | None = None):
    """``HeteroData`` of one question; raises `InputError` if no trajectory has an answer and a
    search result (`build_graphs` skips and counts such questions instead)."""
    plan = plan_graph(group, options or GraphOptions())
    rows, table = _embed([plan], encoder)
    return materialize(plan, rows, table)


def plan_graphs(
    pool: Pool | Iterable[QuestionGroup], options: GraphOptions | None = None
) -> tuple[list[GraphPlan], DropReport]:
    """Plans of every question with a retained trajectory, in pool order, and what was dropped."""
    from trace_selector.errors import InputError

    options = options or GraphOptions()
    groups = pool.groups if isinstance(pool, Pool) else list(pool)
    source = pool.path if isinstance(pool, Pool) else None
    report = DropReport()
    plans: list[GraphPlan] = []
    for group in groups:
        report.questions += 1
        report.trajectories += len(group.trajectories)
        planner = _planner(options.resolve_kind(group, source))  # a style mismatch fails the pool, not one question
        try:
            plan = planner(group, options, report)
        except InputError:
            report.empty_questions.append(group.question_id)
            continue
        plans.append(plan)
        report.graphs += 1
        report.retained += plan.kept
    return plans, report


def embed_plans(plans: list[GraphPlan], encoder: Encoder) -> tuple[dict[str, int], torch.Tensor]:
    """Row of every distinct text of `plans` in one embedding table, encoded in one call (so the
    encoder batches across graphs and encodes each distinct text once)."""
    return _embed(plans, encoder)


def build_graphs(
    pool: Pool | Iterable[QuestionGroup], encoder: Encoder, options: GraphOptions | None = None
) -> tuple[list, DropReport]:
    """Graphs of every question with a retained trajectory, in pool order, and what was dropped.

    Texts of all questions go through `encoder` in one call, so the encoder batches across graphs
    and encodes each distinct text once.
    """
    plans, report = plan_graphs(pool, options)
    if not plans:  # nothing to embed: do not make the encoder load a model
        return [], report
    rows, table = _embed(plans, encoder)
    return [materialize(p, rows, table) for p in plans], report

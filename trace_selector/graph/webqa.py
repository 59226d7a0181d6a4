"""WebQA-style graph of one question (docs/design.md §Graph): query, subqueries, chunk occurrences, answers.

Nodes (schema `WEBQA`):
- ``query``: the question (one node, traj -1, sends only);
- ``subquery``: one per search step that returned at least one passage, in trajectory order;
- ``chunk``: one per returned passage per search (occurrence-preserving: the same passage retrieved
  twice is two nodes), embedded from "title\\ntext";
- ``answer``: one per retained trajectory, embedded from the normalised answer.

Relations: query -starts-> first subquery of each trajectory; subquery -next-> the trajectory's
next subquery; subquery -rank_r-> chunk (r = 1..5, ranks below 5 share rank_5) and chunk
-rev_rank_r-> subquery; chunk -same_within-> chunk (equal content, same trajectory) and chunk
-same_across-> chunk (equal content, different trajectories), both directions, no self loops.

    plan = plan_webqa(group, GraphOptions())       # nodes and edges with texts, no tensors yet
"""

from __future__ import annotations

from trace_selector.graph.plan import (
    DropReport,
    GraphOptions,
    GraphPlan,
    add_candidates,
    check_kept,
    content_keys,
    drop_reason,
    same_content_edges,
)
from trace_selector.graph.schema import MAX_RANK, WEBQA
from trace_selector.records import Document, QuestionGroup, Step, Trajectory
from trace_selector.records.evidence import passage_text


def returned(step: Step) -> bool:
    """A search step that produced at least one passage (a subquery node)."""
    return step.action == "search" and bool(step.documents)


def rank_of(doc: Document, position: int) -> int:
    """Rank relation index 1..MAX_RANK: the recorded 1-based rank (else list position), clipped."""
    rank = doc.rank if doc.rank and doc.rank >= 1 else position + 1
    return min(rank, MAX_RANK)


def keep(group: QuestionGroup, report: DropReport) -> list[Trajectory]:
    """Trajectories that become candidates; the others are counted in `report` by reason."""
    kept = []
    for traj in group.trajectories:
        reason = drop_reason(traj, any(returned(s) for s in traj.steps))
        if reason is None:
            kept.append(traj)
        else:
            report.dropped[reason] = report.dropped.get(reason, 0) + 1
    return kept


def plan_webqa(group: QuestionGroup, options: GraphOptions, report: DropReport | None = None) -> GraphPlan:
    """Plan the WebQA graph of `group`; raises `InputError` if no trajectory is retained."""
    kept = keep(group, report if report is not None else DropReport())
    check_kept(group, kept)
    plan = GraphPlan(WEBQA, group.question_id, options.max_text_chars)
    q = plan.add_node("query", group.question, -1)
    occurrences: list[tuple[int, int, list]] = []
    merged: dict[object, int] = {}
    for t, traj in enumerate(kept):
        prev = None
        for step in traj.steps:
            if not returned(step):
                continue
            s = prev = plan.add_subquery(step.content, t, q, prev)
            for pos, doc in enumerate(step.documents):
                keys = content_keys(doc)
                if options.merge_evidence:
                    slots = [k if options.cross_edges else (t, k) for k in keys]
                    c = next((merged[k] for k in slots if k in merged), None)
                    if c is None:
                        c = plan.add_node("chunk", passage_text(doc), t)
                    elif plan.traj["chunk"][c] != t:
                        plan.traj["chunk"][c] = -1  # shared by several trajectories
                    for k in slots:
                        merged.setdefault(k, c)
                else:
                    c = plan.add_node("chunk", passage_text(doc), t)
                    occurrences.append((c, t, keys))
                r = rank_of(doc, pos)
                plan.add_edge(("subquery", f"rank_{r}", "chunk"), s, c)
                plan.add_edge(("chunk", f"rev_rank_{r}", "subquery"), c, s)
    same_content_edges(plan, "chunk", occurrences, options.cross_edges)
    add_candidates(plan, group, kept, options.merge_answers)
    return plan

"""What the query-evidence graphs of a pool look like: how much structure a graph selector can use.

TRACE's GNN passes messages along a trajectory's chain of searches and, through the cross-trajectory
edges, between trajectories that read the same passage. On a single-hop setting a trajectory searches
once, so a question's graph is a star of stars and those edges carry little. This builds the WebQA
graph plans (`trace_selector.graph.webqa.plan_webqa`, no embeddings) of each pool's questions, cut to
their first `--k` trajectories so that pools of different K compare, and prints per pool:

- searches per trajectory: subquery nodes per kept trajectory (searches that returned passages);
- multi-step: the share of kept trajectories with two or more of them; longest: the mean over
  questions of the longest chain;
- passages: distinct passages per question (occurrences that share content counted once), and
  occurrences per question (chunk nodes);
- shared: the share of chunk occurrences with a cross-trajectory edge (another trajectory read the
  same passage);
- later hops: the share of distinct passages that no trajectory retrieved in its first search;
- answer after hop 1: among answers that occur in their trajectory's evidence, the share that do not
  occur in its first search's passages (the evidence a selector must follow past the first hop);
- nodes and edges per question.

    .venv/bin/python experiments/graph_shape.py data/pools/wikileads-dev.jsonl.gz \\
        data/pools/wikihops-dev.jsonl.gz --k 8 --json experiments/results/graph-shape.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Shape:
    """One pool's graph figures (means over questions unless the name says share)."""

    pool: str
    questions: int
    k: int
    kept_per_question: float
    searches_per_trajectory: float
    multi_step_share: float
    longest_chain: float
    passages_per_question: float
    occurrences_per_question: float
    shared_occurrence_share: float
    later_hop_passage_share: float
    answer_after_hop1_share: float
    nodes_per_question: float
    edges_per_question: float


def question_shape(group, options) -> dict[str, float] | None:
    """The figures of one question's graph (see the module docstring); None when it has no graph."""
    from trace_selector.graph.plan import DropReport
    from trace_selector.graph.webqa import keep, plan_webqa
    from trace_selector.records.answers import normalize_answer
    from trace_selector.records.evidence import evidence_words, first_read_words, mentions

    kept = keep(group, DropReport())
    if not kept:
        return None
    plan = plan_webqa(group, options)
    # Subqueries are added in trajectory order, so a trajectory's n-th subquery node is its hop n.
    hop_of_subquery, seen = [], {}
    for t in plan.traj["subquery"]:
        hop_of_subquery.append(seen.get(t, 0))
        seen[t] = seen.get(t, 0) + 1
    chunks = plan.num_nodes("chunk")
    hop_of_chunk = [0] * chunks
    for (src_type, rel, dst_type), (src, dst) in plan.edges.items():
        if src_type == "subquery" and dst_type == "chunk" and rel.startswith("rank_"):
            for s, c in zip(src, dst):
                hop_of_chunk[c] = hop_of_subquery[s]
    within = plan.edges[("chunk", "same_within", "chunk")]
    across = plan.edges[("chunk", "same_across", "chunk")]
    # The same-content edges link every pair of occurrences of one passage (graph.plan's
    # same_content_edges), so an occurrence's smallest neighbour names its passage.
    roots = list(range(chunks))
    for src, dst in (within, across):
        for a, b in zip(src, dst):
            roots[a] = min(roots[a], b)
    first_hop: dict[int, int] = {}
    for c, root in enumerate(roots):
        first_hop[root] = min(first_hop.get(root, hop_of_chunk[c]), hop_of_chunk[c])
    shared = set(across[0])
    searches = [seen.get(t, 0) for t in range(len(kept))]
    read, after = 0, 0
    for traj in kept:
        answer = normalize_answer(traj.answer)
        if not mentions(evidence_words(traj), answer):
            continue
        read += 1
        after += not mentions(first_read_words(traj), answer)
    return {
        "kept": len(kept),
        "searches": statistics.fmean(searches),
        "multi_step": sum(n >= 2 for n in searches) / len(kept),
        "longest": max(searches),
        "passages": len(first_hop),
        "occurrences": chunks,
        "shared": len(shared) / chunks if chunks else 0.0,
        "later": sum(h > 0 for h in first_hop.values()) / len(first_hop) if first_hop else 0.0,
        "read": read,
        "after": after,
        "nodes": sum(plan.num_nodes(t) for t in plan.texts),
        "edges": sum(len(src) for src, _ in plan.edges.values()),
    }


def pool_shape(path: Path, k: int, progress: bool = True) -> Shape:
    """The graph figures of the pool at `path`, each question cut to its first `k` trajectories."""
    from tqdm import tqdm

    from trace_selector.errors import InputError
    from trace_selector.evaluate import restrict
    from trace_selector.graph.plan import GraphOptions
    from trace_selector.records import read_pool

    pool = read_pool(path)
    groups = restrict(pool.groups, k)
    if not groups:
        raise InputError(f"{path}: the pool has no questions")
    if any(t.style != "webqa" for g in groups for t in g.trajectories):
        raise InputError(f"{path}: browsing-style pool; this script reads WebQA graphs only")
    options = GraphOptions(kind="webqa")
    rows = []
    for group in tqdm(groups, desc=path.name, disable=not progress, unit="q"):
        # A question without a candidate (no trajectory answered after a search) has no graph.
        if (row := question_shape(group, options)) is not None:
            rows.append(row)
    if not rows:
        raise InputError(f"{path}: no question has a trajectory with an answer and a search")
    trajectories = sum(r["kept"] for r in rows)
    mean = lambda key: statistics.fmean(r[key] for r in rows)  # noqa: E731
    read = sum(r["read"] for r in rows)
    return Shape(
        pool=str(path), questions=len(rows), k=k, kept_per_question=mean("kept"),
        searches_per_trajectory=sum(r["searches"] * r["kept"] for r in rows) / trajectories,
        multi_step_share=sum(r["multi_step"] * r["kept"] for r in rows) / trajectories,
        longest_chain=mean("longest"), passages_per_question=mean("passages"),
        occurrences_per_question=mean("occurrences"),
        shared_occurrence_share=sum(r["shared"] * r["occurrences"] for r in rows) / sum(r["occurrences"] for r in rows),
        later_hop_passage_share=sum(r["later"] * r["passages"] for r in rows) / sum(r["passages"] for r in rows),
        answer_after_hop1_share=sum(r["after"] for r in rows) / read if read else 0.0,
        nodes_per_question=mean("nodes"), edges_per_question=mean("edges"),
    )


def table(shapes: list[Shape]) -> str:
    """The figures as a Markdown table, one row per pool."""
    head = ("| pool | questions | searches / traj | multi-step | longest chain | passages / q | shared "
            "| later hops | answer after hop 1 | nodes / q | edges / q |")
    lines = [head, "|---|" + "---:|" * 10]
    for s in shapes:
        lines.append(
            f"| {Path(s.pool).name} | {s.questions} | {s.searches_per_trajectory:.2f} | {100 * s.multi_step_share:.1f}% "
            f"| {s.longest_chain:.2f} | {s.passages_per_question:.1f} | {100 * s.shared_occurrence_share:.1f}% "
            f"| {100 * s.later_hop_passage_share:.1f}% | {100 * s.answer_after_hop1_share:.1f}% "
            f"| {s.nodes_per_question:.1f} | {s.edges_per_question:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Figures: see the module docstring.")
    ap.add_argument("pools", nargs="+", type=Path, help="WebQA-style pool files (.jsonl or .jsonl.gz)")
    ap.add_argument("--k", type=int, default=8, help="trajectories per question, the first by sample id (default 8)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.k < 1:
        ap.error(f"--k must be >= 1, got {args.k}")
    from trace_selector.errors import InputError

    try:
        shapes = [pool_shape(p, args.k, progress=not args.no_progress) for p in args.pools]
    except (InputError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(table(shapes))
    if args.json:
        from trace_selector.atomic import atomic_write

        with atomic_write(args.json) as fh:
            fh.write(json.dumps([asdict(s) for s in shapes], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

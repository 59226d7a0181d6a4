"""Node and edge types of the TRACE graphs (docs/design.md §Graph), defined once for builders and model.

Every graph of a kind carries every node and edge type of its schema, empty if need be, because PyG
batching keeps only the types present in the first graph of a batch.

Per-graph tensors (``HeteroData``), for both kinds:
  data[t].x           [N_t, D]  frozen text embedding of each node (document and orphan subquery:
                                zeros, learned state)
  data[t].orphan      [N_t]     bool, for `GraphSchema.orphan_types` only (browsing subquery): True for
                                a node without text (an orphan subquery), which gets a learned state
  data[t].traj        [N_t]     long, index of the trajectory (0..K-1 over the K retained ones, in
                                pool order) a node belongs to (-1 for query and shared document
                                nodes); answer node k has traj k. Under the merge_answers ablation
                                traj is the candidate index instead, and under merge_evidence a
                                node shared by several trajectories has -1
  data["answer"].vote [A, 6]    log1p(c), c/R, own, g/R, echo, last: c = trajectories with the same
                                normalised answer, R = retained trajectories of the question, own = 1
                                if the answer occurs (whole words, normalised) in what its trajectory
                                read, g = trajectories whose evidence contains it, echo = 1 if the
                                answer only repeats words of the question, last = 1 if it occurs in
                                what its trajectory's last retrieval returned (the last hop)
                                (graph/plan.py)
  data["answer"].y    [A]       float 0/1 correctness (NaN if unknown)
  data["answer"].sample_id [A]  long, the trajectory's sample_id in the pool
  data.question_id    str       and data.answers: list[str] (raw answer per candidate, in order)
"""

from __future__ import annotations

from dataclasses import dataclass

from trace_selector.types import EdgeType, NodeType

VOTE_FEATURES = 6
"""Columns of ``data["answer"].vote``; the first two are the plain vote (checkpoints without
grounding read only those; `ModelConfig` says which columns a selector reads)."""

MAX_RANK = 5
"""Rank relations rank_1..rank_5; retrieved items below rank 5 share the rank_5 relation."""


@dataclass(frozen=True, slots=True)
class GraphSchema:
    """Which node and edge types a graph kind has and what role each node type plays."""

    kind: str
    """"webqa" or "browsing"."""
    node_types: tuple[NodeType, ...]
    """All node types, in a fixed order."""
    edge_types: tuple[EdgeType, ...]
    """All relations, in a fixed order."""
    process_types: tuple[NodeType, ...]
    """Node types whose states are updated by message passing (query is a sender only)."""
    readout_types: tuple[NodeType, ...]
    """Node types a candidate attends over (its own trajectory's nodes of these types)."""
    candidate_type: NodeType = "answer"
    """Node type of the scored candidates (one per retained trajectory)."""
    cross_types: tuple[EdgeType, ...] = ()
    """Relations that connect different trajectories (dropped by the no-cross-trajectory ablation)."""
    orphan_types: tuple[NodeType, ...] = ()
    """Node types some of whose nodes have no text (x = zeros) and get a learned state added; their
    graphs carry ``data[t].orphan``."""

    @property
    def metadata(self) -> tuple[list[NodeType], list[EdgeType]]:
        """PyG-style ``(node_types, edge_types)``."""
        return list(self.node_types), list(self.edge_types)


def _rank_edges(src: str, dst: str) -> tuple[EdgeType, ...]:
    fwd = tuple((src, f"rank_{r}", dst) for r in range(1, MAX_RANK + 1))
    rev = tuple((dst, f"rev_rank_{r}", src) for r in range(1, MAX_RANK + 1))
    return fwd + rev


WEBQA = GraphSchema(
    kind="webqa",
    node_types=("query", "subquery", "chunk", "answer"),
    edge_types=(
        ("query", "starts", "subquery"),
        ("subquery", "next", "subquery"),
        *_rank_edges("subquery", "chunk"),
        ("chunk", "same_within", "chunk"),
        ("chunk", "same_across", "chunk"),
    ),
    process_types=("subquery", "chunk"),
    readout_types=("subquery", "chunk"),
    cross_types=(("chunk", "same_across", "chunk"),),
)

BROWSING_VERSION = 2
"""Layout of the browsing graph built by this version: 1 = rank edges from the listing search and
query-starts (checkpoints saved before `ModelConfig.graph_version`), 2 = TRACE long-horizon (below)."""

BROWSING = GraphSchema(
    kind="browsing",
    node_types=("query", "subquery", "evidence", "document", "answer"),
    # TRACE long-horizon: the query node is in no relation (it only gives the question's state).
    edge_types=(
        ("subquery", "next", "subquery"),
        ("subquery", "previous", "subquery"),
        ("subquery", "opens", "evidence"),
        ("evidence", "opened_by", "subquery"),
        ("subquery", "finds", "evidence"),
        ("evidence", "found_by", "subquery"),
        ("evidence", "of", "document"),
        ("document", "has", "evidence"),
    ),
    process_types=("subquery", "evidence", "document"),
    readout_types=("subquery", "evidence"),
    # evidence-document-evidence is the cross-trajectory path: a document node shared by two
    # trajectories; the ablation gives every trajectory its own copy of the document.
    cross_types=(("evidence", "of", "document"), ("document", "has", "evidence")),
    orphan_types=("subquery",),
)

SCHEMAS: dict[str, GraphSchema] = {"webqa": WEBQA, "browsing": BROWSING}

"""Batched network inputs straight from graph plans, without building a ``HeteroData`` per question.

Scoring needs the tensors a PyG ``Batch`` of the questions' graphs would hold, not the graph
objects: `collate_plans` builds exactly those (node features gathered from one embedding table,
edge indices offset per graph, a ``batch`` vector per node type) with a few numpy concatenations.
Against `materialize` + ``Batch.from_data_list`` it does the same work without per-graph Python
objects, and it keeps torch_geometric out of the scoring path: importing it took 5 s of a cold
`select` on a busy 2-core machine (``python -X importtime``), more than scoring 300 questions warm.

    batch = collate_plans(plans[:64], rows, table)
    scores = net.score(batch.x, batch.edge_index, batch.traj, batch.batch, batch.vote, batch.num_graphs)
    per_question = scores.split(batch.candidates)

Training still batches ``HeteroData`` (graph caches, shuffling, PyG loaders); a test checks that both
routes give the same tensors and scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from trace_selector.graph.plan import GraphPlan
from trace_selector.graph.schema import VOTE_FEATURES
from trace_selector.types import EdgeType, NodeType


@dataclass(slots=True)
class PlanBatch:
    """What `SelectorNet.score` reads, for several questions at once (PyG ``Batch`` layout)."""

    x: dict[NodeType, torch.Tensor]
    """Node features per type, [N_t, D], graphs concatenated in order."""
    traj: dict[NodeType, torch.Tensor]
    """Trajectory (candidate) index of every node, [N_t] long, not offset (as in PyG)."""
    batch: dict[NodeType, torch.Tensor]
    """Graph index of every node, [N_t] long."""
    edge_index: dict[EdgeType, torch.Tensor]
    """[2, E_r] long per relation, source and destination offset by the earlier graphs' node counts."""
    vote: torch.Tensor
    """Vote features of the candidates, [A, VOTE_FEATURES]."""
    num_graphs: int
    """Questions in the batch."""
    candidates: list[int]
    """Candidates per question, to split the [A] scores."""
    orphan: dict[NodeType, torch.Tensor]
    """Per `schema.orphan_types`: [N_t] bool, True for text-less nodes that get the learned state."""


    def to(self, device: str | torch.device) -> PlanBatch:
        """The same batch on `device`."""
        move = lambda d: {k: v.to(device) for k, v in d.items()}  # noqa: E731
        return PlanBatch(move(self.x), move(self.traj), move(self.batch), move(self.edge_index),
                         self.vote.to(device), self.num_graphs, self.candidates, move(self.orphan))


def collate_plans(plans: Sequence[GraphPlan], rows: dict[str, int], table: torch.Tensor) -> PlanBatch:
    """The batched tensors of `plans` (all of one schema), x gathered from `table` by `rows[text]`."""
    if not plans:
        raise ValueError("collate_plans needs at least one plan")
    schema = plans[0].schema
    array = table.detach().cpu().numpy()
    dim = array.shape[1]
    x, traj, batch, counts, orphan = {}, {}, {}, {}, {}
    for ntype in schema.node_types:
        sizes = np.array([len(p.texts[ntype]) for p in plans], dtype=np.int64)
        counts[ntype] = sizes
        texts = [t for p in plans for t in p.texts[ntype]]
        # Text-less nodes (a learned-state type, or orphan subqueries among texted ones) get zero
        # features, as `plan.materialize` gives them.
        idx = np.fromiter((-1 if t is None else rows[t] for t in texts), dtype=np.int64, count=len(texts))
        gathered = array.take(np.maximum(idx, 0), axis=0).reshape(len(texts), dim)
        gathered[idx < 0] = 0.0
        x[ntype] = torch.from_numpy(gathered)
        if ntype in schema.orphan_types:
            orphan[ntype] = torch.from_numpy(idx < 0)
        traj[ntype] = torch.tensor([k for p in plans for k in p.traj[ntype]], dtype=torch.long)
        batch[ntype] = torch.from_numpy(np.repeat(np.arange(len(plans), dtype=np.int64), sizes))
    offsets = {t: np.concatenate([[0], np.cumsum(c)[:-1]]) for t, c in counts.items()}
    edge_index = {}
    for etype in schema.edge_types:
        src_t, _, dst_t = etype
        parts = []
        for g, p in enumerate(plans):
            src, dst = p.edges[etype]
            if src:
                e = np.array([src, dst], dtype=np.int64)
                e[0] += offsets[src_t][g]
                e[1] += offsets[dst_t][g]
                parts.append(e)
        edge_index[etype] = torch.from_numpy(np.concatenate(parts, axis=1)) if parts \
            else torch.zeros(2, 0, dtype=torch.long)
    vote = torch.tensor([v for p in plans for v in p.vote], dtype=torch.float32).view(-1, VOTE_FEATURES)
    return PlanBatch(x, traj, batch, edge_index, vote, len(plans), [len(p.y) for p in plans], orphan)

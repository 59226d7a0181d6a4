"""A question's graph restricted to a subset of its trajectories, as if the pool had held only those.

Users score pools of whatever budget they rolled out (k = 2, 4, 8, 16 ...), but a selector trained
only on the full K of its training pool sees vote features log1p(c) and c/R of K trajectories only
(on the 300 x 16 dev pool the selector trained at K=8 led majority by +4.1 EM at k=4 but +0.3 at
k=16). Training on random subsets each epoch covers every budget with one selector; slicing the
built graph instead of rebuilding it from the pool costs no text encoding.

    keep = draw_subset(graph["answer"].y, k_min=2, k_max=8)    # sorted trajectory indices, or None
    small = subset_graph(graph, keep)                         # HeteroData, same schema
    loader = DataLoader(SubsetGraphs(graphs, 2, None), ...)   # a fresh subset at every read (training)

`subset_graph` agrees with building the graph from the restricted pool (tests/graph/test_subset.py):
nodes and edges of the dropped trajectories go, shared nodes (query; browsing documents still
linked to a kept trajectory) stay, trajectories are renumbered 0..k-1 in their old order, and the
vote columns (log1p(c), c/R, own, g/R) are recomputed over the kept trajectories; g comes from the
`MENTIONS` bookkeeping relation. One difference: subsets are drawn among the *retained*
trajectories, so R = k here, while a k-subset of a pool can retain fewer than k.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from trace_selector.errors import InputError
from trace_selector.graph.plan import MENTIONS
from trace_selector.records.answers import normalize_answer


def _as_index(keep: Sequence[int] | Tensor, n: int) -> Tensor:
    idx = torch.as_tensor(keep, dtype=torch.long).view(-1).unique(sorted=True)
    if idx.numel() == 0:
        raise InputError("subset_graph: keep at least one trajectory")
    if int(idx[0]) < 0 or int(idx[-1]) >= n:
        raise InputError(f"subset_graph: trajectory indices must be in 0..{n - 1}, got {idx.tolist()}")
    return idx


def subset_graph(data: Any, keep: Sequence[int] | Tensor) -> Any:
    """`data` (one question's ``HeteroData``) with only the trajectories in `keep` (indices 0..K-1).

    Raises `InputError` for graphs whose candidates are not one per trajectory (merge_answers) or
    that lack the `MENTIONS` relation (built before it existed: rebuild, the graph cache is keyed by
    format version).
    """
    from torch_geometric.data import HeteroData

    answer = data["answer"]
    n_traj = answer.num_nodes
    if MENTIONS not in data.edge_types or not torch.equal(answer.traj, torch.arange(n_traj)):
        raise InputError(
            f"question {getattr(data, 'question_id', '?')}: subsets need one candidate per trajectory and the "
            f"{MENTIONS[1]} relation (graphs built without merge_answers by this trace-selector version)"
        )
    idx = _as_index(keep, n_traj)
    new_traj = torch.full((n_traj,), -1, dtype=torch.long)
    new_traj[idx] = torch.arange(idx.numel())

    # Nodes owned by a kept trajectory stay; shared nodes (traj -1) are settled after the edges.
    own: dict[str, Tensor] = {}
    for t in data.node_types:
        traj = data[t].traj
        own[t] = (traj >= 0) & (new_traj[traj.clamp(min=0)] >= 0)
    shared_used = {t: torch.zeros_like(m) for t, m in own.items()}
    for et in data.edge_types:
        src_t, _, dst_t = et
        s, d = data[et].edge_index
        shared_used[src_t][s[own[dst_t][d]]] = True
        shared_used[dst_t][d[own[src_t][s]]] = True
    keep_node: dict[str, Tensor] = {}
    for t in data.node_types:
        shared = data[t].traj < 0
        # The question node is in every graph even when no trajectory searched (schema).
        keep_node[t] = own[t] | (shared & (shared_used[t] if t != "query" else torch.ones_like(shared)))

    out = HeteroData()
    remap: dict[str, Tensor] = {}
    for t in data.node_types:
        store, mask = data[t], keep_node[t]
        n = store.num_nodes
        remap[t] = torch.full((n,), -1, dtype=torch.long)
        remap[t][mask] = torch.arange(int(mask.sum()))
        for key, value in store.items():
            if isinstance(value, Tensor) and value.dim() > 0 and value.size(0) == n:
                out[t][key] = value[mask]
            else:
                out[t][key] = value
        traj = out[t].traj
        out[t].traj = torch.where(traj >= 0, new_traj[traj.clamp(min=0)], traj)
    for et in data.edge_types:
        src_t, _, dst_t = et
        s, d = data[et].edge_index
        ok = keep_node[src_t][s] & keep_node[dst_t][d]
        out[et].edge_index = torch.stack([remap[src_t][s[ok]], remap[dst_t][d[ok]]])

    k = idx.numel()
    answers = [data.answers[i] for i in idx.tolist()]
    norm = [normalize_answer(a) for a in answers]
    counts = Counter(norm)
    # g: kept trajectories whose evidence contains the answer = in-degree under MENTIONS (plan.py
    # links every candidate to every reader of its text, so equal answers get equal g).
    readers = torch.bincount(out[MENTIONS].edge_index[1], minlength=k).tolist()
    old = out["answer"].vote
    # own, echo and last belong to the candidate alone: kept as they are.
    vote = [[math.log1p(counts[a]), counts[a] / k, float(old[i, 2]), readers[i] / k, *old[i, 4:].tolist()]
            for i, a in enumerate(norm)]
    out["answer"].vote = torch.tensor(vote, dtype=old.dtype).view(k, old.size(1))
    out.question_id = data.question_id
    out.answers = answers
    return out


def draw_subset(labels: Tensor, k_min: int, k_max: int | None = None, mixed: bool = True,
                generator: torch.Generator | None = None, tries: int = 20) -> Tensor | None:
    """Sorted indices of a random subset of a question's candidates, or None for "all of them".

    The size k is uniform over k_min..min(k_max, K); None when that range is just K (nothing to drop).
    With `mixed`, a subset without both a correct and a wrong candidate is redrawn (up to `tries`
    times, then one of each is forced in): only such subsets teach selection, as in the mixed-only
    filter of the training questions. Unknown labels (NaN) count as neither.

    Shapes: labels [K] -> [k] long.
    """
    n = labels.numel()
    hi = n if k_max is None else min(k_max, n)
    lo = min(k_min, hi)
    if hi >= n and lo >= n:
        return None
    k = int(torch.randint(lo, hi + 1, (1,), generator=generator))
    if k >= n:
        return None
    pos, neg = labels > 0.5, labels < 0.5
    can_mix = mixed and k >= 2 and bool(pos.any()) and bool(neg.any())
    for _ in range(tries if can_mix else 1):
        idx = torch.randperm(n, generator=generator)[:k].sort().values
        if not can_mix or (bool(pos[idx].any()) and bool(neg[idx].any())):
            return idx
    p = pos.nonzero().view(-1)
    q = neg.nonzero().view(-1)
    first = torch.stack([p[torch.randint(p.numel(), (1,), generator=generator)][0],
                         q[torch.randint(q.numel(), (1,), generator=generator)][0]])
    rest = torch.tensor([i for i in torch.randperm(n, generator=generator).tolist() if i not in first.tolist()])
    return torch.cat([first, rest[: k - 2]]).sort().values


class SubsetGraphs(torch.utils.data.Dataset):
    """Training graphs, each drawn as a random trajectory subset (`draw_subset`, mixed) every time it is read.

    Draws use torch's global generator, which Lightning seeds (per worker too), so a run is
    reproducible from its seed.
    """

    def __init__(self, graphs: list, k_min: int, k_max: int | None):
        self.graphs, self.k_min, self.k_max = graphs, k_min, k_max

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, i: int):
        g = self.graphs[i]
        keep = draw_subset(g["answer"].y, self.k_min, self.k_max)
        return g if keep is None else subset_graph(g, keep)

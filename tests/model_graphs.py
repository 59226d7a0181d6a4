"""Hand-built WebQA graphs following graph/schema.py, for model, train and hub tests."""

from __future__ import annotations

import torch
from torch_geometric.data import HeteroData

from trace_selector.graph.plan import MENTIONS
from trace_selector.graph.schema import WEBQA


def toy_graph(seed: int = 0, k: int = 3, dim: int = 8, steps: int = 2, chunks: int = 2, empty_traj: int | None = None) -> HeteroData:
    """A question with `k` trajectories of `steps` searches returning `chunks` chunks each.

    Chunk 0 of every trajectory's first search is the same passage (linked by same_across), and
    trajectory `empty_traj` (if given) has no searches at all.
    """
    g = torch.Generator().manual_seed(seed)
    data = HeteroData()
    sub_traj, chunk_traj, chunk_of, first_chunk = [], [], [], []
    starts, nexts = [], []
    for t in range(k):
        n = 0 if t == empty_traj else steps
        for s in range(n):
            sq = len(sub_traj)
            sub_traj.append(t)
            starts.append(sq) if s == 0 else nexts.append((sq - 1, sq))
            for c in range(chunks):
                if s == 0 and c == 0:
                    first_chunk.append(len(chunk_traj))
                chunk_of.append((sq, len(chunk_traj), c + 1))
                chunk_traj.append(t)
    data["query"].x = torch.randn(1, dim, generator=g)
    data["query"].traj = torch.tensor([-1])
    data["subquery"].x = torch.randn(len(sub_traj), dim, generator=g)
    data["subquery"].traj = torch.tensor(sub_traj, dtype=torch.long)
    data["chunk"].x = torch.randn(len(chunk_traj), dim, generator=g)
    data["chunk"].traj = torch.tensor(chunk_traj, dtype=torch.long)
    data["answer"].x = torch.randn(k, dim, generator=g)
    data["answer"].traj = torch.arange(k)
    counts = torch.randint(1, k + 1, (k,), generator=g).float()
    read = torch.randint(0, 2, (k,), generator=g).float()
    data["answer"].vote = torch.stack([counts.log1p(), counts / k, read, read * counts / k], 1)
    y = torch.zeros(k)
    y[seed % k] = 1.0
    data["answer"].y = y
    data["answer"].sample_id = torch.arange(k) + 10
    data.question_id = f"q{seed}"
    data.answers = [f"a{i}" for i in range(k)]

    def edges(pairs: list[tuple[int, int]]) -> torch.Tensor:
        return torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)

    shared = [(a, b) for a in first_chunk for b in first_chunk if a != b and chunk_traj[a] != chunk_traj[b]]
    for et in WEBQA.edge_types:
        src, rel, dst = et
        if rel == "starts":
            pairs = [(0, s) for s in starts]
        elif rel == "next":
            pairs = nexts
        elif rel.startswith("rank_"):
            pairs = [(sq, c) for sq, c, r in chunk_of if r == int(rel[5:])]
        elif rel.startswith("rev_rank_"):
            pairs = [(c, sq) for sq, c, r in chunk_of if r == int(rel[9:])]
        elif rel == "same_across":
            pairs = shared
        else:
            pairs = []
        data[et].edge_index = edges(pairs)
    # Bookkeeping for trajectory subsets (graph/plan.py): each grounded answer is read by its own trajectory.
    data[MENTIONS].edge_index = edges([(i, i) for i in range(k) if read[i]])
    return data


def one_thread():
    """Fixture body: run with 1 torch thread. On the shared 2-core machine 2 OpenMP threads made
    these tiny graphs ~50x slower (spinning workers), not faster."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

"""Trajectory subsets of a built graph agree with building the graph from the restricted pool."""

from __future__ import annotations

import itertools

import pytest
import torch

from trace_selector.errors import InputError
from trace_selector.graph import GraphOptions, build_graph
from trace_selector.graph.encoder import HashEncoder
from trace_selector.graph.plan import MENTIONS
from trace_selector.graph.subset import draw_subset, subset_graph
from trace_selector.records import Document, QuestionGroup, Step, Trajectory

P = ("Paris", "Paris is the capital of France.")
F = ("France", "France is a country in Europe; Lyon is in France.")
L = ("Lyon", "Lyon is a large French city.")
M = ("Marseille", "Marseille is a port.")


def docs(*items):
    return [Document(rank=r, title=t, text=x) for r, (t, x) in enumerate(items, 1)]


def traj(sample, answer, *searches):
    steps = [Step("search", f"q{sample}-{i}", documents=docs(*d)) for i, d in enumerate(searches)]
    return Trajectory("q1", "Which city is the capital of France?", sample, answer, steps, ["Paris"])


def group(trajs=None) -> QuestionGroup:
    trajs = trajs if trajs is not None else [
        traj(0, "Paris", [P, F], [L]),
        traj(1, "Lyon", [F]),            # reads "Lyon" in F: grounded
        traj(2, "Lyon", [M]),            # not grounded
        traj(3, "Paris", [M, P]),
        traj(4, "Marseille", [L, F]),    # not grounded; reads Lyon and Paris? no Paris, yes Lyon
        traj(5, "Paris", [P]),
    ]
    return QuestionGroup("q1", trajs[0].question, ["Paris"], trajs)


def pairs(data, et):
    return sorted(map(tuple, data[et].edge_index.t().tolist()))


def assert_same_graph(a, b):
    assert a.node_types == b.node_types and sorted(a.edge_types) == sorted(b.edge_types)
    for t in a.node_types:
        assert torch.equal(a[t].x, b[t].x), t
        assert torch.equal(a[t].traj, b[t].traj), t
    for et in a.edge_types:
        assert pairs(a, et) == pairs(b, et), et
    for key in ("y", "sample_id"):
        assert torch.equal(a["answer"][key], b["answer"][key])
    assert torch.allclose(a["answer"].vote, b["answer"].vote)
    assert a.answers == b.answers and a.question_id == b.question_id


def test_every_subset_equals_the_graph_of_the_restricted_pool():
    enc = HashEncoder(8)
    g = group()
    full = build_graph(g, enc)
    assert MENTIONS in full.edge_types
    for k in range(1, 6):
        for keep in itertools.combinations(range(6), k):
            expected = build_graph(QuestionGroup(g.question_id, g.question, g.golden_answers,
                                                 [g.trajectories[i] for i in keep]), enc)
            assert_same_graph(subset_graph(full, list(keep)), expected)


def test_vote_columns_by_hand():
    full = build_graph(group(), HashEncoder(8))
    sub = subset_graph(full, [1, 2, 4])  # Lyon, Lyon, Marseille: Lyon read by 1 and 4, Marseille by 2 only
    expected = torch.tensor([
        [torch.log1p(torch.tensor(2.0)), 2 / 3, 1.0, 2 / 3, 0.0, 1.0],
        [torch.log1p(torch.tensor(2.0)), 2 / 3, 0.0, 2 / 3, 0.0, 0.0],
        [torch.log1p(torch.tensor(1.0)), 1 / 3, 0.0, 1 / 3, 0.0, 0.0],
    ])
    assert torch.allclose(sub["answer"].vote, expected)
    assert sub["answer"].traj.tolist() == [0, 1, 2] and sub["answer"].sample_id.tolist() == [1, 2, 4]


def test_browsing_subset_keeps_only_documents_still_linked():
    from tests.conftest import browsing_group

    enc = HashEncoder(8)
    g = browsing_group()
    full = build_graph(g, enc)
    kept_ids = full["answer"].sample_id.tolist()
    for keep in ([0], [1], [0, 1], [1, 2]):
        keep = [i for i in keep if i < len(kept_ids)]
        sub = subset_graph(full, keep)
        ref = build_graph(QuestionGroup(g.question_id, g.question, g.golden_answers,
                                        [t for t in g.trajectories if t.sample_id in [kept_ids[i] for i in keep]]), enc)
        for t in ref.node_types:
            assert sub[t].num_nodes == ref[t].num_nodes, (keep, t)
        for et in ref.edge_types:
            assert sub[et].edge_index.size(1) == ref[et].edge_index.size(1), (keep, et)
        assert torch.allclose(sub["answer"].vote, ref["answer"].vote)


def test_bad_subsets_fail_clearly():
    full = build_graph(group(), HashEncoder(8))
    with pytest.raises(InputError, match="in 0..5"):
        subset_graph(full, [0, 6])
    with pytest.raises(InputError, match="at least one"):
        subset_graph(full, [])
    merged = build_graph(group(), HashEncoder(8), GraphOptions(merge_answers=True))
    with pytest.raises(InputError, match="one candidate per trajectory"):
        subset_graph(merged, [0, 1])


def test_draw_subset_sizes_and_mixing():
    gen = torch.Generator().manual_seed(0)
    labels = torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 0])
    sizes = set()
    for _ in range(300):
        idx = draw_subset(labels, 2, 8, generator=gen)
        if idx is None:
            sizes.add(8)
            continue
        sizes.add(idx.numel())
        assert torch.equal(idx, idx.sort().values) and idx.unique().numel() == idx.numel()
        assert labels[idx].max() == 1 and labels[idx].min() == 0  # mixed: the one right answer is always in
    assert sizes == set(range(2, 9))
    assert draw_subset(labels, 8, None, generator=gen) is None        # only size K: keep the graph
    assert draw_subset(labels, 2, 3, generator=gen).numel() in (2, 3)  # k_max caps the size
    unmixed = draw_subset(torch.zeros(8), 2, 2, generator=gen)       # nothing to mix: any subset
    assert unmixed.numel() == 2

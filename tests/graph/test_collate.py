"""Plan batches (graph/collate.py) equal PyG batches of materialised graphs, tensor for tensor and score for score."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Batch

from trace_selector.graph import GraphOptions, build_graphs, embed_plans, plan_graphs
from trace_selector.graph.collate import collate_plans
from trace_selector.graph.encoder import HashEncoder
from trace_selector.graph.plan import MENTIONS
from trace_selector.model import ModelConfig, SelectorNet
from trace_selector.records import read_pool
from trace_selector.selector import Selector, score_plans, selections_from_plans

from tests.conftest import DATA


@torch.inference_mode()
def score_graphs(net, graphs, batch_size):
    """The slow reference: the network on PyG batches of materialised ``HeteroData`` graphs."""
    out = []
    for start in range(0, len(graphs), batch_size):
        chunk = graphs[start : start + batch_size]
        out.extend(net(Batch.from_data_list(chunk)).float().split([g["answer"].num_nodes for g in chunk]))
    return out


def picks_from_graphs(graphs, scores):
    """Reference picks: per graph, the sample id of its first highest-scoring candidate and every
    candidate's score by sample id."""
    return {g.question_id: (int(g["answer"].sample_id[int(torch.argmax(s))]),
                            dict(zip(g["answer"].sample_id.tolist(), s.tolist()))) for g, s in zip(graphs, scores)}



@pytest.mark.parametrize("kind", ["webqa", "browsing"])
@pytest.mark.parametrize("options", [{}, {"merge_evidence": True}, {"merge_answers": True, "cross_edges": False}])
def test_plan_batch_equals_pyg_batch(kind, options):
    pool = read_pool(DATA / f"{kind}_pool.jsonl")
    opts = GraphOptions(kind=kind, **options)
    enc = HashEncoder(8)
    graphs, _ = build_graphs(pool, enc, opts)
    plans, _ = plan_graphs(pool, opts)
    rows, table = embed_plans(plans, enc)
    ours, theirs = collate_plans(plans, rows, table), Batch.from_data_list(graphs)
    assert ours.num_graphs == theirs.num_graphs == len(graphs)
    for t in ours.x:
        assert torch.equal(ours.x[t], theirs[t].x), t
        assert torch.equal(ours.traj[t], theirs[t].traj), t
        assert torch.equal(ours.batch[t], theirs[t].batch), t
    # the subset bookkeeping relation rides along in PyG graphs only; the network reads no such edges
    assert set(ours.edge_index) == set(theirs.edge_types) - {MENTIONS}
    for et, e in ours.edge_index.items():
        assert torch.equal(e, theirs[et].edge_index), et
    assert torch.equal(ours.vote, theirs["answer"].vote)
    assert ours.candidates == [g["answer"].num_nodes for g in graphs]


@pytest.mark.parametrize("kind", ["webqa", "browsing"])
def test_plan_scores_and_selections_equal_graph_route(kind):
    torch.manual_seed(0)
    pool = read_pool(DATA / f"{kind}_pool.jsonl")
    net = SelectorNet(ModelConfig(kind=kind, embed_dim=8, hidden=16, layers=2, heads=2)).eval()
    opts = GraphOptions(kind=kind)
    enc = HashEncoder(8)
    graphs, _ = build_graphs(pool, enc, opts)
    plans, _ = plan_graphs(pool, opts)
    rows, table = embed_plans(plans, enc)
    # batch size 2: several batches, each holding the same graphs on both routes
    a, b = score_graphs(net, graphs, 2), score_plans(net, plans, rows, table, 2)
    assert len(a) == len(b) == len(graphs) and all(torch.equal(x, y) for x, y in zip(a, b))
    reference = picks_from_graphs(graphs, a)
    assert {q: (p.sample_id, p.scores) for q, p in selections_from_plans(plans, b).items()} == reference
    picks = Selector(net, encoder=HashEncoder(8)).select(pool)
    assert [p.sample_id for p in picks] == [reference[g.question_id][0] for g in pool.groups]


def test_collate_needs_plans():
    with pytest.raises(ValueError, match="at least one plan"):
        collate_plans([], {}, torch.zeros(0, 8))


def test_orphan_subqueries_collate_like_pyg_and_score_the_same():
    from tests.conftest import orphan_group

    from trace_selector.graph import plan_graph

    torch.manual_seed(0)
    group = orphan_group()
    opts = GraphOptions(kind="browsing")
    enc = HashEncoder(8)
    [graph], _ = build_graphs([group], enc, opts)
    plan = plan_graph(group, opts)
    rows, table = embed_plans([plan], enc)
    ours = collate_plans([plan], rows, table)
    assert ours.orphan["subquery"].tolist() == graph["subquery"].orphan.tolist() == [True, False, False, False]
    assert torch.equal(ours.x["subquery"], graph["subquery"].x) and not ours.x["subquery"][0].any()
    net = SelectorNet(ModelConfig(kind="browsing", embed_dim=8, hidden=16, layers=2, heads=2)).eval()
    with torch.no_grad():
        net.orphan["subquery"].fill_(3.0)  # a learned state that changes the scores if it is dropped
    [a], [b] = score_graphs(net, [graph], 1), score_plans(net, [plan], rows, table, 1)
    assert torch.allclose(a, b, atol=1e-6)

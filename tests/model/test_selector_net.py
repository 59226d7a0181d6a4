"""SelectorNet, its layers and the QFormer on tiny hand-built graphs."""

from __future__ import annotations

import math

import pytest
import torch
from torch_geometric.data import Batch

from tests.conftest import DATA, one_thread, toy_graph
from trace_selector.errors import InputError
from trace_selector.model import AnswerQFormer, ModelConfig, RelationalMeanConv, SelectorNet, TypeEncoder
from trace_selector.model.layers import scatter_mean
from trace_selector.model.qformer import group_softmax, match_pairs


_one_thread = pytest.fixture(autouse=True)(one_thread)


def net(**kw) -> SelectorNet:
    torch.manual_seed(0)
    return SelectorNet(ModelConfig(**{"embed_dim": 8, "hidden": 16, "layers": 2, "heads": 4, **kw})).eval()


def test_scores_shape_and_scale_bound():
    model = net()
    g = toy_graph(0, k=3)
    scores = model(g)
    assert scores.shape == (3,)
    assert torch.all(scores.abs() <= 10.0 + 1e-5)  # cosine in [-1, 1] times exp(eta) = 10 at init
    assert math.isclose(float(model.scale.detach()), 10.0, rel_tol=1e-6)
    with torch.no_grad():
        model.eta.fill_(10.0)
    assert float(model.scale.detach()) == 100.0


def test_batched_scores_equal_single_graph_scores():
    model = net()
    graphs = [toy_graph(s, k=k) for s, k in [(0, 3), (1, 5), (2, 4), (3, 2)]]
    single = torch.cat([model(g) for g in graphs])
    batched = model(Batch.from_data_list(graphs))
    assert batched.shape == single.shape
    torch.testing.assert_close(batched, single, atol=1e-5, rtol=0)


def test_candidate_without_readout_nodes_falls_back_to_its_own_state():
    model = net()
    g = toy_graph(0, k=3, empty_traj=1)
    scores = model(g)
    assert torch.isfinite(scores).all()
    # Its score does not depend on any trajectory's evidence.
    g2 = g.clone()
    g2["chunk"].x = torch.randn_like(g2["chunk"].x)
    g2["subquery"].x = torch.randn_like(g2["subquery"].x)
    new = model(g2)
    assert torch.allclose(new[1], scores[1], atol=1e-6)
    assert not torch.allclose(new[0], scores[0], atol=1e-4)


def test_no_gnn_output_is_independent_of_edges():
    g = toy_graph(0, k=3)
    cut = g.clone()
    for et in cut.edge_types:
        cut[et].edge_index = torch.zeros(2, 0, dtype=torch.long)
    assert torch.allclose(net(layers=0)(g), net(layers=0)(cut))
    assert not torch.allclose(net()(g), net()(cut), atol=1e-4)


def test_no_cross_trajectory_ignores_same_across_edges():
    g = toy_graph(0, k=3)
    cut = g.clone()
    cut["chunk", "same_across", "chunk"].edge_index = torch.zeros(2, 0, dtype=torch.long)
    assert torch.allclose(net(cross_trajectory=False)(g), net(cross_trajectory=False)(cut))
    assert not torch.allclose(net()(g), net()(cut), atol=1e-5)


def test_fixed_query_readout_differs_and_ignores_candidate_state_in_attention():
    g = toy_graph(0, k=3)
    answer, fixed = net(), net(readout="fixed")
    assert fixed.readout.query is not None and answer.readout.query is None
    assert fixed(g).shape == (3,)
    assert not torch.allclose(answer(g), fixed(g))


def test_mean_readout_is_uniform_attention_and_needs_no_query():
    g = toy_graph(0, k=3)
    mean = net(readout="mean")
    assert mean.readout.mean_pool and mean.readout.query is None
    assert not torch.allclose(net()(g), mean(g))
    # Uniform weights: the memory nodes' order and the candidates' states do not change what is read.
    torch.manual_seed(0)
    q = AnswerQFormer(8, heads=2, mean_pool=True).eval()
    cand, memory = torch.randn(2, 8), torch.randn(5, 8)
    cand_group, mem_group = torch.tensor([0, 1]), torch.tensor([0, 0, 0, 1, 1])
    with torch.no_grad():
        q.q.weight.normal_()  # would change attention weights, not a mean
        out = q(cand, cand_group, memory, mem_group)
        perm = torch.tensor([2, 0, 1, 4, 3])
        torch.testing.assert_close(out, q(cand, cand_group, memory[perm], mem_group[perm]))
        mean_v = torch.stack([q.v(memory[:3]).mean(0), q.v(memory[3:]).mean(0)])
        z = q.norm1(cand + q.o(mean_v))
        torch.testing.assert_close(out, q.norm2(z + q.ffn(z)))
    with pytest.raises(ValueError, match="exclude each other"):
        AnswerQFormer(8, heads=2, mean_pool=True, fixed_query=True)
    with pytest.raises(ValueError, match="'mean'"):
        ModelConfig(readout="max")


def flip_vote_columns(columns, **config):
    """A seeded model with a non-zero vote projection, and whether its scores stay the same when the
    vote `columns` of a toy graph are flipped (x -> 1 - x)."""
    g = toy_graph(0, k=3)
    g2 = g.clone()
    g2["answer"].vote[:, columns] = 1.0 - g2["answer"].vote[:, columns]
    torch.manual_seed(0)
    model = SelectorNet(ModelConfig(embed_dim=8, hidden=16, layers=1, **config))
    with torch.no_grad():
        model.vote.weight.normal_()
    model.eval()
    return model, torch.allclose(model(g), model(g2))


def test_last_hop_column_is_read_only_when_enabled():
    assert not ModelConfig.from_json({"kind": "webqa"}).last_hop
    assert ModelConfig(last_hop=True).method == "trace+lasthop"
    assert ModelConfig(grounding=True, vote_prior=True, last_hop=True).method == "trace_grounded"
    for last_hop, same in [(False, True), (True, False)]:
        model, unchanged = flip_vote_columns(5, last_hop=last_hop)
        assert model.vote.in_features == (3 if last_hop else 2) and unchanged is same


def test_vote_projection_starts_at_zero():
    model = net()
    g = toy_graph(0, k=3)
    g2 = g.clone()
    g2["answer"].vote = g2["answer"].vote * 5
    assert torch.allclose(model(g), model(g2))
    assert torch.count_nonzero(model.vote.weight) == 0


def test_grounding_columns_are_read_only_when_enabled():
    # The default is the paper's configuration; pre-grounding checkpoints load as that too.
    assert not ModelConfig().grounding and not ModelConfig.from_json({"kind": "webqa"}).grounding
    assert ModelConfig().method == "trace" and ModelConfig(grounding=True, vote_prior=True).method == "trace_grounded"
    for grounding, same in [(False, True), (True, False)]:
        model, unchanged = flip_vote_columns(slice(2, None), grounding=grounding)
        assert model.vote.in_features == (4 if grounding else 2) and unchanged is same


def test_without_count_input_the_count_column_is_ignored():
    assert ModelConfig.from_json({"kind": "webqa"}).count_input  # old checkpoints read log1p(c)
    assert ModelConfig(count_input=False).method == "trace+shares"
    assert ModelConfig(count_input=False, grounding=True, vote_prior=True).method == "trace_grounded"
    g = toy_graph(0, k=3)
    g2 = g.clone()
    g2["answer"].vote[:, 0] = g2["answer"].vote[:, 0] * 3.0 + 1.0  # a count range training never saw
    for count_input, same in [(True, False), (False, True)]:
        torch.manual_seed(0)
        model = SelectorNet(ModelConfig(embed_dim=8, hidden=16, layers=1, grounding=True, vote_prior=True,
                                        count_input=count_input))
        with torch.no_grad():
            model.vote.weight.normal_()
            model.prior.weight.normal_()
        model.eval()
        assert model.vote.in_features == (4 if count_input else 3)
        assert torch.allclose(model(g), model(g2)) is same


def test_echo_column_is_read_only_when_enabled():
    assert not ModelConfig.from_json({"kind": "webqa"}).echo and ModelConfig(echo=True).method == "trace+echo"
    g = toy_graph(0, k=3)
    g2 = g.clone()
    g2["answer"].vote[:, 4] = 1.0 - g2["answer"].vote[:, 4]
    for echo, same in [(False, True), (True, False)]:
        torch.manual_seed(0)
        model = SelectorNet(ModelConfig(embed_dim=8, hidden=16, layers=1, grounding=True, echo=echo))
        with torch.no_grad():
            model.vote.weight.normal_()
        model.eval()
        assert model.vote.in_features == (5 if echo else 4)
        assert torch.allclose(model(g), model(g2)) is same


def test_reset_parameters_restores_initial_state():
    model = net()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    model.reset_parameters()
    after = model.state_dict()
    assert torch.equal(after["eta"], before["eta"])
    assert torch.equal(after["vote.weight"], before["vote.weight"])
    # Random layers are re-drawn (not equal to the perturbed values) and LayerNorms are reset.
    assert not torch.equal(after["q_proj.weight"], before["q_proj.weight"] + 1.0)
    assert torch.equal(after["convs.0.norm.chunk.weight"], torch.ones(16))


def test_gradients_reach_every_parameter():
    model = net().train()
    graphs = [toy_graph(s, k=3) for s in range(3)]
    model(Batch.from_data_list(graphs)).sum().backward()
    missing = {n for n, p in model.named_parameters() if p.grad is None}
    # Only weights of relations with no edge in these graphs may lack a gradient; the zero-initialised
    # vote projection is trainable.
    unused = {f"convs.{i}.rel.{'__'.join(et)}.weight" for i in range(2) for et in graphs[0].edge_types
              if graphs[0][et].edge_index.numel() == 0}
    assert missing and missing <= unused
    assert model.vote.weight.grad is not None


def test_browsing_kind_has_learned_document_state():
    model = SelectorNet(ModelConfig(kind="browsing", embed_dim=8, hidden=16, layers=1))
    enc = model.encoder
    assert isinstance(enc, TypeEncoder) and "document" in enc.learned and "document" not in enc.lins
    out = enc({"document": torch.zeros(3, 8), "evidence": torch.randn(2, 8)})
    assert out["document"].shape == (3, 16) and torch.equal(out["document"][0], out["document"][2])


def test_relational_conv_updates_process_types_only():
    conv = RelationalMeanConv(4, [("query", "starts", "subquery"), ("subquery", "next", "subquery")], ["subquery"])
    x = {"query": torch.randn(1, 4), "subquery": torch.randn(3, 4)}
    edges = {("query", "starts", "subquery"): torch.tensor([[0], [0]]), ("subquery", "next", "subquery"): torch.tensor([[0, 1], [1, 2]])}
    out = conv(x, edges)
    assert out["query"] is x["query"]
    assert out["subquery"].shape == (3, 4)
    # LayerNorm output: zero mean per row.
    assert torch.allclose(out["subquery"].mean(-1), torch.zeros(3), atol=1e-5)


def test_relational_conv_mean_matches_reference():
    torch.manual_seed(0)
    et = ("a", "r", "b")
    conv = RelationalMeanConv(3, [et], ["b"]).eval()
    x = {"a": torch.randn(4, 3), "b": torch.randn(2, 3)}
    ei = torch.tensor([[0, 1, 2, 3], [0, 0, 0, 1]])
    out = conv(x, {et: ei})["b"]
    mean = torch.stack([x["a"][:3].mean(0), x["a"][3]])
    ref = conv.norm["b"](x["b"] + torch.relu(conv.root["b"](x["b"]) + conv.rel["a__r__b"](mean)))
    torch.testing.assert_close(out, ref)


def test_relational_conv_sparse_rows_match_dense_reference():
    # W_r is applied only to rows with an r-neighbour; the dense rule (W_r on every row's mean, an
    # empty mean being zero) must give the same layer output, e.g. chunks each under one rank_r.
    torch.manual_seed(1)
    ets = [("s", f"rank_{r}", "c") for r in range(1, 4)] + [("c", "same", "c")]
    conv = RelationalMeanConv(8, ets, ["c"]).eval()
    x = {"s": torch.randn(3, 8), "c": torch.randn(9, 8)}
    edges = {ets[0]: torch.tensor([[0, 1, 2], [0, 3, 6]]), ets[1]: torch.tensor([[0, 1, 2], [1, 4, 7]]),
             ets[2]: torch.tensor([[0, 1, 2], [2, 5, 8]]), ets[3]: torch.tensor([[0, 3, 3], [3, 0, 8]])}
    agg = conv.root["c"](x["c"])
    for et in ets:
        src = x["s"] if et[0] == "s" else x["c"]
        agg = agg + conv.rel["__".join(et)](scatter_mean(src[edges[et][0]], edges[et][1], 9))
    ref = conv.norm["c"](x["c"] + torch.relu(agg))
    torch.testing.assert_close(conv(x, edges)["c"], ref, rtol=1e-6, atol=1e-6)


def test_match_pairs_and_group_softmax():
    ci, mi = match_pairs(torch.tensor([3, -1, 5, 3]), torch.tensor([5, 3, 7, 3, -1]))
    pairs = sorted(zip(ci.tolist(), mi.tolist()))
    assert pairs == [(0, 1), (0, 3), (2, 0), (3, 1), (3, 3)]
    logits = torch.tensor([[1.0], [2.0], [3.0]])
    p = group_softmax(logits, torch.tensor([0, 0, 1]), 2)
    torch.testing.assert_close(p[:2, 0], torch.softmax(torch.tensor([1.0, 2.0]), 0))
    assert float(p[2, 0]) == 1.0


def test_qformer_matches_dense_masked_attention():
    torch.manual_seed(0)
    q = AnswerQFormer(8, heads=2).eval()
    cand, mem = torch.randn(2, 8), torch.randn(5, 8)
    cg, mg = torch.tensor([0, 1]), torch.tensor([0, 1, 0, 1, 1])
    out = q(cand, cg, mem, mg)
    ref = []
    for i in range(2):
        m = mem[mg == cg[i]]
        qi = q.q(cand[i : i + 1]).view(1, 2, 4).transpose(0, 1)
        k = q.k(m).view(-1, 2, 4).transpose(0, 1)
        v = q.v(m).view(-1, 2, 4).transpose(0, 1)
        att = torch.softmax(qi @ k.transpose(1, 2) / 2.0, -1) @ v
        z = q.norm1(cand[i] + q.o(att.transpose(0, 1).reshape(8)))
        ref.append(q.norm2(z + q.ffn(z)))
    torch.testing.assert_close(out, torch.stack(ref), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "bad",
    [{"kind": "nope"}, {"layers": -1}, {"hidden": 10, "heads": 4}, {"readout": "max"}, {"dropout": 1.0}, {"init_scale": 200.0}],
)
def test_config_validation(bad):
    with pytest.raises(ValueError):
        ModelConfig(**bad)


def test_config_from_json_strict_unknown_and_defaults_for_missing():
    cfg = ModelConfig.from_json({"hidden": 32})
    assert cfg.hidden == 32 and cfg.layers == 4
    with pytest.raises(InputError, match="unknown model config key.*future_field"):
        ModelConfig.from_json({"future_field": 1})


@pytest.mark.parametrize("options", [{}, {"cross_edges": False}, {"merge_evidence": True}, {"merge_answers": True}])
def test_builder_graphs_under_every_graph_option(options):
    from trace_selector.graph import GraphOptions, build_graphs
    from trace_selector.graph.encoder import BagOfWordsEncoder
    from trace_selector.records.synthetic import make_pool, SyntheticConfig

    pool = make_pool(SyntheticConfig(questions=4, k=6))
    graphs, _ = build_graphs(pool, BagOfWordsEncoder(8), GraphOptions(kind="webqa", **options))
    model = net()
    single = [model(g) for g in graphs]
    for g, s in zip(graphs, single):
        n_answers = len({t.answer.lower() for t in pool.groups[int(g.question_id)].trajectories})
        assert s.shape == (n_answers if options.get("merge_answers") else g["answer"].num_nodes,)
    torch.testing.assert_close(model(Batch.from_data_list(graphs)), torch.cat(single), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["webqa", "browsing"])
def test_bundled_pools_both_kinds_batch_and_train(kind):
    from trace_selector.graph import GraphOptions, build_graphs
    from trace_selector.graph.encoder import HashEncoder
    from trace_selector.model import selection_loss
    from trace_selector.records import read_pool

    pool = read_pool(DATA / f"{kind}_pool.jsonl")
    graphs, _ = build_graphs(pool, HashEncoder(8), GraphOptions(kind=kind))
    model = SelectorNet(ModelConfig(kind=kind, embed_dim=8, hidden=16, layers=2)).eval()
    batch = Batch.from_data_list(graphs)
    torch.testing.assert_close(model(batch), torch.cat([model(g) for g in graphs]), atol=1e-5, rtol=0)
    model.train()
    loss = selection_loss(model(batch), batch["answer"].y, batch["answer"].batch).total
    loss.backward()
    assert torch.isfinite(loss) and model.encoder.lins["query"].weight.grad is not None


def test_vote_prior_adds_a_linear_vote_term():
    g = toy_graph(0, k=3)
    with_prior, without = net(grounding=True, vote_prior=True), net(grounding=True, vote_prior=False)
    assert ModelConfig.from_json({}).vote_prior is False and without.prior is None
    without.load_state_dict({k: v for k, v in with_prior.state_dict().items() if not k.startswith("prior.")})
    assert torch.allclose(with_prior(g), without(g))  # the prior starts at zero
    with torch.no_grad():
        with_prior.prior.weight.fill_(1.0)
        with_prior.prior.bias.fill_(0.5)
    assert torch.allclose(with_prior(g) - without(g), g["answer"].vote[:, :4].sum(1) + 0.5, atol=1e-5)

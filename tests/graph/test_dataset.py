"""On-disk graph cache: built once, loaded after; the key follows pool content, encoder and options."""

from __future__ import annotations

import torch

from trace_selector.graph import GraphOptions
from trace_selector.graph.dataset import cache_key, load_or_build, pool_fingerprint
from trace_selector.graph.encoder import HashEncoder
from trace_selector.records import Document, Pool, QuestionGroup, Step, Trajectory


def pool(answer: str = "Paris") -> Pool:
    steps = [Step("search", "capital", documents=[Document(1, "Paris", "Paris is the capital.")])]
    trajs = [Trajectory("q", "capital?", i, a, steps, ["Paris"]) for i, a in enumerate([answer, "Lyon", ""])]
    return Pool([QuestionGroup("q", "capital?", ["Paris"], trajs)])


def test_second_call_loads_the_same_graphs(tmp_path):
    first = load_or_build(pool(), HashEncoder(4), cache_dir=tmp_path)
    assert not first.cached and first.path.is_file()
    enc = HashEncoder(4)
    second = load_or_build(pool(), enc, cache_dir=tmp_path)
    assert second.cached and second.path == first.path
    assert enc.total.texts == 0  # nothing encoded
    assert second.report == first.report and second.report.dropped["no_answer"] == 1
    a, b = first.graphs[0], second.graphs[0]
    assert set(a.edge_types) == set(b.edge_types)
    for t in a.node_types:
        assert torch.equal(a[t].x, b[t].x)
    assert b.answers == ["Paris", "Lyon"]


def test_key_changes_with_content_encoder_and_options():
    base = cache_key(pool(), HashEncoder(4), GraphOptions())
    assert cache_key(pool(), HashEncoder(4), GraphOptions()) == base
    assert cache_key(pool("Rome"), HashEncoder(4), GraphOptions()) != base
    assert cache_key(pool(), HashEncoder(8), GraphOptions()) != base
    assert cache_key(pool(), HashEncoder(4), GraphOptions(cross_edges=False)) != base
    p = pool()
    p.path = "elsewhere.jsonl"  # the file name is not content
    assert pool_fingerprint(p) == pool_fingerprint(pool())


def test_without_cache_dir_builds_only():
    gs = load_or_build(pool(), HashEncoder(4))
    assert gs.path is None and not gs.cached and len(gs.graphs) == 1

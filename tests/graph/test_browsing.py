"""Browsing graph builder: hand-counted nodes and edges, canonical-URL documents, ablations."""

from __future__ import annotations

import math

import pytest
import torch

from trace_selector.errors import InputError
from trace_selector.graph import GraphOptions, build_graph, build_graphs
from trace_selector.graph.browsing import is_evidence, is_search, page_url
from trace_selector.graph.encoder import HashEncoder
from trace_selector.graph.plan import MENTIONS
from trace_selector.graph.schema import BROWSING
from trace_selector.records import QuestionGroup, Step, Trajectory

from tests.conftest import FIND_X, browsing_group, hit, orphan_group, page, traj

def edges(data, src, rel, dst):
    return data[src, rel, dst].edge_index.tolist()


def sizes(data):
    return {t: data[t].x.shape[0] for t in BROWSING.node_types}


def test_counts_by_hand():
    data = build_graph(browsing_group(), HashEncoder(8))
    # T2 answered after a failed open only: kept, with an orphan subquery (s2) and no evidence
    assert sizes(data) == {"query": 1, "subquery": 3, "evidence": 4, "document": 2, "answer": 3}
    # the query node is in no relation; at most one search per trajectory, so no temporal edges
    assert not any("query" in (src, dst) for src, _, dst in data.edge_types)
    assert edges(data, "subquery", "next", "subquery") == [[], []]
    assert edges(data, "subquery", "previous", "subquery") == [[], []]
    # e0 open X, e1 find X (T0, both under s0, which listed X); e2 open X (T1, listed by s1); e3 open Z
    # (T1, never listed: its latest search s1)
    assert edges(data, "subquery", "opens", "evidence") == [[0, 1, 1], [0, 2, 3]]
    assert edges(data, "evidence", "opened_by", "subquery") == [[0, 2, 3], [0, 1, 1]]
    assert edges(data, "subquery", "finds", "evidence") == [[0], [1]]
    assert edges(data, "evidence", "found_by", "subquery") == [[1], [0]]
    assert data["subquery"].orphan.tolist() == [False, False, True]
    assert data["subquery"].traj.tolist() == [0, 1, 2]
    assert edges(data, "evidence", "of", "document") == [[0, 1, 2, 3], [0, 0, 0, 1]]
    assert edges(data, "document", "has", "evidence") == [[0, 0, 0, 1], [0, 1, 2, 3]]
    assert data["document"].traj.tolist() == [-1, -1]
    assert data["evidence"].traj.tolist() == [0, 0, 1, 1]
    assert torch.count_nonzero(data["document"].x) == 0 and data["document"].x.shape[1] == 8
    assert data["answer"].y.tolist() == [1.0, 0.0, 1.0]
    # Alice (T0, T2: c=2 of R=3) is on page X, which T0 and T1 opened; nobody read "Bob"; T2 read nothing.
    # Last step that returned text: T0's failed open, T1's page Z, T2's failed open: no answer in any.
    alice, bob = [math.log1p(2), 2 / 3], [math.log1p(1), 1 / 3]
    assert torch.allclose(data["answer"].vote, torch.tensor(
        [alice + [1.0, 2 / 3, 0.0, 0.0], bob + [0.0, 0.0, 0.0, 0.0], alice + [0.0, 2 / 3, 0.0, 0.0]]))


def test_orphan_subquery_and_temporal_edges():
    data = build_graph(orphan_group(), HashEncoder(8))
    # subqueries: o (T0 orphan), "X founder" (T0), "q", "more" (T1)
    assert data["subquery"].orphan.tolist() == [True, False, False, False]
    assert torch.count_nonzero(data["subquery"].x[0]) == 0 and torch.count_nonzero(data["subquery"].x[1]) > 0
    assert data["subquery"].traj.tolist() == [0, 0, 1, 1]
    assert edges(data, "subquery", "next", "subquery") == [[0, 2], [1, 3]]  # o -> "X founder", "q" -> "more"
    assert edges(data, "subquery", "previous", "subquery") == [[1, 3], [0, 2]]
    # e0 open X and e1 find X hang off the orphan; e2 open Z off "X founder"; e3 open X off "q"
    assert edges(data, "subquery", "opens", "evidence") == [[0, 1, 2], [0, 2, 3]]
    assert edges(data, "subquery", "finds", "evidence") == [[0], [1]]


def test_drop_reasons():
    _, report = build_graphs([browsing_group()], HashEncoder(4))
    assert report.dropped == {"no_answer": 1, "no_search": 0}  # answered without observations: kept
    assert report.retained == 3


def test_answered_without_observations_keeps_c_over_r():
    # TRACE keeps a candidate that never read anything (one orphan subquery for its chain), so the
    # vote features count it: 2 of 3 said "Alice" whether or not the third searched.
    quiet = [traj(1, "Alice", []), traj(2, "Bob", [Step("search", "s", "No results found for s")])]
    g = QuestionGroup("b1", "Who founded X?", ["Alice"], [traj(0, "Alice", [Step("search", "X", documents=[hit(1, "u")])]), *quiet])
    data = build_graph(g, HashEncoder(8))
    assert data["answer"].sample_id.tolist() == [0, 1, 2]
    assert data["answer"].vote[:, 1].tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert data["subquery"].orphan.tolist() == [False, True, True]  # one orphan per chain without a search
    assert data["subquery"].traj.tolist() == [0, 1, 2]
    assert edges(data, "subquery", "next", "subquery") == [[], []]


def test_document_identity_comes_from_the_returned_page():
    # harmony's open{"id": 0} means "link 0 of the page shown last": a different page per trajectory
    def opened(sample, header):
        text = (f"URL: {header}\n" if header else "") + "L0: some page text"
        return traj(sample, "Alice", [Step("search", "q", documents=[hit(1, "https://wiki.org/A")]),
                                      Step("open", "0", text)])
    g = QuestionGroup("b1", "Who founded X?", ["Alice"],
                      [opened(0, "https://wiki.org/P"), opened(1, "https://wiki.org/Q"), opened(2, None), opened(3, None)])
    data = build_graph(g, HashEncoder(8))
    assert data["evidence"].x.shape[0] == 4
    # P and Q are two documents; the two opens without a header have none (never one node "0")
    assert data["document"].x.shape[0] == 2
    assert edges(data, "evidence", "of", "document") == [[0, 1], [0, 1]]
    # the header outranks what the record says was asked for
    header_first = Step("open", "https://wiki.org/old", "URL: https://wiki.org/New\nL0: moved",
                        [page("https://wiki.org/old", "moved")])
    assert page_url(header_first, None) == "https://wiki.org/New"
    assert page_url(Step("open", "3", "L0: no header"), "https://wiki.org/x") is None
    assert page_url(Step("open", "", "L9: scrolled"), "https://wiki.org/x") == "https://wiki.org/x"


def test_no_cross_edges_copies_documents():
    data = build_graph(browsing_group(), HashEncoder(8), GraphOptions(cross_edges=False))
    assert data["document"].x.shape[0] == 3  # (T0, X), (T1, X), (T1, Z)
    assert data["document"].traj.tolist() == [0, 1, 1]
    assert edges(data, "evidence", "of", "document") == [[0, 1, 2, 3], [0, 0, 1, 2]]


def test_merge_evidence():
    data = build_graph(browsing_group(), HashEncoder(8), GraphOptions(merge_evidence=True))
    # T0's and T1's open of X read the same text: one node shared by both trajectories
    assert data["evidence"].x.shape[0] == 3
    assert data["evidence"].traj.tolist() == [-1, 0, 1]
    assert edges(data, "subquery", "opens", "evidence") == [[0, 1, 1], [0, 0, 2]]
    assert edges(data, "evidence", "of", "document") == [[0, 1, 2], [0, 0, 1]]


def test_merge_answers_keeps_distinct_answers():
    data = build_graph(browsing_group(), HashEncoder(8), GraphOptions(merge_answers=True))
    assert data["answer"].x.shape[0] == 2  # Alice and Bob differ
    assert data["evidence"].traj.tolist() == [0, 0, 1, 1]


def test_all_types_present_without_evidence():
    g = QuestionGroup("b", "q?", [], [Trajectory("b", "q?", 0, "yes", [Step("search", "s", documents=[hit(1, "u")])],
                                                  correct=True, style="browsing")])
    data = build_graph(g, HashEncoder(4))
    assert set(data.node_types) == set(BROWSING.node_types)
    assert set(data.edge_types) == set(BROWSING.edge_types) | {MENTIONS}  # + bookkeeping, graph/plan.py
    assert data["evidence"].x.shape == (0, 4) and data["document"].x.shape == (0, 4)
    assert data["evidence", "of", "document"].edge_index.shape == (2, 0)
    assert data["answer"].y.tolist() == [1.0]


def test_batching_keeps_all_types():
    from torch_geometric.loader import DataLoader

    g = QuestionGroup("b", "q?", [], [Trajectory("b", "q?", 0, "yes", [Step("search", "s", documents=[hit(1, "u")])],
                                                  style="browsing")])
    graphs, _ = build_graphs([g, browsing_group()], HashEncoder(4))
    batch = next(iter(DataLoader(graphs, batch_size=2)))
    assert set(batch.edge_types) == set(BROWSING.edge_types) | {MENTIONS}  # + bookkeeping, graph/plan.py
    assert batch["document"].x.shape == (2, 4)
    assert batch["evidence", "of", "document"].edge_index.tolist() == [[0, 1, 2, 3], [0, 0, 0, 1]]


def test_evidence_rules():
    assert not is_evidence(Step("open", "u", "Page not found: u"))
    assert not is_evidence(Step("find", "p", "No lines matching 'p' in u"))
    assert not is_evidence(Step("search", "q", "result"))
    assert is_evidence(Step("find", "p", FIND_X))
    assert is_search(Step("search", "q", "[1] a hit the reader could not split"))
    assert not is_search(Step("search", "q", "No results found for q"))
    assert not is_search(Step("search", "q", "  "))
    # a find without a recorded URL reads the current page
    assert page_url(Step("find", "p", "L3: some line"), "https://wiki.org/x") == "https://wiki.org/x"
    assert page_url(Step("open", "HTTP://A.org:80/b", "text"), None) == "http://a.org/b"


def test_kind_mismatch_names_the_selector_the_pool_needs():
    with pytest.raises(InputError, match=r"question 'b1': the pool is browsing-style but webqa graphs .*model.kind=browsing"):
        build_graphs([browsing_group()], HashEncoder(8), GraphOptions(kind="webqa"))
    graphs, _ = build_graphs([browsing_group()], HashEncoder(8), GraphOptions(kind="browsing"))
    assert len(graphs) == 1

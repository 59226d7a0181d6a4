"""WebQA graph builder: hand-counted nodes and edges of a 5-trajectory question (3 retained)."""

from __future__ import annotations

import math

import pytest
import torch

from trace_selector.errors import InputError
from trace_selector.graph import GraphOptions, build_graph, build_graphs, plan_graph
from trace_selector.graph.encoder import HashEncoder
from trace_selector.graph.plan import MENTIONS
from trace_selector.graph.schema import WEBQA
from trace_selector.records import Document, Pool, QuestionGroup, Step, Trajectory

A = ("Paris", "Paris is the capital of France.")
A2 = ("paris", "Paris  is the CAPITAL of France.")  # same content as A after normalisation
B = ("France", "France is a country in Europe.")
C = ("Seine", "The Seine flows through Paris.")
D = ("Louvre", "The Louvre is a museum.")
E = ("Lyon", "Lyon is a large French city.")


def docs(*items, ranks=None):
    ranks = ranks or range(1, len(items) + 1)
    return [Document(rank=r, title=t, text=x) for r, (t, x) in zip(ranks, items)]


def traj(sample, answer, steps, qid="q1"):
    return Trajectory(qid, "Which city is the capital of France?", sample, answer, steps, ["Paris"])


def group() -> QuestionGroup:
    trajs = [
        traj(0, "Paris", [
            Step("search", "capital of France", documents=docs(A, B)),
            Step("search", "Paris capital", documents=docs(A, C, D, ranks=[1, 2, 7])),
            Step("search", "nothing here", documents=[]),  # returned nothing: no subquery node
        ]),
        traj(1, "the Paris!", [Step("search", "France capital city", documents=docs(B, A2))]),
        traj(2, "Lyon", [Step("search", "largest French city", documents=docs(E))]),
        traj(3, "", [Step("search", "q", documents=docs(A))]),  # no answer
        traj(4, "Paris", [Step("invalid", "garbage")]),  # no search result
    ]
    return QuestionGroup("q1", trajs[0].question, ["Paris"], trajs)


def edges(data, rel):
    et = next(e for e in WEBQA.edge_types if e[1] == rel)
    return data[et].edge_index.tolist()


def sizes(data):
    return {t: data[t].x.shape[0] for t in WEBQA.node_types}


def test_counts_by_hand():
    data = build_graph(group(), HashEncoder(8))
    assert sizes(data) == {"query": 1, "subquery": 4, "chunk": 8, "answer": 3}
    # chunks: T0 s0 -> c0=A c1=B; T0 s1 -> c2=A c3=C c4=D (rank 7 -> rank_5); T1 s2 -> c5=B c6=A2; T2 s3 -> c7=E
    assert edges(data, "starts") == [[0, 0, 0], [0, 2, 3]]
    assert edges(data, "next") == [[0], [1]]
    assert edges(data, "rank_1") == [[0, 1, 2, 3], [0, 2, 5, 7]]
    assert edges(data, "rank_2") == [[0, 1, 2], [1, 3, 6]]
    assert edges(data, "rank_3") == edges(data, "rank_4") == [[], []]
    assert edges(data, "rank_5") == [[1], [4]]
    assert edges(data, "rev_rank_2") == [[1, 3, 6], [0, 1, 2]]
    assert sorted(zip(*edges(data, "same_within"))) == [(0, 2), (2, 0)]
    assert sorted(zip(*edges(data, "same_across"))) == [(0, 6), (1, 5), (2, 6), (5, 1), (6, 0), (6, 2)]
    assert data["query"].traj.tolist() == [-1]
    assert data["subquery"].traj.tolist() == [0, 0, 1, 2]
    assert data["chunk"].traj.tolist() == [0, 0, 0, 0, 0, 1, 1, 2]
    assert data["answer"].traj.tolist() == [0, 1, 2]
    assert data["answer"].sample_id.tolist() == [0, 1, 2]
    assert data["answer"].y.tolist() == [1.0, 1.0, 0.0]
    assert data.question_id == "q1" and data.answers == ["Paris", "the Paris!", "Lyon"]


def test_vote_features_count_retained_only():
    data = build_graph(group(), HashEncoder(8))
    # "Paris" and "the Paris!" agree; the dropped trajectory 4 also says Paris but does not count.
    # Each answer also occurs in its own trajectory's passages: Paris in T0's and T1's, Lyon in T2's.
    expected = [[math.log1p(2), 2 / 3, 1, 2 / 3, 0, 1], [math.log1p(2), 2 / 3, 1, 2 / 3, 0, 1], [math.log1p(1), 1 / 3, 1, 1 / 3, 0, 1]]
    assert torch.allclose(data["answer"].vote, torch.tensor(expected))


def test_embeddings_are_node_texts():
    enc = HashEncoder(8)
    data = build_graph(group(), enc)
    ref = enc.encode(["Which city is the capital of France?", "Paris capital", f"{C[0]}\n{C[1]}", "paris", "lyon"])
    assert torch.equal(data["query"].x[0], ref[0])
    assert torch.equal(data["subquery"].x[1], ref[1])
    assert torch.equal(data["chunk"].x[3], ref[2])
    assert torch.equal(data["answer"].x[1], ref[3])  # normalised answer text
    assert torch.equal(data["answer"].x[2], ref[4])


def test_occurrences_are_not_merged():
    data = build_graph(group(), HashEncoder(8))
    # A appears three times (twice in T0, once as A2 in T1): three nodes, equal x for the two identical texts.
    assert torch.equal(data["chunk"].x[0], data["chunk"].x[2])
    assert data["chunk"].x.shape[0] == 8


def test_doc_id_links_different_texts():
    g = QuestionGroup("q", "q?", ["x"], [
        Trajectory("q", "q?", 0, "x", [Step("search", "a", documents=[Document(1, "T", "old text", doc_id="d7")])]),
        Trajectory("q", "q?", 1, "y", [Step("search", "b", documents=[Document(1, "T", "new text", doc_id="d7")])]),
    ])
    data = build_graph(g, HashEncoder(4))
    assert sorted(zip(*edges(data, "same_across"))) == [(0, 1), (1, 0)]


def test_no_cross_edges():
    data = build_graph(group(), HashEncoder(8), GraphOptions(cross_edges=False))
    assert edges(data, "same_across") == [[], []]
    assert sorted(zip(*edges(data, "same_within"))) == [(0, 2), (2, 0)]
    assert sizes(data) == {"query": 1, "subquery": 4, "chunk": 8, "answer": 3}


def test_merge_evidence():
    data = build_graph(group(), HashEncoder(8), GraphOptions(merge_evidence=True))
    # distinct contents A, B, C, D, E; A and B are read by T0 and T1 -> traj -1
    assert data["chunk"].x.shape[0] == 5
    assert data["chunk"].traj.tolist() == [-1, -1, 0, 0, 2]
    assert sum(len(edges(data, f"rank_{r}")[0]) for r in range(1, 6)) == 8  # every retrieval kept as an edge
    assert edges(data, "same_within") == edges(data, "same_across") == [[], []]
    local = build_graph(group(), HashEncoder(8), GraphOptions(merge_evidence=True, cross_edges=False))
    assert local["chunk"].traj.tolist() == [0, 0, 0, 0, 1, 1, 2]  # T0: A B C D; T1: B A; T2: E


def test_merge_answers():
    data = build_graph(group(), HashEncoder(8), GraphOptions(merge_answers=True))
    assert data["answer"].x.shape[0] == 2
    assert data["answer"].traj.tolist() == [0, 1]
    assert data["answer"].sample_id.tolist() == [0, 2]
    assert data.answers == ["Paris", "Lyon"]
    assert torch.allclose(data["answer"].vote, torch.tensor([[math.log1p(2), 2 / 3, 1, 2 / 3, 0, 1], [math.log1p(1), 1 / 3, 1, 1 / 3, 0, 1]]))
    # nodes carry their candidate index: T1's nodes now read out into candidate 0
    assert data["subquery"].traj.tolist() == [0, 0, 0, 1]
    assert data["chunk"].traj.tolist() == [0, 0, 0, 0, 0, 0, 0, 1]
    # same_within / same_across still follow the real trajectories
    assert len(edges(data, "same_across")[0]) == 6


def test_labels_from_correct_without_gold():
    trajs = [
        Trajectory("q", "q?", 0, "x", [Step("search", "s", documents=docs(A))], correct=True),
        Trajectory("q", "q?", 1, "y", [Step("search", "s", documents=docs(B))], correct=False),
        Trajectory("q", "q?", 2, "z", [Step("search", "s", documents=docs(C))]),
    ]
    data = build_graph(QuestionGroup("q", "q?", [], trajs), HashEncoder(4))
    y = data["answer"].y
    assert y[:2].tolist() == [1.0, 0.0] and math.isnan(y[2].item())


def test_all_types_present_in_tiny_graph():
    g = QuestionGroup("q", "q?", ["yes"], [Trajectory("q", "q?", 0, "yes", [Step("search", "s", documents=docs(A))])])
    data = build_graph(g, HashEncoder(4))
    assert set(data.node_types) == set(WEBQA.node_types)
    assert set(data.edge_types) == set(WEBQA.edge_types) | {MENTIONS}  # + bookkeeping, graph/plan.py
    for et in WEBQA.edge_types:
        ei = data[et].edge_index
        assert ei.dtype == torch.long and ei.shape[0] == 2
    assert data["chunk", "same_across", "chunk"].edge_index.shape == (2, 0)
    assert data["subquery", "next", "subquery"].edge_index.shape == (2, 0)


def test_build_graphs_report_and_single_encode_call():
    empty = QuestionGroup("q2", "other?", ["x"], [traj(0, "", [], qid="q2"), traj(1, "x", [], qid="q2")])
    pool = Pool([group(), empty, group()])
    enc = HashEncoder(4)
    graphs, report = build_graphs(pool, enc)
    assert len(graphs) == 2 and [g.question_id for g in graphs] == ["q1", "q1"]
    assert (report.questions, report.graphs, report.trajectories, report.retained) == (3, 2, 12, 6)
    assert report.dropped == {"no_answer": 3, "no_search": 3}
    assert report.empty_questions == ["q2"]
    assert "2/3 questions" in report.to_text()
    assert enc.total.texts == enc.total.unique  # one call with distinct texts only
    assert torch.equal(graphs[0]["chunk"].x, graphs[1]["chunk"].x)
    with pytest.raises(InputError, match="q2"):
        build_graph(empty, enc)


def test_batching_keeps_all_types():
    from torch_geometric.loader import DataLoader

    tiny = QuestionGroup("t", "t?", ["yes"], [Trajectory("t", "t?", 0, "yes", [Step("search", "s", documents=docs(A))])])
    graphs, _ = build_graphs([tiny, group()], HashEncoder(4))
    batch = next(iter(DataLoader(graphs, batch_size=2)))
    assert set(batch.edge_types) == set(WEBQA.edge_types) | {MENTIONS}  # + bookkeeping, graph/plan.py
    assert batch["chunk"].x.shape == (9, 4)
    assert batch["chunk", "same_across", "chunk"].edge_index.shape == (2, 6)
    # edge indices of the second graph are offset by the first graph's node counts
    assert batch["chunk", "same_within", "chunk"].edge_index.min().item() == 1
    assert batch["answer"].batch.tolist() == [0, 1, 1, 1]
    assert batch.question_id == ["t", "q1"]


def test_kind_auto_and_options_validation():
    assert plan_graph(group(), GraphOptions()).schema.kind == "webqa"
    with pytest.raises(ValueError):
        GraphOptions(kind="tree")
    with pytest.raises(ValueError):
        GraphOptions(max_text_chars=0)


def test_max_text_chars_cuts_texts():
    plan = plan_graph(group(), GraphOptions(max_text_chars=5))
    assert all(len(t) <= 5 for t in plan.all_texts())


def test_pool_without_graphs_never_encodes():
    class Refuse:
        dim, identity = 4, "refuse"

        def encode(self, texts):
            raise AssertionError("encoder called")

    empty = QuestionGroup("q2", "other?", ["x"], [traj(0, "", [], qid="q2")])
    graphs, report = build_graphs([empty], Refuse())
    assert graphs == [] and report.empty_questions == ["q2"] and report.dropped["no_answer"] == 1


def test_grounding_features_whole_words_own_and_shared():
    trajs = [
        traj(0, "Seine", [Step("search", "river", documents=docs(C))]),          # read by itself
        traj(1, "Seine", [Step("search", "museum", documents=docs(D))]),         # read only by T0
        traj(2, "Pari", [Step("search", "capital", documents=docs(A))]),         # "Pari" is no word of "Paris"
        traj(3, "Europe.", [Step("search", "country", documents=docs(B))]),      # punctuation normalised away
    ]
    data = build_graph(QuestionGroup("q1", trajs[0].question, ["Paris"], trajs), HashEncoder(8))
    own_and_share = data["answer"].vote[:, 2:4].tolist()
    assert own_and_share == [[1.0, 0.25], [0.0, 0.25], [0.0, 0.0], [1.0, 0.25]]


def test_echo_marks_answers_that_only_repeat_the_question():
    trajs = [traj(0, "Paris", [Step("search", "capital", documents=docs(A))]),
             traj(1, "the Capital of France!", [Step("search", "capital", documents=docs(A))]),  # words of the question
             traj(2, "French capital", [Step("search", "capital", documents=docs(A))])]         # "french" is not
    data = build_graph(QuestionGroup("q1", trajs[0].question, ["Paris"], trajs), HashEncoder(8))
    assert data["answer"].vote[:, 4].tolist() == [0.0, 1.0, 0.0]


def test_last_hop_feature_reads_only_the_last_retrieval():
    trajs = [
        traj(0, "Seine", [Step("search", "river", documents=docs(C)), Step("search", "museum", documents=docs(D))]),
        traj(1, "Seine", [Step("search", "museum", documents=docs(D)), Step("search", "river", documents=docs(C))]),
        traj(2, "Louvre", [Step("search", "museum", documents=docs(D)), Step("search", "nothing", documents=[])]),
    ]
    data = build_graph(QuestionGroup("q1", trajs[0].question, ["Paris"], trajs), HashEncoder(8))
    vote = data["answer"].vote
    assert vote.shape[1] == 6
    assert vote[:, 2].tolist() == [1.0, 1.0, 1.0]  # every answer was read somewhere
    # T0 read it only in its first hop; T2's last search returned nothing, so its last hop is the one before
    assert vote[:, 5].tolist() == [0.0, 1.0, 1.0]

"""Synthetic pool family: determinism, the designed evidence-sharing property, and the encoder."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from trace_selector.graph.encoder import BagOfWordsEncoder
from trace_selector.records import trajectory_from_dict, trajectory_to_dict
from trace_selector.records.synthetic import SyntheticConfig, make_pool, make_question


def test_deterministic_by_seed_and_index():
    a, b = make_question(SyntheticConfig(seed=3), 7), make_question(SyntheticConfig(seed=3), 7)
    assert [t.answer for t in a.trajectories] == [t.answer for t in b.trajectories]
    assert a.trajectories[0].steps[0].search_result == b.trajectories[0].steps[0].search_result
    c = make_question(SyntheticConfig(seed=4), 7)
    assert c.question != a.question
    pool = make_pool(SyntheticConfig(questions=3, offset=5, seed=3))
    assert [g.question_id for g in pool.groups] == ["5", "6", "7"]
    assert pool.groups[2].question == a.question


def test_k_varies_within_bounds_and_sample_ids_unique():
    pool = make_pool(SyntheticConfig(questions=40, k=8, k_min=6))
    sizes = {len(g.trajectories) for g in pool.groups}
    assert sizes <= {6, 7, 8} and len(sizes) > 1
    for g in pool.groups:
        assert len({t.sample_id for t in g.trajectories}) == len(g.trajectories)


def test_gold_is_backed_by_shared_evidence_and_majority_usually_wrong():
    pool = make_pool(SyntheticConfig(questions=200, noise=0.0, no_correct=0.0))
    majority_right = 0
    for g in pool.groups:
        gold = g.golden_answers[0]
        votes = Counter(t.answer for t in g.trajectories)
        majority_right += votes.most_common(1)[0][0] == gold
        # Chunks stating an answer: the gold one is retrieved by >= 2 trajectories, every
        # distractor statement by exactly one (noise off).
        seen: dict[str, set[int]] = {}
        for t in g.trajectories:
            for s in t.steps:
                for d in s.documents:
                    seen.setdefault(d.text, set()).add(t.sample_id)
        gold_chunks = [txt for txt in seen if gold in txt]
        assert len(gold_chunks) == 1 and len(seen[gold_chunks[0]]) >= 2
        for t in g.trajectories:
            if t.answer != gold:
                own = [txt for txt in seen if t.answer in txt]
                assert own and all(len(seen[x]) == 1 for x in own)
    assert 0.15 < majority_right / 200 < 0.4


def test_records_round_trip():
    t = make_question(SyntheticConfig(), 0).trajectories[0]
    back = trajectory_from_dict(trajectory_to_dict(t))
    assert back.answer == t.answer and back.steps[0].documents[0].text == t.steps[0].documents[0].text


def test_bag_of_words_encoder_shares_words():
    enc = BagOfWordsEncoder(64)
    x = enc.encode(["Zorvath", "records state that Zorvath was the founder", "records state that Mellor was the founder", ""])
    assert x.shape == (4, 64) and enc.dim == 64
    assert torch.allclose(x[:3].norm(dim=1), torch.ones(3)) and float(x[3].abs().sum()) == 0.0
    assert float(x[0] @ x[1]) > abs(float(x[0] @ x[2])) + 0.1


@pytest.mark.parametrize("bad", [{"k": 3, "k_min": 3}, {"k_min": 9, "k": 8}, {"noise": 1.5}, {"questions": -1}])
def test_config_validation(bad):
    with pytest.raises(ValueError):
        SyntheticConfig(**bad)

"""Pool summaries: known figures on hand-built pools (vote ties, unscorable questions, stored correctness)."""

from __future__ import annotations

import json

import pytest

from trace_selector.records import Pool, PoolMeta, QuestionGroup, Step, Trajectory
from trace_selector.records.answers import vote
from trace_selector.records.summary import summarize


def _group(qid: str, answers: list[str], gold: list[str], correct: list[bool | None] | None = None) -> QuestionGroup:
    marks = correct or [None] * len(answers)
    ts = [Trajectory(qid, f"question {qid}", i, a, [Step("search", "q")] * (i + 1), list(gold), correct=c, style="browsing")
          for i, (a, c) in enumerate(zip(answers, marks))]
    return QuestionGroup(qid, f"question {qid}", list(gold), ts)


def test_majority_ties_go_to_first_seen_and_empty_answers_do_not_vote():
    g = _group("a", ["", "Kyiv", "bucharest", "Bucharest.", "kyiv", ""], ["Bucharest"])
    assert vote(g.trajectories)[0].sample_id == 1  # kyiv 2, bucharest 2: kyiv seen first
    assert vote(_group("b", ["", " "], []).trajectories)[0] is None


def test_summary_figures():
    pool = Pool(
        [
            _group("a", ["Paris", "paris", "Lyon"], ["Paris"]),  # single 2/3, vote right, mixed
            _group("b", ["Rome", "Milan", "Milan"], ["Rome"]),  # single 1/3, vote wrong, mixed
            _group("c", ["x", ""], [], correct=[False, False]),  # no gold: stored correctness, all wrong
            _group("d", ["y"], []),  # neither gold nor correctness: not scored
        ],
        PoolMeta(setting="wikileads", seed=3),
        path="pool.jsonl",
    )
    s = summarize(pool)
    assert (s.questions, s.trajectories, s.per_question) == (4, 9, (1, 2.25, 3))
    assert s.answer_coverage == pytest.approx(8 / 9) and s.questions_with_gold == 2
    assert s.steps == (1, pytest.approx(16 / 9), 3) and s.actions["search"] == 16
    assert s.scored_questions == 3
    assert s.single == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert s.majority == pytest.approx(1 / 3) and s.oracle == pytest.approx(2 / 3) and s.mixed == pytest.approx(2 / 3)
    assert s.meta == {"setting": "wikileads", "seed": 3} and s.format == "jsonl"
    assert json.loads(s.to_json())["per_question"] == [1, 2.25, 3]
    text = s.to_text()
    assert "single rollout 0.333, majority 0.333, oracle 0.667 over 3 questions" in text
    assert "metadata         setting=wikileads, seed=3" in text
    # no wall time recorded: no throughput line, and the accuracy line is not contradicted
    assert "n/a" not in text and "throughput" not in text and "snapshot" not in text


def test_summary_without_any_scorable_question():
    s = summarize(Pool([_group("d", ["y", "z"], [])], path="p.parquet"))
    assert s.scored_questions == 0 and s.single is None and s.mixed is None
    assert "accuracy (EM)    n/a" in s.to_text()


def test_summary_says_when_the_pool_is_a_rollout_snapshot():
    meta = PoolMeta(setting="wikileads", accounting={"wall_seconds": 36.0}, extra={"snapshot": True})
    text = summarize(Pool([_group("a", ["Paris", "Lyon"], ["Paris"])], meta, path="p.jsonl")).to_text()
    assert text.splitlines()[1].startswith("status           snapshot of a rollout in progress")
    assert "throughput       18.00 s per trajectory, 100 mixed questions per hour" in text


def test_summary_counts_each_family_of_a_bundled_setting():
    groups = [_group("wikihops-bridge-00001", ["Oslo", "Bergen"], ["Oslo"]),  # majority right, mixed
              _group("wikihops-comparison-00007", ["no", "no"], ["yes"]),  # all wrong
              _group("wikihops-bridge-00002", ["Turku", "Turku"], ["Turku"])]  # all right
    s = summarize(Pool(groups, PoolMeta(setting="wikihops"), path="p.jsonl"))
    assert list(s.families) == ["bridge", "comparison"]
    assert s.families["bridge"] == {"questions": 2, "majority": 1.0, "oracle": 1.0, "mixed": 0.5}
    assert s.families["comparison"] == {"questions": 1, "majority": 0.0, "oracle": 0.0, "mixed": 0.0}
    assert ("families         bridge 2 (majority 1.000, oracle 1.000, mixed 50.0%); "
            "comparison 1 (majority 0.000, oracle 0.000, mixed 0.0%)") in s.to_text()
    # ids of another setting, or one id outside the pattern, name no family: no per-family figures
    assert summarize(Pool(groups, PoolMeta(setting="wikileads"), path="p.jsonl")).families == {}
    odd = groups + [_group("q17", ["x"], ["x"])]
    assert summarize(Pool(odd, PoolMeta(setting="wikihops"), path="p.jsonl")).families == {}
    assert "families" not in summarize(Pool(odd, PoolMeta(setting="wikihops"), path="p.jsonl")).to_text()

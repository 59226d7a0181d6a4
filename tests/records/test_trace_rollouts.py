"""TRACE's browser rollouts: traj_idx, a plain final answer, candidate_answer, typed tool_events and a
separate labels file, read from one hand-written fixture per variant (tests/data/trace_browser/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_selector.errors import FormatError
from trace_selector.records import Document, read_pool, trajectory_from_dict, write_pool
from trace_selector.records.answers import is_correct
from trace_selector.records.files import read_labels

DATA = Path(__file__).resolve().parents[1] / "data" / "trace_browser"
ALMANAC = "https://wiki.example/Orvanne_almanac"


def test_plain_final_message_is_the_answer_and_traj_idx_the_sample():
    pool = read_pool(DATA / "plain_answer.jsonl")
    [group] = pool.groups
    assert [t.sample_id for t in group.trajectories] == [0, 1]
    assert [t.answer for t in group.trajectories] == ["Mireille Sauvat", "Orvanne lighthouse"]  # bold stripped
    assert [t.correct for t in group.trajectories] == [True, False]
    first = group.trajectories[0]
    assert [(s.action, s.content) for s in first.steps] == [("search", "Orvanne almanac 1911"), ("open", ALMANAC)]
    assert first.steps[0].documents[1] == Document(2, "Orvanne almanac", "An almanac of tides and weather printed in 1911.",
                                                   doc_id="102", url=ALMANAC)
    assert first.final_text == "Mireille Sauvat" and "traj_idx" not in first.extra


def test_plain_message_is_an_answer_only_in_the_trace_shape():
    # Elsewhere a final message without a marker is a hedge, not an answer (tests/data/browsing_pool.jsonl).
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "I am not sure."}]
    assert trajectory_from_dict({"qid": "q", "question": "q", "sample_id": 0, "messages": messages}).answer == ""
    assert trajectory_from_dict({"qid": "q", "question": "q", "traj_idx": 0, "messages": messages}).answer == "I am not sure."
    marked = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Reasoning.\nExact Answer: Paris"}]
    assert trajectory_from_dict({"qid": "q", "question": "q", "traj_idx": 0, "messages": marked}).answer == "Paris"


def test_candidate_answer_wins_over_the_final_message():
    pool = read_pool(DATA / "candidate_answer.jsonl")
    first, second = pool.groups[0].trajectories
    assert (first.answer, second.answer) == ("Mireille Sauvat", "Jules Sauvat")
    assert first.final_text.startswith("The almanac page names its author")
    # harmony's {"id": 1} is a link index: no document is recorded for it
    assert [(s.action, s.content, s.documents) for s in first.steps[1:]] == [("open", "1", [])]
    assert first.steps[1].search_result.startswith(f"URL: {ALMANAC}")


def test_typed_tool_events_become_steps():
    pool = read_pool(DATA / "tool_events.jsonl")
    first, second = pool.groups[0].trajectories
    assert [(s.action, s.content) for s in first.steps] == [
        ("search", "Orvanne almanac 1911"), ("open", ALMANAC), ("find", "written by")]
    assert [d.doc_id for d in first.steps[0].documents] == ["101", "102"]  # from the `results` list
    assert first.steps[2].documents == [Document(1, "", "", url=ALMANAC)]
    assert first.steps[1].search_result.startswith(f"URL: {ALMANAC}")
    assert first.answer == "Mireille Sauvat"
    assert [(s.action, s.content) for s in second.steps] == [("search", "Orvanne keeper"), ("open", "102"), ("open", "0")]
    assert second.steps[1].documents == [Document(1, "", "", doc_id="102")]  # a corpus id names a page
    assert second.steps[2].documents == []  # a link index does not
    assert second.answer == "Orvanne"


def test_tool_events_round_trip(tmp_path):
    pool = read_pool(DATA / "tool_events.jsonl")
    write_pool(pool, tmp_path / "copy.jsonl")
    record = json.loads((tmp_path / "copy.jsonl").read_text().splitlines()[0])
    assert "tool_events" not in record and record["sample_id"] == 0 and record["answer"] == "Mireille Sauvat"
    assert read_pool(tmp_path / "copy.jsonl") == pool


def test_malformed_tool_event_names_the_field():
    record = {"qid": "q", "question": "q", "traj_idx": 0, "tool_events": [{"query": "no type"}]}
    with pytest.raises(FormatError, match=r"field 'tool_events\[0\]\.type'"):
        trajectory_from_dict(record, "p.jsonl", 3)
    with pytest.raises(FormatError, match=r"field 'traj_idx'"):
        trajectory_from_dict({"qid": "q", "question": "q", "traj_idx": "zero", "messages": []}, "p.jsonl", 3)


def test_labels_sidecar_fills_correctness_and_gold():
    pool = read_pool(DATA / "labelled.jsonl")  # picks up labelled.jsonl.labels.jsonl
    q1, q2 = pool.groups
    assert q1.golden_answers == ["Mireille Sauvat", "M. Sauvat"] and q2.golden_answers == ["1911"]
    assert [t.correct for t in q1.trajectories] == [True, False] and q2.trajectories[0].correct is True
    assert [is_correct(t, q1.golden_answers) for t in q1.trajectories] == [True, False]
    assert [t.answer for t in q1.trajectories] == ["Mireille Sauvat", "The Orvanne lighthouse"]


def test_labels_file_given_explicitly_and_contradictions(tmp_path):
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text((DATA / "plain_answer.jsonl").read_text())
    labels = tmp_path / "judged.jsonl"
    labels.write_text(json.dumps({"qid": "tb-1", "gold": ["Mireille Sauvat"]}) + "\n")
    assert read_pool(rollouts, labels=labels).groups[0].golden_answers == ["Mireille Sauvat"]
    assert read_pool(rollouts).groups[0].golden_answers == []  # no sidecar, no labels
    labels.write_text(json.dumps({"qid": "tb-1", "traj_idx": 1, "correct": True}) + "\n")
    with pytest.raises(FormatError, match=r"judged\.jsonl:1: field 'correct'.*the pool says False"):
        read_pool(rollouts, labels=labels)


@pytest.mark.parametrize(
    "lines, field",
    [
        ([{"traj_idx": 0, "correct": True}], "qid"),
        ([{"qid": "a", "correct": True}], "traj_idx"),
        ([{"qid": "a", "traj_idx": 0, "label": 2}], "label"),
        ([{"qid": "a", "traj_idx": 0, "correct": True}, {"qid": "a", "traj_idx": 0, "correct": False}], "traj_idx"),
        ([{"qid": "a", "gold": "x"}, {"qid": "a", "gold": "y"}], "golden_answers"),
    ],
)
def test_bad_labels_name_line_and_field(tmp_path, lines, field):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(FormatError, match=rf":{len(lines)}: field '{field}'"):
        read_labels(path)


def test_labels_flag_of_validate_evaluate_and_select(tmp_path, capsys):
    """A labels file kept elsewhere (not the pool's sidecar) reaches every command that reads a pool."""
    from trace_selector.cli import main

    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text((DATA / "labelled.jsonl").read_text())
    graded = tmp_path / "graded.jsonl"
    graded.write_text((DATA / "labelled.jsonl.labels.jsonl").read_text())
    assert main(["validate", str(rollouts), "--json"]) == 0
    unlabelled = json.loads(capsys.readouterr().out)
    assert main(["validate", str(rollouts), "--json", "--labels", str(graded)]) == 0
    labelled = json.loads(capsys.readouterr().out)
    assert (unlabelled["questions_with_gold"], unlabelled["scored_questions"]) == (0, 0)
    assert (labelled["questions_with_gold"], labelled["oracle"], labelled["mixed"]) == (2, 1.0, 0.5)
    out = tmp_path / "r.json"
    assert main(["evaluate", "--pool", str(rollouts), "--labels", str(graded), "--methods", "majority,oracle",
                 "--no-budget", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["oracle_pass_at_k"] == 100.0 and res["settings"]["labels"] == str(graded)  # q1: one of two right
    checkpoint = Path(__file__).resolve().parents[2] / "checkpoints" / "wikileads-browsing"
    picks = tmp_path / "picks.jsonl"
    for extra, known in (([], 0), (["--labels", str(graded)], 2)):
        assert main(["select", "--checkpoint", str(checkpoint), "--pool", str(rollouts), "--out", str(picks), *extra]) == 0
        rows = [json.loads(line) for line in picks.read_text().splitlines()]
        assert len(rows) == 2 and sum(r["correct"] is not None for r in rows) == known
    missing = tmp_path / "missing.jsonl"
    assert main(["validate", str(rollouts), "--labels", str(missing)]) == 1
    assert "missing.jsonl" in capsys.readouterr().err

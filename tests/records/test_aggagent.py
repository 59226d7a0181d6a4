"""AggAgent's published rollout Parquet (one row per rollout, JSON-string columns, correctness from
auto_judge) read as browsing records, through `read_pool`, `validate` and `evaluate`."""

from __future__ import annotations

import hashlib
import json

import pytest

from trace_selector.cli import main
from trace_selector.errors import FormatError
from trace_selector.records import read_pool
from trace_selector.records.aggagent import question_id

Q1 = "Which city is the capital of France?"
Q2 = "Which river flows through Berlin?"


def call(i, name, args):
    return {"role": "assistant", "content": "", "reasoning": f"thinking {i}",
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def reply(i, name, result):
    return {"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": json.dumps(result)}


def rollout(question, answer, judged, instance, extracted=None, web=True):
    """One row as the reference writes it (rollout/react_agent.py + scripts/hf_to_rollout.py)."""
    final = f"Explanation: found it.\nExact Answer: {answer}\nConfidence: 80%"
    if web:  # BrowseComp tools: search with a list of queries, visit with urls
        msgs = [call(1, "search", {"query": [question, "capital"]}),
                reply(1, "search", f"A search for '{question}' found 1 result: [Paris](https://en.wikipedia.org/wiki/Paris)"),
                call(2, "visit", {"url": ["https://en.wikipedia.org/wiki/Paris"], "goal": "check"}),
                reply(2, "visit", "Paris is the capital of France.")]
    else:  # BrowseComp-Plus tools: search returns a hit list, get_document a docid
        msgs = [call(1, "search", {"query": question}),
                reply(1, "search", [{"docid": "d7", "score": 3.5, "snippet": "The Spree flows through Berlin."}]),
                call(2, "get_document", {"docid": "d7"}), reply(2, "get_document", "Spree ... Berlin")]
    messages = [{"role": "system", "content": "You are a search agent."}, {"role": "user", "content": question}, *msgs,
                {"role": "assistant", "content": final}]
    judge = {"correctness": judged, "confidence": 80, "extracted_final_answer": extracted or answer}
    return {
        "question": question, "prediction": final, "termination": "answer", "time": 12.5,
        "instance": json.dumps(instance), "messages": json.dumps(messages), "auto_judge": json.dumps(judge),
        "cost": json.dumps({"rollout": 0.001, "tool": 0.002}), "metadata": json.dumps({"model": "m"}),
        "debug_data": json.dumps({"tool_usage": {"search": 1, "visit": 1}, "full_messages": messages}),
    }


def write_rows(path, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture
def fixture_file(tmp_path):
    rows = [
        rollout(Q1, "Paris", "correct", {"id": "bc-1", "question": Q1, "answer": "Paris"}),
        rollout(Q2, "Spree", "correct", {"question": Q2, "answer": "Spree"}, web=False),
        rollout(Q1, "Lyon", "incorrect", {"id": "bc-1", "question": Q1, "answer": "Paris"}),
        rollout(Q1, "Lyon", "incorrect", {"id": "bc-1", "question": Q1, "answer": "Paris"}, extracted="None"),
        rollout(Q2, "Havel", "incorrect", {"question": Q2, "answer": "Spree"}, web=False),
    ]
    return write_rows(tmp_path / "aggagent.parquet", rows)


def test_rows_map_to_browsing_records(fixture_file):
    pool = read_pool(fixture_file)
    g1, g2 = pool.groups
    assert g1.question_id == "bc-1" and g2.question_id == "q_" + hashlib.sha1(Q2.encode()).hexdigest()[:12]
    assert [t.sample_id for t in g1.trajectories] == [0, 1, 2] and [t.sample_id for t in g2.trajectories] == [0, 1]
    assert [t.correct for t in g1.trajectories] == [True, False, False] and g1.golden_answers == []
    t = g1.trajectories[0]
    assert (t.style, t.answer, t.confidence, t.finish_reason) == ("browsing", "Paris", 0.8, "answer")
    # search with a list of queries -> one search step; visit -> open with the url as a document
    assert [(s.action, s.content) for s in t.steps] == [("search", f"{Q1}; capital"), ("open", "https://en.wikipedia.org/wiki/Paris")]
    assert t.steps[1].documents[0].url == "https://en.wikipedia.org/wiki/Paris"
    assert t.steps[1].search_result == "Paris is the capital of France."  # JSON string decoded
    assert t.extra["aggagent"]["reference_answer"] == "Paris" and t.extra["aggagent"]["tool_usage"] == {"search": 1, "visit": 1}
    # the judge extracted "None": the prediction's "Exact Answer" line is read instead
    assert g1.trajectories[2].answer == "Lyon"
    # BrowseComp-Plus: the hit list parses into documents with the docid; get_document opens the docid
    s1, s2 = g2.trajectories[0].steps
    assert (s1.documents[0].doc_id, s1.documents[0].text, s1.documents[0].score) == ("d7", "The Spree flows through Berlin.", 3.5)
    assert (s2.action, s2.documents[0].doc_id) == ("open", "d7")
    assert question_id("x", {"prompt_id": "p9"}) == "p9"


def test_validate_and_evaluate_accept_the_file(fixture_file, tmp_path, capsys):
    assert main(["validate", str(fixture_file)]) == 0
    out = capsys.readouterr().out
    assert "2" in out and "5" in out  # questions and trajectories appear in the summary
    res_path = tmp_path / "results.json"
    rc = main(["evaluate", "--pool", str(fixture_file), "--methods", "majority,oracle,fewest_tools",
               "--out", str(res_path), "budget=false"])
    assert rc == 0
    res = json.loads(res_path.read_text())
    # judged correctness: q1 majority = Lyon (2 of 3) wrong, q2 tie Spree/Havel -> earliest (Spree) right
    assert res["methods"]["majority"]["em"] == pytest.approx(50.0)
    assert res["methods"]["oracle"]["em"] == pytest.approx(100.0) and res["oracle_pass_at_k"] == pytest.approx(100.0)


def test_bad_rows_name_file_row_and_field(tmp_path):
    row = rollout(Q1, "Paris", "correct", {"id": "bc-1"})
    row["auto_judge"] = json.dumps({"confidence": 50})
    with pytest.raises(FormatError, match=r"bad\.parquet:1: field 'auto_judge\.correctness'"):
        read_pool(write_rows(tmp_path / "bad.parquet", [row]))
    row = rollout(Q1, "Paris", "correct", {"id": "bc-1"})
    row["messages"] = "[{not json"
    with pytest.raises(FormatError, match=r"bad2\.parquet:1: field 'messages': not valid JSON"):
        read_pool(write_rows(tmp_path / "bad2.parquet", [row]))


def test_train_and_select_accept_the_file(tmp_path, capsys):
    # 8 questions x 4 rollouts, each question mixed (2 right, 2 wrong), so every question trains.
    rows = []
    for q in range(8):
        question = f"Which city is capital number {q}?"
        for i, (answer, judged) in enumerate([("Paris", "correct"), ("Lyon", "incorrect"),
                                               ("Paris", "correct"), ("Nice", "incorrect")]):
            rows.append(rollout(question, answer, judged, {"id": f"q{q}", "question": question, "answer": "Paris"}, web=i % 2 == 0))
    pool = write_rows(tmp_path / "agg.parquet", rows)
    args = ["setting=toy", "name=agg", "data.source=pool", f"data.train_pool={pool}", "data.val_fraction=0.25",
            "data.batch_size=4", "model.kind=browsing", "model.encoder=hash", "model.embed_dim=16", "model.hidden=16",
            "model.layers=1", "optim.max_steps=2", "trainer.accelerator=cpu", "trainer.progress_bar=false",
            "trainer.threads=1", f"out_dir={tmp_path}", f"data.graph_cache={tmp_path / 'cache'}"]
    assert main(["train", *args]) == 0
    out = tmp_path / "sel.jsonl"
    assert main(["select", "--checkpoint", str(tmp_path / "agg" / "selector"), "--pool", str(pool), "--out", str(out)]) == 0
    picks = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(picks) == 8 and {p["question_id"] for p in picks} == {f"q{q}" for q in range(8)}

"""Pool records: observation parsing, both raw styles, superset round trips, CLI errors, atomic writes."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from trace_selector.cli import main
from trace_selector.errors import FormatError
from trace_selector.records import (
    Document,
    Pool,
    PoolMeta,
    QuestionGroup,
    SearchResultError,
    Step,
    Trajectory,
    format_search_result,
    iter_trajectories,
    meta_path,
    parse_search_result,
    read_meta,
    read_pool,
    trajectory_from_dict,
    trajectory_to_dict,
    write_meta,
    write_pool,
)
from trace_selector.records.summary import summarize_pool

from tests.conftest import DATA


# ---------------------------------------------------------------------------------------------------
# "Doc i (Title: T) text" observations


def test_parse_search_result_known_documents():
    text = 'Doc 1 (Title: Mercury (planet)) Mercury is the first planet.\nDoc 2(Title: "Hg") Mercury is an element.\n'
    assert parse_search_result(text) == [
        Document(rank=1, title="Mercury (planet)", text="Mercury is the first planet."),
        Document(rank=2, title='"Hg"', text="Mercury is an element."),
    ]


def test_parse_search_result_multiline_text_and_empty():
    docs = parse_search_result("Doc 1 (Title: A) first line\nsecond line\nDoc 2 (Title: B) b")
    assert [d.text for d in docs] == ["first line\nsecond line", "b"]
    assert parse_search_result("") == [] and parse_search_result(" \n") == []
    assert parse_search_result("\n<information>Doc 1(Title: A) a\n</information>\n") == [Document(1, "A", "a")]
    assert parse_search_result("<information></information>") == []


@pytest.mark.parametrize(
    "text, message",
    [
        ("Doc 1 (Title: A) a\nDoc 3 (Title: C) c", "numbered 'Doc 3', expected 'Doc 2'"),
        ("Doc 2 (Title: A) a", "numbered 'Doc 2', expected 'Doc 1'"),
        ("Doc 1 Title: A) a", "not followed by '(Title:'"),
        ("Doc 1 (Title: A a\nDoc 2 (Title: B) b", "no closing parenthesis"),
        ("Results:\nDoc 1 (Title: A) a", "start with 'Doc 1"),
    ],
)
def test_parse_search_result_rejects_bad_blocks(text, message):
    with pytest.raises(SearchResultError, match=re.escape(message)):
        parse_search_result(text)


def test_format_then_parse_is_identity():
    docs = [Document(1, "Danube (river)", "The Danube flows\ninto the Black Sea."), Document(2, "Romania", "Capital: Bucharest.")]
    text = format_search_result(docs)
    assert text == "Doc 1 (Title: Danube (river)) The Danube flows\ninto the Black Sea.\nDoc 2 (Title: Romania) Capital: Bucharest."
    assert parse_search_result(text) == docs
    assert format_search_result([]) == ""


# ---------------------------------------------------------------------------------------------------
# Raw styles


WEBQA_RAW = {
    "question_index": 7,
    "question": "Who wrote Things Fall Apart?",
    "golden_answers": ["Chinua Achebe"],
    "sample_id": 2,
    "answer": "Chinua Achebe",
    "steps": [
        {"action": "search", "content": "Things Fall Apart author",
         "search_result": 'Doc 1(Title: "Things Fall Apart") A 1958 novel by Chinua Achebe.\nDoc 2(Title: "Chinua Achebe") Nigerian novelist.\n'},
        {"action": "search", "content": "nothing here", "search_result": ""},
    ],
    "run": "r1",
}


def test_webqa_raw_record():
    t = trajectory_from_dict(WEBQA_RAW, "p.jsonl", 1)
    assert (t.question_id, t.sample_id, t.answer, t.style) == ("7", 2, "Chinua Achebe", "webqa")
    assert [(s.action, s.content) for s in t.steps] == [("search", "Things Fall Apart author"), ("search", "nothing here")]
    assert t.steps[0].documents == [
        Document(1, '"Things Fall Apart"', "A 1958 novel by Chinua Achebe."),
        Document(2, '"Chinua Achebe"', "Nigerian novelist."),
    ]
    assert t.steps[1].documents == []
    assert t.extra == {"run": "r1"}
    # the writer keeps the public fields and adds no derivable documents
    out = trajectory_to_dict(t)
    assert out["question_index"] == "7" and "documents" not in out["steps"][0] and out["run"] == "r1"


def _openai_messages():
    return [
        {"role": "system", "content": "Use the browser."},
        {"role": "user", "content": "Which ship carried Darwin?"},
        {"role": "assistant", "content": "search", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "browser.search", "arguments": json.dumps({"query": "Darwin ship"})}}]},
        {"role": "tool", "tool_call_id": "a", "content": json.dumps([
            {"docid": "d1", "title": "HMS Beagle", "url": "https://w.org/Beagle", "snippet": "A brig-sloop.", "score": 3.5}])},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "b", "function": {"name": "browser.open", "arguments": {"url": "https://w.org/Beagle"}}},
            {"id": "c", "function": {"name": "browser.find", "arguments": json.dumps({"pattern": "Darwin"})}}]},
        {"role": "tool", "tool_call_id": "c", "content": "L2: carried Darwin"},
        {"role": "tool", "tool_call_id": "b", "content": "L0: HMS Beagle\nL2: carried Darwin"},
        {"role": "assistant", "tool_calls": [{"id": "d", "function": {"name": "browser.search", "arguments": "{not json"}}]},
        {"role": "tool", "tool_call_id": "d", "content": "error: bad arguments"},
        {"role": "assistant", "content": "Explanation: the Beagle.\nExact Answer: HMS Beagle\nConfidence: 85%"},
    ]


def test_browsing_openai_style():
    t = trajectory_from_dict({"qid": 3, "question": "Which ship carried Darwin?", "seed": 44, "correct": True,
                              "messages": _openai_messages()}, "b.jsonl", 1)
    assert (t.question_id, t.sample_id, t.seed, t.style, t.correct) == ("3", 2, 44, "browsing", True)
    assert [(s.action, s.content) for s in t.steps] == [
        ("search", "Darwin ship"), ("open", "https://w.org/Beagle"), ("find", "Darwin"),
        ("invalid", "browser.search {not json")]
    assert t.steps[0].documents == [Document(1, "HMS Beagle", "A brig-sloop.", doc_id="d1", score=3.5, url="https://w.org/Beagle")]
    assert t.steps[1].documents == [Document(1, "", "", url="https://w.org/Beagle")]
    assert t.steps[1].search_result.startswith("L0: HMS Beagle")  # paired by tool_call_id, not order
    assert t.steps[2].search_result == "L2: carried Darwin"
    assert t.answer == "HMS Beagle" and t.confidence == 0.85
    assert t.final_text.endswith("Confidence: 85%") and t.messages == _openai_messages()


def test_browsing_harmony_style():
    messages = [
        {"role": "user", "content": "Symbol W?"},
        {"role": "assistant", "channel": "analysis", "content": "Search it."},
        {"role": "assistant", "channel": "commentary", "recipient": "browser.search", "content": '{"query": "symbol W"}'},
        {"author": {"role": "tool", "name": "browser.search"}, "content": [{"type": "text", "text": "Doc 1 (Title: Tungsten) Symbol W."}]},
        {"role": "assistant", "recipient": "browser.open", "content": '{"id": 1, "cursor": 0}'},
        {"role": "tool", "name": "browser.open", "content": "Tungsten page"},
        {"role": "assistant", "channel": "final", "content": "The element is <answer>Tungsten</answer>."},
        {"role": "assistant", "channel": "analysis", "content": "done"},
    ]
    t = trajectory_from_dict({"qid": "q", "question": "Symbol W?", "sample_id": 0, "messages": messages})
    assert [(s.action, s.content) for s in t.steps] == [("search", "symbol W"), ("open", "1")]
    assert t.steps[0].documents == [Document(1, "Tungsten", "Symbol W.")]
    # {"id": 1} is a link index, a different page in every trajectory: no document is recorded for it
    assert t.steps[1].documents == [] and t.steps[1].search_result == "Tungsten page"
    assert t.answer == "Tungsten" and t.confidence is None  # the final channel wins over a later analysis message


@pytest.mark.parametrize(
    "final, answer",
    [("\\boxed{42}", "42"), ("**Exact Answer:** Paris", "Paris"), ("I am not sure.", ""), ("", "")],
)
def test_browsing_answer_extraction(final, answer):
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": final}]
    assert trajectory_from_dict({"qid": "q", "question": "q", "sample_id": 0, "messages": messages}).answer == answer


def test_example_pools_read_with_known_content():
    webqa = read_pool(DATA / "webqa_pool.jsonl")
    assert [g.question_id for g in webqa.groups] == ["0", "1", "2"]
    assert [len(g.trajectories) for g in webqa.groups] == [3, 3, 3]
    assert webqa.groups[2].trajectories[0].steps[1].documents[0].title == '"Romania"'
    browsing = read_pool(DATA / "browsing_pool.jsonl")
    assert [t.sample_id for t in browsing.groups[0].trajectories] == [0, 1, 2]  # from seeds 42..44
    assert [t.answer for t in browsing.groups[1].trajectories] == ["HMS Beagle", "HMS Beagle", ""]
    assert sum(len(t.steps) for t in browsing.trajectories()) == 19


def test_summary_known_values():
    s = summarize_pool(DATA / "webqa_pool.jsonl")
    assert (s.questions, s.trajectories, s.per_question, s.questions_with_gold) == (3, 9, (3, 3.0, 3), 3)
    assert s.answer_coverage == pytest.approx(8 / 9)
    # Q0: Achebe, Soyinka, Soyinka; Q1: 1989, "November 9, 1989", 1990; Q2: Bucharest, Kyiv, ""
    assert s.single == pytest.approx(1 / 3) and s.majority == pytest.approx(2 / 3) and s.oracle == 1.0
    assert s.mixed == 1.0 and s.actions["search"] == 15
    assert json.loads(s.to_json())["majority"] == pytest.approx(2 / 3)
    assert "majority 0.667" in s.to_text()
    b = summarize_pool(DATA / "browsing_pool.jsonl")  # no gold: scored from stored `correct`
    assert (b.questions_with_gold, b.scored_questions, b.single, b.majority) == (0, 3, pytest.approx(2 / 3), 1.0)


def test_iter_trajectories_streams(tmp_path):
    lines = (DATA / "webqa_pool.jsonl").read_text().splitlines()
    path = tmp_path / "p.jsonl"
    path.write_text(lines[0] + "\n{broken\n")
    stream = iter_trajectories(path)
    assert next(stream).sample_id == 0
    with pytest.raises(FormatError, match="p.jsonl:2: not valid JSON"):
        next(stream)


# ---------------------------------------------------------------------------------------------------
# Superset round trips


def _rich_pool() -> Pool:
    docs = [Document(1, "Danube", "A river.", doc_id="wiki-12", score=11.25), Document(2, "Romania", "Capital Bucharest.")]
    steps = [
        Step("search", "danube delta", format_search_result(docs), docs, raw_text="<think>a</think><search>danube delta</search>",
             logprobs=[-0.5, -1.25, 0.0, -3.0], tool_start=2, prompt_tokens=310, cached_tokens=256),
        Step("search", "exact derivable", format_search_result(docs[1:]), [Document(1, "Romania", "Capital Bucharest.")]),
        Step("invalid", "", "Your previous action is invalid."),
        Step("search", "no results", "", []),
    ]
    q = "Capital of the Danube Delta's country?"
    trajectories = [
        Trajectory("d1", q, 0, "Bucharest", steps, ["Bucharest"], correct=True, final_text="<answer>Bucharest</answer>",
                   final_logprobs=[-0.1, -0.2], confidence=0.75, finish_reason="answer", seed=1234, generated_tokens=321,
                   messages=[{"role": "user", "content": q}], extra={"run": {"host": "a", "ids": [1, 2]}, "tag": None}),
        Trajectory("d1", q, 1, "", [], ["Bucharest"], finish_reason="max_turns", parent_sample=0, branch_step=1),
        Trajectory("d2", "Ünïcode “question”?", 0, "Köln", steps[:1], [], correct=False, extra={"note": 5}),
    ]
    groups = [QuestionGroup("d1", q, ["Bucharest"], trajectories[:2]), QuestionGroup("d2", "Ünïcode “question”?", [], trajectories[2:])]
    meta = PoolMeta(setting="wikileads", split="test", policy_model="qwen-0.5b", strategy="partial",
                    sampling={"temperature": 1.0, "top_p": 0.95}, logprob_mode="processed_logprobs",
                    vllm_version="0.32.0", seed=7, accounting={"generated_tokens": 642}, extra={"branches": 2})
    return Pool(groups, meta)


def _browsing_pool() -> Pool:
    return read_pool(DATA / "browsing_pool.jsonl")


@pytest.mark.parametrize("ext", ["jsonl", "jsonl.gz", "parquet"])
@pytest.mark.parametrize("make", [_rich_pool, _browsing_pool])
def test_round_trip(tmp_path, ext, make):
    pool = make()
    path = tmp_path / f"pool.{ext}"
    write_pool(pool, path)
    back = read_pool(path)
    assert back == pool
    assert back.path == str(path) and meta_path(path).exists()


def test_round_trip_of_raw_files_is_stable(tmp_path):
    # raw -> ours -> ours gives identical bytes (deterministic writer, derivable documents omitted)
    pool = read_pool(DATA / "webqa_pool.jsonl")
    write_pool(pool, tmp_path / "a.jsonl.gz")
    write_pool(read_pool(tmp_path / "a.jsonl.gz"), tmp_path / "b.jsonl.gz")
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    first = json.loads(gzip.open(tmp_path / "a.jsonl.gz", "rt").readline())
    assert set(first) == {"question_index", "question", "golden_answers", "sample_id", "answer", "steps"}


def test_meta_sidecar(tmp_path):
    pool_path = tmp_path / "p.jsonl"
    assert read_meta(pool_path) == PoolMeta()
    meta = PoolMeta(setting="wikileads", seed=3, sampling={"temperature": 0.7})
    write_meta(meta, pool_path)
    assert meta_path(pool_path).name == "p.jsonl.meta.json" and read_meta(pool_path) == meta
    meta_path(pool_path).write_text(json.dumps({"seed": "three", "setting": "w"}))
    with pytest.raises(FormatError, match=r"p.jsonl.meta.json: field 'seed': expected an integer"):
        read_meta(pool_path)
    meta_path(pool_path).write_text(json.dumps({"notes": "x"}))
    assert read_meta(pool_path).extra == {"notes": "x"}


def test_atomic_write_keeps_existing_output(tmp_path):
    path = tmp_path / "pool.jsonl"
    write_pool(_rich_pool(), path)
    before = path.read_bytes(), meta_path(path).read_bytes()
    bad = _rich_pool()
    bad.meta.setting = "changed"
    bad.groups[1].trajectories[0].extra["oops"] = object()  # not JSON: fails after the first rows are written
    with pytest.raises(TypeError):
        write_pool(bad, path)
    assert (path.read_bytes(), meta_path(path).read_bytes()) == before
    assert sorted(os.listdir(tmp_path)) == ["pool.jsonl", "pool.jsonl.meta.json"]  # no temp files left


def test_write_refuses_inconsistent_pools(tmp_path):
    pool = _rich_pool()
    pool.groups[0].trajectories[1].sample_id = 0
    with pytest.raises(ValueError, match="duplicate"):
        write_pool(pool, tmp_path / "p.jsonl")
    with pytest.raises(FormatError, match="unknown pool extension"):
        write_pool(_rich_pool(), tmp_path / "p.json")
    assert not (tmp_path / "p.jsonl").exists()


# ---------------------------------------------------------------------------------------------------
# `trace-selector validate`: one line naming file, line and field, exit code 1


def _webqa_lines() -> list[dict]:
    return [json.loads(x) for x in (DATA / "webqa_pool.jsonl").read_text().splitlines()]


def _write_lines(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def _error(capsys, path) -> str:
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.strip()


def test_validate_good_pool(capsys):
    assert main(["validate", str(DATA / "webqa_pool.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "questions        3 (3 with gold answers)" in out and "oracle 1.000" in out
    assert main(["validate", "--json", str(DATA / "browsing_pool.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["style"] == "browsing"


def _mutate(i: int, **changes) -> list:
    records = _webqa_lines()
    for key, value in changes.items():
        if value is _DELETE:
            del records[i][key]
        else:
            records[i][key] = value
    return records


_DELETE = object()


@pytest.mark.parametrize(
    "records, expected",
    [
        (_webqa_lines()[:2] + ['{"question_index": 1, "question": '], ":3: not valid JSON"),
        (_mutate(1, question=_DELETE), ":2: field 'question': missing"),
        (_mutate(2, sample_id="2"), ":3: field 'sample_id': expected an integer, got str \"2\""),
        (_mutate(0, golden_answers="Chinua Achebe"), ":1: field 'golden_answers': expected a list of strings"),
        (_mutate(3, sample_id=True), ":4: field 'sample_id': expected an integer, got bool"),
        (_mutate(4, sample_id=0), ":5: field 'sample_id': duplicate trajectory (question '1', sample_id 0), also on line 4"),
        (_mutate(1, question="Who wrote it?"), ":2: field 'question': question '0' has a different text on line 1"),
        (_mutate(0, question_index=_DELETE), ":1: unknown record format: neither 'question_index'"),
        (_mutate(0, steps=[{"action": "search", "content": "x", "search_result": "Doc 1 (Title: A) a"},
                           {"action": "search", "content": "y", "search_result": "Doc 1 (Title: A) a\nDoc 3 (Title: C) c"}]),
         ":1: field 'steps[1].search_result': block 2 is numbered 'Doc 3', expected 'Doc 2'"),
        (_mutate(0, steps=[{"action": "search", "content": "x", "search_result": "Doc 1 Title: A) a"}]),
         ":1: field 'steps[0].search_result': 'Doc 1' is not followed by '(Title:'"),
        (_mutate(0, steps=[{"action": "search", "content": "x", "search_result": "Doc 1 (Title: A a"}]),
         ":1: field 'steps[0].search_result': 'Doc 1 (Title:' has no closing parenthesis"),
        (_mutate(0, steps=[{"action": "jump", "content": "x"}]), ":1: field 'steps[0].action': unknown action 'jump'"),
        (_mutate(0, steps=[{"action": "search"}]), ":1: field 'steps[0].content': missing"),
        (_webqa_lines()[:1] + [[1, 2]], ":2: expected a JSON object, got list"),
        (_webqa_lines()[:1] + [{"qid": "x", "question": "q", "sample_id": 0, "messages": []}],
         ":2: field 'qid': browsing-style record in a webqa-style pool (see line 1)"),
        ([{"qid": "x", "question": "q", "seed": 7, "messages": []}], ":1: field 'seed': sample_id must be >= 0"),
        ([{"qid": "x", "question": "q", "sample_id": 0, "messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]}],
         ":1: field 'messages[0].tool_calls[0].function.name': missing or not a string"),
        ([{"qid": "x", "question": "q", "sample_id": 0}], ":1: field 'messages': missing"),
    ],
    ids=["not-json", "missing", "sample-id-str", "gold-not-list", "sample-id-bool", "duplicate", "question-text",
         "unknown-format", "doc-numbering", "doc-no-title", "doc-unclosed", "bad-action", "step-missing-content",
         "not-object", "mixed-styles", "seed-below-42", "bad-tool-call", "browsing-no-messages"],
)
def test_validate_malformed_records(tmp_path, capsys, records, expected):
    path = _write_lines(tmp_path / "bad.jsonl", records)
    assert _error(capsys, path).startswith(f"error: {path}{expected}")


def test_validate_file_level_errors(tmp_path, capsys):
    good = (DATA / "webqa_pool.jsonl").read_bytes()
    gz = gzip.compress(good)
    (tmp_path / "cut.jsonl.gz").write_bytes(gz[: len(gz) // 2])
    assert "cut.jsonl.gz: truncated or corrupt gzip stream after line" in _error(capsys, tmp_path / "cut.jsonl.gz")
    (tmp_path / "plain.jsonl.gz").write_bytes(good)
    assert "plain.jsonl.gz: truncated or corrupt gzip stream before the first line" in _error(capsys, tmp_path / "plain.jsonl.gz")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    assert _error(capsys, tmp_path / "empty.jsonl").endswith("empty.jsonl: empty file: no trajectories")
    assert _error(capsys, tmp_path / "missing.jsonl").endswith("missing.jsonl: no such file")
    (tmp_path / "pool.csv").write_bytes(good)
    assert "pool.csv: unknown pool extension; expected .jsonl, .jsonl.gz or .parquet" in _error(capsys, tmp_path / "pool.csv")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet")
    assert "bad.parquet: not a readable Parquet file" in _error(capsys, tmp_path / "bad.parquet")
    write_pool(read_pool(DATA / "webqa_pool.jsonl"), tmp_path / "ok.parquet")
    data = (tmp_path / "ok.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    assert "cut.parquet: not a readable Parquet file" in _error(capsys, tmp_path / "cut.parquet")
    meta_path(tmp_path / "ok.parquet").write_text("{")
    assert "ok.parquet.meta.json: not valid JSON" in _error(capsys, tmp_path / "ok.parquet")


def test_parquet_errors_name_the_row(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _webqa_lines()[:2]
    table = pa.table({
        "question_index": [r["question_index"] for r in rows],
        "question": [r["question"] for r in rows],
        "golden_answers": [r["golden_answers"] for r in rows],
        "sample_id": [0, 0],
        "answer": [r["answer"] for r in rows],
        "steps": [r["steps"] for r in rows],  # native nested arrow types, as other tools write them
    })
    pq.write_table(table, tmp_path / "native.parquet")
    assert _error(capsys, tmp_path / "native.parquet").endswith(
        "native.parquet:2: field 'sample_id': duplicate trajectory (question '0', sample_id 0), also on line 1")
    pq.write_table(table.set_column(3, "sample_id", pa.array([0, 1])), tmp_path / "native.parquet")
    pool = read_pool(tmp_path / "native.parquet")
    assert pool.groups[0].trajectories[1].steps == read_pool(DATA / "webqa_pool.jsonl").groups[0].trajectories[1].steps


def test_token_confidence_round_trips_rounded(tmp_path):
    step = Step("search", "q", "Doc 1 (Title: T) text", logprobs=[-0.12345, -1.0], token_conf=[3.14159, 2.0])
    t = Trajectory("q1", "Q?", 0, "T", [step], ["T"], final_logprobs=[-0.5], final_token_conf=[7.77777])
    write_pool(Pool([QuestionGroup("q1", "Q?", ["T"], [t])]), tmp_path / "p.jsonl")
    [back] = read_pool(tmp_path / "p.jsonl").trajectories()
    assert back.steps[0].token_conf == [3.142, 2.0] and back.steps[0].logprobs == [-0.123, -1.0]
    assert back.final_token_conf == [7.778]


def test_token_confidence_misaligned_is_an_error(tmp_path, capsys):
    rec = {"question_index": "q1", "question": "Q?", "golden_answers": ["T"], "sample_id": 0, "answer": "T",
           "steps": [{"action": "search", "content": "q", "search_result": "", "logprobs": [-0.1, -0.2],
                      "token_conf": [1.0]}]}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(FormatError, match=r"bad.jsonl:1.*steps\[0\].token_conf.*1 values for 2 logprobs"):
        read_pool(path)

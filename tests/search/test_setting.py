"""Setting folders: question files, the standard (user-provided) layout, setting.json, summaries."""

from __future__ import annotations

import json

import pytest

from trace_selector.cli import main
from trace_selector.errors import FormatError, InputError
from trace_selector.search.bm25 import build_index
from trace_selector.search.corpus import Passage, write_corpus
from trace_selector.search.setting import (
    Question,
    index_dir,
    load_setting,
    prepare,
    read_questions,
    summary,
    write_questions,
)


def _standard(folder):
    folder.mkdir(parents=True, exist_ok=True)
    write_corpus([Passage("0", "Paris", "Paris is the capital of France."),
                  Passage("1", "Berlin", "Berlin is the capital of Germany.")], folder / "corpus.jsonl")
    (folder / "questions_test.jsonl").write_text(
        '{"id": "test_0", "question": "capital of germany?", "golden_answers": ["Berlin"]}\n')
    # FlashRAG's dataset layout names split files <split>.jsonl.
    (folder / "dev.jsonl").write_text('{"id": 5, "question": "q?", "golden_answers": "Paris", "metadata": {"a": 1}}\n')
    return folder


def test_questions_round_trip(tmp_path):
    qs = [Question("a", "Who?", ["X", "Y"], "train", "lookup", {"entity": "E", "url": "u"}),
          Question("b", "What?", ["Z"])]
    write_questions(qs, tmp_path / "q.jsonl.gz")
    assert read_questions(tmp_path / "q.jsonl.gz") == qs


@pytest.mark.parametrize(
    "row, where",
    [
        ('{"question": "q", "golden_answers": ["a"]}', ":1: field 'id': missing"),
        ('{"id": "1", "golden_answers": ["a"]}', ":1: field 'question': missing"),
        ('{"id": "1", "question": "q"}', ":1: field 'golden_answers': missing"),
        ('{"id": "1", "question": "q", "golden_answers": [["a"]]}', ":1: field 'golden_answers': expected a list"),
    ],
)
def test_bad_question_rows(tmp_path, row, where):
    path = tmp_path / "q.jsonl"
    path.write_text(row + "\n")
    with pytest.raises(FormatError, match=where):
        read_questions(path)


def test_standard_setting_folder_loads_through_the_same_code(tmp_path):
    folder = _standard(tmp_path / "nq")
    s = load_setting(folder)
    assert s.name == "nq" and s.splits == ["dev", "test"] and s.corpus == folder / "corpus.jsonl"
    test = s.questions("test")
    assert test[0].golden_answers == ["Berlin"] and test[0].split == "test"
    dev = s.questions("dev")
    assert dev[0].id == "5" and dev[0].golden_answers == ["Paris"] and dev[0].meta == {"metadata": {"a": 1}}
    with pytest.raises(InputError, match="no split 'train'"):
        s.questions("train")
    with pytest.raises(InputError, match="no index at"):
        s.index()
    build_index(s.corpus, s.index_dir)
    assert s.index().search(test[0].question, 1)[0].title == "Berlin"
    assert index_dir(str(folder)) == folder / "index"
    assert "questions test: 1" in summary("nq", folder)


def test_setting_json_points_at_shared_files(tmp_path):
    shared = _standard(tmp_path / "wiki18")
    build_index(shared / "corpus.jsonl", shared / "idx")
    folder = tmp_path / "hotpot"
    folder.mkdir()
    (folder / "mine.jsonl").write_text('{"id": "q", "question": "capital of france", "golden_answers": ["Paris"]}\n')
    (folder / "setting.json").write_text(json.dumps(
        {"name": "hotpotqa", "corpus": str(shared / "corpus.jsonl"), "index": "../wiki18/idx",
         "questions": {"dev": "mine.jsonl"}}))
    s = load_setting(folder)
    assert s.name == "hotpotqa" and s.splits == ["dev"]
    assert s.index().search(s.questions("dev")[0].question, 1)[0].title == "Paris"


def test_unknown_settings_and_missing_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_SELECTOR_HOME", str(tmp_path / "home"))
    with pytest.raises(InputError, match="trace-selector data prepare --setting wikileads"):
        load_setting("wikileads")
    with pytest.raises(InputError, match="give a setting folder"):
        load_setting("nosuch")
    with pytest.raises(InputError, match="no corpus"):
        load_setting(tmp_path)
    with pytest.raises(InputError, match="unknown bundled setting"):
        prepare("nosuch", out=tmp_path / "x")
    assert main(["data", "summary", "--setting", "wikileads"]) == 1


def test_mixed_order_interleaves_families_in_their_shares():
    from trace_selector.search.setting import mixed_order

    small = [Question(i, "?", ["x"], family=f) for i, f in [("a0", "a"), ("a1", "a"), ("a2", "a"), ("b0", "b")]]
    # step 2 ties (a and b both 2 short): the first-seen family wins
    assert [q.id for q in mixed_order(small)] == ["a0", "a1", "b0", "a2"]
    sizes = {"bridge": 11, "comparison": 5, "compositional": 2}  # in blocks, as wikihops writes them
    qs = [Question(f"{f}{i}", "?", ["x"], family=f) for f, n in sizes.items() for i in range(n)]
    mixed = mixed_order(qs)
    assert sorted(q.id for q in mixed) == sorted(q.id for q in qs)
    for family, n in sizes.items():
        assert [q.id for q in mixed if q.family == family] == [f"{family}{i}" for i in range(n)]
    for step in range(1, len(qs) + 1):
        for family, n in sizes.items():
            held = sum(q.family == family for q in mixed[:step])
            assert abs(held - step * n / len(qs)) < 1, (step, family)
    plain = [Question(str(i), "?", ["x"]) for i in range(5)]  # one family: the order is unchanged
    assert mixed_order(plain) == plain and mixed_order([]) == []

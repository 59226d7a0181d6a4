"""The user-facing Selector: package-level import, save/load round trip, push_to_hub at the HfApi boundary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import one_thread, toy_selector
from trace_selector.errors import InputError

POOL = Path(__file__).parent / "data" / "webqa_pool.jsonl"

_one_thread = pytest.fixture(autouse=True)(one_thread)


@pytest.fixture()
def checkpoint(tmp_path):
    return toy_selector(tmp_path / "ckpt", metrics={"val_acc": 0.25})


def test_package_exports_selector_lazily():
    from trace_selector import Selector
    from trace_selector.selector import Selector as Direct

    assert Selector is Direct
    # `import trace_selector` alone stays light: torch is loaded only when Selector is touched.
    code = "import sys, trace_selector; print('torch' in sys.modules); trace_selector.Selector; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
    with pytest.raises(AttributeError, match="no attribute 'Selectr'"):
        import trace_selector

        trace_selector.Selectr  # noqa: B018


def test_save_load_round_trip_gives_identical_scores(checkpoint, tmp_path):
    from trace_selector import Selector

    first = Selector.from_pretrained(checkpoint)
    assert first.method == "trace_grounded" and first.source == checkpoint
    before = first.select(POOL)
    saved = first.save_pretrained(tmp_path / "again")
    again = Selector.from_pretrained(saved)
    after = again.select(POOL)
    assert [s.sample_id for s in before] == [s.sample_id for s in after]
    assert [s.scores for s in before] == [s.scores for s in after]  # bit-identical floats
    assert any(len(s.scores) > 1 for s in before)
    # The card it was published with travels along; new metrics render a new card.
    assert (saved / "README.md").read_text() == (checkpoint / "README.md").read_text()
    fresh = again.save_pretrained(tmp_path / "fresh", setting="toy2", metrics={"val_acc": 0.5})
    card = (fresh / "README.md").read_text()
    assert "toy2" in card and "0.5000" in card and "# `trace_grounded` selector" in card


def test_push_to_hub_uploads_the_saved_folder(checkpoint, monkeypatch):
    import huggingface_hub

    from trace_selector import Selector

    calls = {}

    class FakeApi:  # the network boundary only: everything up to the upload call is real
        def __init__(self, endpoint=None, token=None):
            calls["init"] = (endpoint, token)

        def create_repo(self, repo_id, private=False, exist_ok=False, repo_type=None):
            calls["create"] = (repo_id, private, exist_ok)
            return f"https://hub.example/{repo_id}"

        def upload_folder(self, folder_path, repo_id, repo_type, allow_patterns, commit_message):
            folder = Path(folder_path)
            calls["files"] = {p.name: p.read_bytes() for p in folder.iterdir() if p.name in allow_patterns}
            calls["loaded"] = Selector.from_pretrained(folder).select(POOL)  # what was uploaded loads

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    (checkpoint / "calibration.json").write_text('{"temperature": 1.5}\n')  # travels with the weights
    selector = Selector.from_pretrained(checkpoint)
    url = selector.push_to_hub("me/toy-selector", private=True, token="hf_x", endpoint="http://hub.local")
    assert url == "https://hub.example/me/toy-selector"
    assert calls["init"] == ("http://hub.local", "hf_x") and calls["create"] == ("me/toy-selector", True, True)
    expected = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    assert calls["files"] == expected and "calibration.json" in expected  # the same bytes save_pretrained writes
    assert [s.scores for s in calls["loaded"]] == [s.scores for s in selector.select(POOL)]


def test_push_to_hub_failure_is_one_line(checkpoint):
    from trace_selector import Selector

    with pytest.raises(InputError, match=r"^publish me/x to http://127.0.0.1:9 failed \(") as err:
        Selector.from_pretrained(checkpoint).push_to_hub("me/x", endpoint="http://127.0.0.1:9", token="hf_dummy")
    assert "\n" not in str(err.value)


def test_a_question_without_a_graph_falls_back_to_majority_vote(checkpoint):
    from trace_selector import Selector
    from trace_selector.records import Pool, QuestionGroup, Step, Trajectory, read_pool
    from trace_selector.selector import NO_GRAPH

    def traj(qid, sample, answer):  # answered without a search that returned anything: never a candidate
        return Trajectory(qid, "Which city is the capital of France?", sample, answer,
                          [Step("search", "capital", documents=[])], ["Paris"])

    scored = read_pool(POOL).groups[0]
    unsearched = QuestionGroup("u", "Which city is the capital of France?", ["Paris"],
                               [traj("u", 0, "Lyon"), traj("u", 1, "Paris"), traj("u", 2, "paris!")])
    unanswered = QuestionGroup("n", "Which city is the capital of France?", ["Paris"], [traj("n", 0, "")])
    picks = Selector.from_pretrained(checkpoint).select(Pool(groups=[unsearched, scored, unanswered]))
    assert [p.question_id for p in picks] == ["u", scored.question_id, "n"]
    u, s, n = picks
    assert (u.sample_id, u.answer, u.correct, u.fallback) == (1, "Paris", 1.0, NO_GRAPH)  # 2 of 3 say Paris
    assert s.fallback is None and s.scores and s.sample_id in s.scores
    assert (n.sample_id, n.answer, n.fallback) == (None, "", "no trajectory has an answer")

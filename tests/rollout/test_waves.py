"""Adaptive sampling in waves on the fake engine with a stub stop hook: which questions get how many
trajectories, how engine batches fill, what the pool records, and resuming after a kill or a stop file."""

from __future__ import annotations

import pytest
from tests.conftest import QUESTIONS, FakeEngine, FakeIndex, search_then_answer
from tests.rollout.test_agent import ContinuousEngine

from trace_selector.errors import InputError
from trace_selector.records import read_meta, read_pool, trajectory_to_dict
from trace_selector.records.summary import summarize_pool
from trace_selector.rollout.runner import RolloutConfig, load_rollout_config, run_rollout
from trace_selector.rollout.tools import SearchTools
from trace_selector.rollout.waves import (DECISION_KEY, AdaptiveRolloutConfig, WaveDecision, is_closed,
                                          question_record)


class StubHook:
    """Stops the questions in `stop_at` (question id -> wave) at that wave, never the others."""

    def __init__(self, stop_at: dict[str, int], wave: int = 2):
        self.stop_at, self.wave = stop_at, wave
        self.calls: list[list[tuple[str, int]]] = []

    def __call__(self, groups):
        self.calls.append([(g.question_id, len(g.trajectories)) for g in groups])
        out = []
        for g in groups:
            n = -(-len(g.trajectories) // self.wave)
            assert [t.sample_id for t in g.trajectories] == list(range(len(g.trajectories)))
            out.append(WaveDecision(n >= self.stop_at.get(g.question_id, 99), 0.5 + 0.1 * n))
        return out


def _run(out, hook, engine=None, k=4, **over):
    cfg = load_rollout_config(None, [f"{key}={value}" for key, value in over.items()], k=k, model="fake")
    cfg.chunk_questions = 1  # slots: k trajectories in flight
    engine = engine or FakeEngine(search_then_answer)
    report = run_rollout(cfg, out, engine=engine, toolbox=SearchTools(FakeIndex(), top_k=2), questions=QUESTIONS,
                         progress=False, stop_hook=hook)
    return report, engine


def _records(path, drop=("cached_tokens",)):
    """Trajectory records, without what depends on the engine's request order (the prefix cache)."""
    out = []
    for t in read_pool(path).trajectories():
        d = trajectory_to_dict(t)
        d.pop(DECISION_KEY, None)
        for step in d["steps"]:
            for key in drop:
                step.pop(key, None)
        out.append(d)
    return out


def test_questions_stop_when_the_hook_says_and_batches_stay_full(tmp_path):
    out = tmp_path / "pool.jsonl"
    hook = StubHook({"0": 1})
    report, engine = _run(out, hook)
    pool = read_pool(out)
    assert {g.question_id: len(g.trajectories) for g in pool.groups} == {"0": 2, "1": 4, "2": 4}
    # Two turns per trajectory. Waves of q0 and q1 fill the 4 slots; q0 stops after its first wave and
    # its slots go to q2's first wave next to q1's second; q2's second wave ends the run.
    assert engine.batches == [4, 4, 4, 4, 2, 2]
    assert hook.calls == [[("0", 2), ("1", 2)], [("1", 4), ("2", 2)], [("2", 4)]]
    # Each wave's decision rides on its last trajectory.
    decisions = {(t.question_id, t.sample_id): t.extra.get(DECISION_KEY) for t in pool.trajectories()}
    assert decisions[("0", 1)] == {"wave": 1, "seen": 2, "confidence": 0.6, "stop": "confident"}
    assert decisions[("1", 1)] == {"wave": 1, "seen": 2, "confidence": 0.6, "stop": None}
    assert decisions[("1", 3)] == {"wave": 2, "seen": 4, "confidence": 0.7, "stop": "budget"}
    assert decisions[("0", 0)] is None
    meta = read_meta(out).extra["adaptive"]
    assert meta["questions"] == {"0": {"sampled": 2, "waves": 1, "stop": "confident", "confidence": 0.6},
                                 "1": {"sampled": 4, "waves": 2, "stop": "budget", "confidence": 0.7},
                                 "2": {"sampled": 4, "waves": 2, "stop": "budget", "confidence": 0.7}}
    assert meta["stopped"] == {"confident": 1, "budget": 2} and meta["mean_trajectories"] == pytest.approx(10 / 3, abs=1e-4)
    assert meta["wave"] == 2 and meta["k"] == 4
    assert "adaptive: mean 3.33 of k=4" in report.to_text()
    assert "adaptive         mean 3.33 of k=4 trajectories per question" in summarize_pool(out).to_text()
    # The waves are the first trajectories of a fixed-K run: same sample ids, same seeds, same records.
    fixed = tmp_path / "fixed.jsonl"
    run_rollout(RolloutConfig(k=4, chunk_questions=1, model="fake"), fixed, engine=FakeEngine(search_then_answer),
                toolbox=SearchTools(FakeIndex(), top_k=2), questions=QUESTIONS, progress=False)
    by_key = {(d["question_index"], d["sample_id"]): d for d in _records(fixed)}
    assert all(d == by_key[(d["question_index"], d["sample_id"])] for d in _records(out))
    assert "adaptive" not in read_meta(fixed).extra


def test_continuous_batching_starts_waves_as_slots_free_and_samples_the_same(tmp_path):
    turn, cont = tmp_path / "turn.jsonl", tmp_path / "cont.jsonl"
    _run(turn, StubHook({"0": 1}))
    hook = StubHook({"0": 1})
    _, engine = _run(cont, hook, engine=ContinuousEngine(search_then_answer), **{"agent.continuous": "true"})
    assert _records(cont) == _records(turn)
    assert read_meta(cont).extra["adaptive"]["questions"] == read_meta(turn).extra["adaptive"]["questions"]
    # Decisions come one finished wave at a time, and q2's first wave started while q1's first one was
    # still running (a freed slot is filled at once rather than at the end of a batch).
    assert all(len(call) == 1 for call in hook.calls)
    order = [qid for qid, _ in engine.order]
    assert order.index("2") < len(order) - 1 - order[::-1].index("1")


def test_killed_run_resumes_with_recorded_decisions(tmp_path):
    out = tmp_path / "pool.jsonl"
    whole = tmp_path / "whole.jsonl"
    _run(whole, StubHook({"0": 1, "2": 1}))

    class Killed(Exception):
        pass

    class Dying(StubHook):
        def __call__(self, groups):
            if len(self.calls) == 1:
                raise Killed
            return super().__call__(groups)

    with pytest.raises(Killed):
        _run(out, Dying({"0": 1, "2": 1}))
    assert not out.exists()  # the shard holds the first call's waves: q0 (stopped) and q1's first
    hook = StubHook({"0": 1, "2": 1})
    report, _ = _run(out, hook)
    assert report.resumed == 4 and report.generated_now == 4
    assert hook.calls == [[("1", 4), ("2", 2)]]  # q0 stays closed without asking again
    assert _records(out) == _records(whole)
    assert read_meta(out).extra["adaptive"]["questions"] == read_meta(whole).extra["adaptive"]["questions"]
    # A finished adaptive pool: a rerun has nothing to sample and needs no engine.
    report, _ = _run(out, StubHook({}), engine=object())
    assert report.generated_now == 0 and report.trajectories == 8


def test_stop_file_drains_the_waves_in_flight_and_the_same_command_finishes(tmp_path):
    out, stop = tmp_path / "pool.jsonl", tmp_path / "STOP"

    class Stopper(StubHook):
        def __call__(self, groups):
            stop.touch()
            return super().__call__(groups)

    report, _ = _run(out, Stopper({"0": 1}), stop_file=str(stop))
    assert report.stopped
    snapshot = read_meta(out)
    assert snapshot.extra["snapshot"] and snapshot.extra["adaptive"]["stopped"] == {"confident": 1, "open": 1}
    stop.unlink()
    hook = StubHook({"0": 1})
    _run(out, hook, stop_file=str(stop))
    assert hook.calls == [[("1", 4), ("2", 2)], [("2", 4)]]
    assert {g.question_id: len(g.trajectories) for g in read_pool(out).groups} == {"0": 2, "1": 4, "2": 4}


def test_extending_a_fixed_pool_decides_after_the_next_wave(tmp_path):
    out = tmp_path / "pool.jsonl"
    run_rollout(RolloutConfig(k=2, model="fake"), out, engine=FakeEngine(search_then_answer),
                toolbox=SearchTools(FakeIndex(), top_k=2), questions=QUESTIONS, progress=False)
    hook = StubHook({"1": 2})
    _run(out, hook, k=6)
    # The pool's two trajectories per question carry no decision: each question's next wave decides.
    assert hook.calls[0] == [("0", 4), ("1", 4), ("2", 4)]
    sizes = {g.question_id: len(g.trajectories) for g in read_pool(out).groups}
    assert sizes == {"0": 6, "1": 4, "2": 6}
    assert read_meta(out).extra["adaptive"]["questions"]["1"]["stop"] == "confident"


def test_question_record_of_unrecorded_and_open_questions():
    from trace_selector.records import Trajectory

    ts = [Trajectory("q", "?", i, "a") for i in range(3)]
    assert question_record(ts, 4) == {"sampled": 3, "waves": None, "stop": "open", "confidence": None}
    assert question_record(ts, 3)["stop"] == "budget"
    ts[1].extra[DECISION_KEY] = {"wave": 1, "seen": 2, "confidence": 0.9, "stop": "confident"}
    assert question_record(ts, 4)["stop"] == "open"  # a record of fewer trajectories than it holds
    assert question_record(ts[:2], 4) == {"sampled": 2, "waves": 1, "stop": "confident", "confidence": 0.9}
    ts[1].extra[DECISION_KEY]["stop"] = "budget"  # k was 2 then; a run with k = 4 samples more
    assert question_record(ts[:2], 2)["stop"] == "budget" and question_record(ts[:2], 4)["stop"] == "open"
    assert is_closed(ts[:2], 2) and not is_closed(ts[:2], 4)


def test_settings_are_checked():
    with pytest.raises(InputError, match="strategy=standard"):
        load_rollout_config(None, ["strategy=partial", "adaptive.checkpoint=ckpt"], k=4)
    with pytest.raises(ValueError, match="adaptive.wave"):
        AdaptiveRolloutConfig(wave=0)
    with pytest.raises(ValueError, match="adaptive.temperature"):
        AdaptiveRolloutConfig(temperature=0.0)
    cfg = load_rollout_config(None, ["adaptive.checkpoint=ckpt", "adaptive.threshold=0.8"], k=4)
    assert cfg.adaptive.threshold == 0.8 and cfg.adaptive.wave == 2 and cfg.adaptive.min_waves == 2
    with pytest.raises(InputError, match="no stop hook"):
        run_rollout(cfg, "unused.jsonl", engine=object(), questions=QUESTIONS)

"""Online adaptive rollout through the real scoring path: a tiny hash-encoder selector decides after
every wave on the fake engine, and its decisions are those the offline replay (`AdaptiveMethod.waves`)
takes on a fixed-K pool of the same trajectories; `trace-selector rollout adaptive.*` and `evaluate`
on the pool it writes (questions with different numbers of trajectories); and, marked slow, the real
vLLM engine with SmolLM2-135M (run: pytest tests/test_adaptive_rollout.py -m slow)."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import QUESTIONS, FakeEngine, FakeIndex, one_thread, tiny_setting, toy_selector, turn_of
from trace_selector.adaptive import AdaptiveConfig, build_adaptive, stop_index
from trace_selector.adaptive_rollout import resolve_temperature, run_adaptive_rollout
from trace_selector.cli import main
from trace_selector.errors import InputError
from trace_selector.evaluate import TraceMethod
from trace_selector.records import read_meta, read_pool, trajectory_to_dict
from trace_selector.rollout.runner import RolloutConfig, load_rollout_config, run_rollout
from trace_selector.rollout.tools import SearchTools
from trace_selector.rollout.waves import DECISION_KEY, AdaptiveRolloutConfig

_one_thread = pytest.fixture(autouse=True)(one_thread)

K, WAVE, TEMPERATURE = 8, 2, 2.0


def varied(prompt_text, request):
    """Searches the question, then answers with the title of the result its seed points at, so the
    samples of a question disagree (in a pattern the seed fixes)."""
    if turn_of(prompt_text) == 0:
        question = re.search(r"Question: (.*?)<\|end\|>", prompt_text.split("<|user|>")[-1]).group(1)
        return f"<think>Search.</think>\n<search>{question.rstrip('?')}</search>"
    titles = re.findall(r"Doc \d+ \(Title: (.*?)\)", prompt_text.split("<information>")[-1])
    return f"<think>Pick.</think>\n<answer>{titles[(request.seed or 0) % len(titles)]}</answer>"


@pytest.fixture()
def checkpoint(tmp_path):
    return toy_selector(tmp_path / "ckpt")


def _fakes():
    return {"engine": FakeEngine(varied), "toolbox": SearchTools(FakeIndex(), top_k=3), "questions": QUESTIONS,
            "progress": False}


def _offline_threshold(checkpoint, pool):
    """Every wave's confidence on the fixed-K pool, and a threshold between two of them at which some
    question stops early and some goes on to K."""
    method = build_adaptive("trace_adaptive", AdaptiveConfig(wave=WAVE, temperature={"trace_adaptive": TEMPERATURE}),
                            TraceMethod(str(checkpoint), pool))
    stats = [[w.statistic for w in waves] for waves in method.waves(pool.groups)]
    values = sorted({s for row in stats for s in row if s is not None})
    for lo, hi in zip(values, values[1:]):
        t = (lo + hi) / 2
        stops = [stop_index(row, t) for row in stats]
        if any(s < len(row) - 1 for s, row in zip(stops, stats)) and any(s == len(row) - 1 for s, row in zip(stops, stats)):
            return stats, t
    raise AssertionError(f"no threshold separates the questions: {stats}")


def test_online_decisions_are_the_offline_replay(tmp_path, checkpoint, capsys):
    fixed_out = tmp_path / "fixed.jsonl"
    run_rollout(RolloutConfig(k=K, model="fake"), fixed_out, **_fakes())
    fixed = read_pool(fixed_out)
    stats, threshold = _offline_threshold(checkpoint, fixed)
    (checkpoint / "calibration.json").write_text(json.dumps({"temperature": TEMPERATURE}))

    out = tmp_path / "adaptive.jsonl"
    cfg = load_rollout_config(None, [f"adaptive.checkpoint={checkpoint}", f"adaptive.threshold={threshold}"], k=K,
                              model="fake")
    report, hook, source = run_adaptive_rollout(cfg, out, **_fakes())
    assert source.endswith("calibration.json") and hook.temperature == TEMPERATURE and hook.calls > 0
    pool = read_pool(out)
    sampled = {g.question_id: len(g.trajectories) for g in pool.groups}
    # Each question stopped at the wave where the offline rule stops, with the offline confidences.
    assert sampled == {g.question_id: min(K, WAVE * (stop_index(row, threshold) + 1))
                       for g, row in zip(fixed.groups, stats)}
    assert len(set(sampled.values())) > 1, (stats, threshold)
    for g, row in zip(pool.groups, stats):
        recorded = [t.extra[DECISION_KEY]["confidence"] for t in g.trajectories if DECISION_KEY in t.extra]
        assert len(recorded) == sampled[g.question_id] // WAVE and recorded[0] is None is row[0]  # min_waves=2
        assert recorded[1:] == pytest.approx(row[1: len(recorded)], abs=1e-5)
    # ... and sampled the first trajectories of the fixed-K run.
    first = {(t.question_id, t.sample_id): trajectory_to_dict(t) for t in fixed.trajectories()}
    for t in pool.trajectories():
        d = trajectory_to_dict(t)
        d.pop(DECISION_KEY, None)
        assert d == first[(t.question_id, t.sample_id)]
    meta = read_meta(out).extra["adaptive"]
    assert meta["temperature"] == TEMPERATURE and meta["threshold"] == threshold and meta["checkpoint"] == str(checkpoint)
    assert "adaptive:" in report.to_text()

    # `evaluate` reads the pool as it is; its offline adaptive row at the same settings stops where
    # the rollout did, so it reads every trajectory the rollout sampled and no more.
    res = tmp_path / "results.json"
    assert main(["evaluate", "--pool", str(out), "--checkpoint", str(checkpoint), "--out", str(res),
                 "--methods", "majority,trace,trace_adaptive", "threads=1", "bootstrap=20", "budget_subsets=2",
                 f"adaptive.thresholds={{trace_adaptive: {threshold}}}",
                 f"adaptive.temperature={{trace_adaptive: {TEMPERATURE}}}"]) == 0
    capsys.readouterr()
    rows = json.loads(res.read_text())["methods"]
    mean = sum(sampled.values()) / len(sampled)
    for name in ("majority", "trace", "trace_adaptive"):
        assert rows[name]["mean_trajectories"] == pytest.approx(mean, abs=1e-3)
    assert rows["trace_adaptive"]["em"] == rows["trace"]["em"]


def test_the_rollout_command_runs_adaptively(tmp_path, checkpoint, monkeypatch, capsys):
    _fake_setting(monkeypatch)
    out = tmp_path / "pool.jsonl"
    assert main(["rollout", "--out", str(out), "--k", "4", "--model", "fake", "--quiet", "agent.continuous=true",
                 f"adaptive.checkpoint={checkpoint}", "adaptive.min_waves=1", "adaptive.threshold=0.0"]) == 0
    text = capsys.readouterr().out
    assert "adaptive: mean 2.00 of k=4" in text and "temperature from none (T = 1" in text
    assert all(len(g.trajectories) == 2 for g in read_pool(out).groups)  # threshold 0: the first wave decides
    assert main(["validate", str(out)]) == 0
    assert "adaptive         mean 2.00 of k=4 trajectories per question" in capsys.readouterr().out
    assert "temperature: 1.0" in (tmp_path / "pool.jsonl.config.yaml").read_text()


def _fake_setting(monkeypatch):
    """`trace-selector rollout` on the fake engine, index and questions instead of the named setting."""
    import trace_selector.rollout.runner as runner
    import trace_selector.search.setting as setting

    class Setting:
        def questions(self, split):
            return QUESTIONS

    monkeypatch.setattr(runner, "start_engine", lambda cfg: FakeEngine(varied))
    monkeypatch.setattr(runner, "_toolbox", lambda cfg, s: SearchTools(FakeIndex(), top_k=3))
    monkeypatch.setattr(setting, "load_setting", lambda name: Setting())


def test_the_side_by_side_experiment_writes_its_comparison(tmp_path, checkpoint, monkeypatch, capsys):
    import importlib.util
    import sys
    from pathlib import Path

    import trace_selector.rollout.runner as runner

    script = Path(__file__).resolve().parents[1] / "experiments" / "adaptive_rollout.py"
    spec = importlib.util.spec_from_file_location("adaptive_rollout_experiment", script)
    experiment = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "adaptive_rollout_experiment", experiment)
    spec.loader.exec_module(experiment)
    _fake_setting(monkeypatch)
    monkeypatch.setattr(runner, "start_engine", lambda cfg: FakeEngine(varied))
    assert experiment.main(["--checkpoint", str(checkpoint), "--model", "fake", "--limit", "3", "--k", "6",
                            "--threshold", "0.3", "--out-dir", str(tmp_path / "out")]) == 0
    table = capsys.readouterr().out
    assert "| fixed K=6 | 3 | 6.00 |" in table and "| adaptive (t=0.3, T=1) | 3 |" in table
    res = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert res["adaptive"]["mean_trajectories"] == res["adaptive"]["selector"]["mean_trajectories"] < 6
    # The fake engine samples the same trajectories in both runs: the offline replay on the fixed pool
    # stops where the online run did, with the same picks.
    assert res["fixed"]["selector_offline_adaptive"] == res["adaptive"]["selector"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        ["adaptive.jsonl.gz", "adaptive.jsonl.gz.config.yaml", "adaptive.jsonl.gz.meta.json", "comparison.json",
         "fixed.jsonl.gz", "fixed.jsonl.gz.config.yaml", "fixed.jsonl.gz.meta.json"])


def test_temperature_comes_from_the_setting_then_the_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    assert resolve_temperature(AdaptiveRolloutConfig(checkpoint=str(ckpt)))[0] == 1.0
    (ckpt / "calibration.json").write_text('{"temperature": 0.6}')
    assert resolve_temperature(AdaptiveRolloutConfig(checkpoint=str(ckpt))) == (0.6, str(ckpt / "calibration.json"))
    assert resolve_temperature(AdaptiveRolloutConfig(checkpoint=str(ckpt), temperature=3.0)) == (3.0, "given")
    (ckpt / "calibration.json").write_text('{"temperature": -1}')
    with pytest.raises(InputError, match="temperature must be a number > 0"):
        resolve_temperature(AdaptiveRolloutConfig(checkpoint=str(ckpt)))


@pytest.mark.slow
def test_vllm_adaptive_rollout_end_to_end(tmp_path, checkpoint):
    """SmolLM2-135M on 2 questions, K=4 in waves of 2 with continuous batching: every question stops
    after one wave (confident) or two (K), as its recorded confidences say."""
    from trace_selector.engines import make_engine

    engine = make_engine("vllm:smollm2-135m", max_model_len=2048, seed=0)
    try:
        setting_dir = tiny_setting(tmp_path / "setting")  # after the engine: bm25s imports numba
        threshold = 0.9
        cfg = load_rollout_config(None, ["agent.think=false", "agent.max_turns=2", "agent.max_tokens=48",
                                         "agent.max_context=2048", "agent.temperature=0.8", "agent.continuous=true",
                                         f"adaptive.checkpoint={checkpoint}", f"adaptive.threshold={threshold}",
                                         "adaptive.min_waves=1"],
                                  setting=str(setting_dir), split="dev", limit=2, k=4, model="smollm2-135m")
        out = tmp_path / "pool.jsonl.gz"
        report, hook, _ = run_adaptive_rollout(cfg, out, engine=engine, progress=False)
    finally:
        engine.close()
    pool = read_pool(out)
    assert [g.question_id for g in pool.groups] == ["q1", "q2"] and hook.questions >= 2
    for g in pool.groups:
        records = [t.extra[DECISION_KEY] for t in g.trajectories if DECISION_KEY in t.extra]
        assert [r["seen"] for r in records] == list(range(2, len(g.trajectories) + 1, 2))
        first = records[0]["confidence"]
        stopped_early = first is not None and first >= threshold
        assert len(g.trajectories) == (2 if stopped_early else 4)
        assert [r["stop"] for r in records][:-1] == [None] * (len(records) - 1)
        assert records[-1]["stop"] == "confident" if stopped_early else records[-1]["stop"] in ("confident", "budget")
    meta = read_meta(out)
    assert meta.accounting["generated_tokens"] > 0 and meta.extra["adaptive"]["k"] == 4
    assert report.trajectories == sum(len(g.trajectories) for g in pool.groups)

"""Resumable pool writing and the rollout runner on a fake engine: resume after a simulated kill."""

from __future__ import annotations

import json

import pytest
from tests.conftest import QUESTIONS, FakeEngine, FakeIndex, Q, search_then_answer

from trace_selector.errors import FormatError, InputError
from trace_selector.records import Trajectory, read_meta, read_pool
from trace_selector.records.summary import summarize_pool
from trace_selector.rollout.runner import RolloutConfig, load_rollout_config, run_rollout
from trace_selector.rollout.tools import SearchTools
from trace_selector.rollout.writer import CHECKPOINT, ShardWriter, shard_path


def _t(q, s):
    return Trajectory(str(q), f"question {q}?", s, "a", golden_answers=["a"])


def _write(tmp_path, groups, k=2, coupled=False):
    w = ShardWriter(tmp_path / "pool.jsonl", k, coupled)
    w.resume()
    for i, g in enumerate(groups):
        w.append_group([_t(q, s) for q, s in g], {"accounting": {"llm_calls": i + 1}})
    return w


def test_resume_ignores_torn_last_line_and_duplicates(tmp_path):
    _write(tmp_path, [[(0, 0), (0, 1)], [(1, 0)]])
    path = shard_path(tmp_path / "pool.jsonl")
    with open(path, "a") as fh:
        fh.write(json.dumps({"question_index": "1", "question": "question 1?", "sample_id": 0}) + "\n")
        fh.write('{"question_index": "2", "sample_id": 0, "ques')  # torn by a kill
    w = ShardWriter(tmp_path / "pool.jsonl", 2, coupled=False)
    assert w.resume() == {"0": {0, 1}, "1": {0}}
    assert w.dropped == 2 and w.checkpoint == {"accounting": {"llm_calls": 2}}
    # compacted: a second resume reads a clean file with the same content
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and CHECKPOINT in json.loads(lines[-1])
    assert ShardWriter(tmp_path / "pool.jsonl", 2, coupled=False).resume() == {"0": {0, 1}, "1": {0}}


def test_resume_drops_incomplete_coupled_groups(tmp_path):
    _write(tmp_path, [[(0, 0), (0, 1)], [(1, 0)]])
    w = ShardWriter(tmp_path / "pool.jsonl", 2, coupled=True)
    assert w.resume() == {"0": {0, 1}}
    assert w.dropped == 1


def test_corrupt_line_in_the_middle_is_an_error(tmp_path):
    path = shard_path(tmp_path / "pool.jsonl")
    path.write_text('{"question_index": "0", "sample_id": 0}\nnot json\n{"question_index": "0", "sample_id": 1}\n')
    with pytest.raises(FormatError, match=r"pool.jsonl.shard.jsonl:2"):
        ShardWriter(tmp_path / "pool.jsonl", 2, coupled=False).resume()


# --- runner -------------------------------------------------------------------------------------------

QS = QUESTIONS + [Q("3", "Where is the Nile?", ["Africa"])]


def _run(out, strategy="standard", engine=None, progress=False, **over):
    cfg = RolloutConfig(**{"k": 2, "strategy": strategy, "chunk_questions": 1, **over})
    engine = engine or FakeEngine(search_then_answer)
    return run_rollout(cfg, out, engine=engine, toolbox=SearchTools(FakeIndex(), top_k=2), questions=QS,
                       progress=progress), engine


def _pairs(path):
    return sorted((t.question_id, t.sample_id) for g in read_pool(path).groups for t in g.trajectories)


@pytest.mark.parametrize("strategy", ["standard", "divinit", "partial", "replicas"])
def test_rollout_writes_pool_meta_and_config(tmp_path, strategy):
    from trace_selector.rollout.strategies.partial import PartialConfig

    out = tmp_path / "pool.jsonl.gz"
    # K = 2 leaves room for one branch per question, so b = 1 (the default b = 3 needs three)
    partial = PartialConfig(initial=1, top_steps=1, branches=1, min_step=0)
    report, _ = _run(out, strategy, **({"partial": partial} if strategy == "partial" else {}))
    assert report.trajectories == 8 and report.generated_now == 8
    pool = read_pool(out)
    assert [g.question_id for g in pool.groups] == ["0", "1", "2", "3"]
    assert _pairs(out) == [(q, s) for q in "0123" for s in (0, 1)]
    meta = read_meta(out)
    assert meta.strategy == strategy and meta.setting == "wikileads" and meta.logprob_mode == "processed_logprobs"
    acct = meta.accounting
    for key in ("generated_tokens", "prompt_tokens", "cached_tokens", "tool_calls", "wall_seconds",
                "llm_calls", "qpd_turn1", "atd", "doc_overlap", "valid_action_rate"):
        assert key in acct, key
    assert acct["valid_action_rate"] == 1.0 and acct["generated_tokens"] > 0
    assert (tmp_path / "pool.jsonl.gz.config.yaml").exists()
    assert not shard_path(out).exists()
    summary = summarize_pool(out)
    assert "8" in summary.to_text()
    if strategy == "divinit":
        assert meta.extra["strategy_stats"]["divinit_proposal_calls"] == 4
    if strategy == "partial":
        assert sum(t.parent_sample is not None for g in pool.groups for t in g.trajectories) == 4


@pytest.mark.parametrize("strategy", ["standard", "partial"])
def test_rollout_resumes_after_kill(tmp_path, strategy, monkeypatch, capsys):
    from trace_selector.rollout.strategies.partial import PartialConfig

    extra = {"partial": PartialConfig(initial=1, top_steps=1, branches=1, min_step=1)} if strategy == "partial" else {}
    ref, _ = _run(tmp_path / "ref.jsonl", strategy, **extra)

    out = tmp_path / "pool.jsonl"
    calls = {"n": 0}
    original = ShardWriter.append_group

    def dying(self, trajectories, checkpoint):
        if calls["n"] == 2:
            raise KeyboardInterrupt  # the process dies after two groups were made durable
        calls["n"] += 1
        original(self, trajectories, checkpoint)

    monkeypatch.setattr(ShardWriter, "append_group", dying)
    with pytest.raises(KeyboardInterrupt):
        _run(out, strategy, **extra)
    monkeypatch.setattr(ShardWriter, "append_group", original)
    assert not out.exists()
    with open(shard_path(out), "a") as fh:  # plus a torn line from the interrupted write
        fh.write('{"question_index": "2", "sam')
    capsys.readouterr()
    report, engine = _run(out, strategy, progress=True, **extra)
    assert report.resumed == 4 and report.generated_now == 4
    # the progress bar counts the pool: it starts at the four resumed trajectories, not at zero
    bar = capsys.readouterr().err.replace("\r", "\n")
    assert "4/8" in bar and "8/8" in bar and "0/4" not in bar
    assert _pairs(out) == _pairs(tmp_path / "ref.jsonl")
    # accounting continues across the restart: the first run's two groups are counted once
    assert read_meta(out).accounting["tool_calls"] == read_meta(tmp_path / "ref.jsonl").accounting["tool_calls"]
    # nothing regenerated: the restarted run only asked for questions 2 and 3
    asked = {engine.decode(r.prompt_token_ids).split("Question: ")[-1][:12] for r in engine.requests}
    assert not any(a.startswith(("What is the c", "Which river")) for a in asked)


def test_rollout_config_layers_and_validation(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("strategy: partial\nk: 6\npartial:\n  initial: 2\n  region: mixed\nagent:\n  max_turns: 2\n")
    cfg = load_rollout_config(recipe, ["agent.temperature=0.5"], k=4, split="test", limit=None, model=None)
    assert (cfg.strategy, cfg.k, cfg.split, cfg.partial.region, cfg.agent.max_turns) == ("partial", 4, "test", "mixed", 2)
    assert cfg.agent.temperature == 0.5
    with pytest.raises(InputError, match="exceeds the budget"):
        load_rollout_config(recipe, ["partial.initial=5"], k=4)
    with pytest.raises(InputError, match="strategy"):
        load_rollout_config(None, ["strategy=beam"])
    with pytest.raises(InputError, match="unknown key"):
        load_rollout_config(None, ["agent.turns=3"])


def test_finished_pool_is_extended_not_overwritten(tmp_path):
    _run(tmp_path / "ref.jsonl", model="fake")
    out = tmp_path / "pool.jsonl"
    _run(out, limit=2, model="fake")
    assert _pairs(out) == [(q, s) for q in "01" for s in (0, 1)]
    report, engine = _run(out, model="fake")  # a wider run: only the two new questions are generated
    assert (report.resumed, report.generated_now) == (4, 4)
    assert _pairs(out) == _pairs(tmp_path / "ref.jsonl")
    assert read_meta(out).accounting["tool_calls"] == read_meta(tmp_path / "ref.jsonl").accounting["tool_calls"]
    assert not shard_path(out).exists()
    before = out.read_bytes()
    with pytest.raises(InputError, match=r"pool.jsonl: exists with strategy='standard', this run has strategy='divinit'"):
        _run(out, "divinit", model="fake")
    with pytest.raises(InputError, match=r"exists with model='fake', this run has model='other'"):
        _run(out, model="other")
    assert out.read_bytes() == before and not shard_path(out).exists()


def test_rerun_with_nothing_left_finalizes_without_an_engine(tmp_path, monkeypatch):
    out = tmp_path / "pool.jsonl"
    ref, _ = _run(tmp_path / "ref.jsonl", model="fake")
    calls = {"n": 0}
    original = ShardWriter.finalize

    def dying(self, order, meta, trajectories=None):  # killed after the last group, before the pool was written
        calls["n"] += 1
        raise KeyboardInterrupt

    monkeypatch.setattr(ShardWriter, "finalize", dying)
    with pytest.raises(KeyboardInterrupt):
        _run(out, model="fake")
    monkeypatch.setattr(ShardWriter, "finalize", original)
    cfg = RolloutConfig(k=2, chunk_questions=1, model="fake", engine="vllm")
    report = run_rollout(cfg, out, questions=QS, progress=False)  # engine=None: it must not start one
    assert (report.resumed, report.generated_now) == (8, 0)
    assert _pairs(out) == _pairs(tmp_path / "ref.jsonl")
    meta = read_meta(out)
    assert meta.extra["engine"]["model"] == "fake" and meta.logprob_mode == "processed_logprobs"


def test_second_writer_on_a_pool_is_refused_and_the_lock_is_released(tmp_path):
    from trace_selector.rollout.writer import PoolLock, lock_path

    out = tmp_path / "pool.jsonl"
    _run(out, limit=2, model="fake")
    before = out.read_bytes()
    assert not lock_path(out).exists()  # released after a finished run
    with PoolLock(out):
        assert lock_path(out).read_text().strip().isdigit()
        # flock conflicts across open file descriptions, so the same process stands in for a second one
        with pytest.raises(InputError, match=r"pool.jsonl: another rollout \(pid \d+\) is writing this pool"):
            _run(out, model="fake")
    assert out.read_bytes() == before and not shard_path(out).exists()
    report, _ = _run(out, model="fake")  # lock released: the same command now extends the pool
    assert report.generated_now == 4 and not lock_path(out).exists()


def test_offset_takes_later_questions_with_split_positions_as_seeds(tmp_path):
    out = tmp_path / "sealed.jsonl"
    _, engine = _run(out, offset=2, model="fake")
    assert _pairs(out) == [(q, s) for q in "23" for s in (0, 1)]
    # seed = base + 1000 * position in the whole split + sample: positions 2 and 3, not 0 and 1
    assert {r.seed for r in engine.requests} == {2000, 2001, 3000, 3001}
    assert read_meta(out).extra["offset"] == 2
    with pytest.raises(InputError, match=r"exists with offset=2, this run has offset=0"):
        _run(out, model="fake")
    with pytest.raises(ValueError, match="offset must be >= 0"):
        RolloutConfig(offset=-1)


def test_mixed_order_counts_limits_across_families_and_a_pool_extends_in_either_order(tmp_path):
    from trace_selector.search.setting import Question

    qs = [Question(q.id, q.question, q.golden_answers, family=f) for q, f in zip(QS, "xxyy")]
    out = tmp_path / "pool.jsonl"

    def run(**over):
        cfg = RolloutConfig(**{"k": 2, "chunk_questions": 1, "model": "fake", **over})
        engine = FakeEngine(search_then_answer)
        run_rollout(cfg, out, engine=engine, toolbox=SearchTools(FakeIndex(), top_k=2), questions=qs, progress=False)
        return engine

    engine = run(order="mixed", limit=2)
    # the first two of the mixed order are one of each family; seeds keep the split positions 0 and 2
    assert _pairs(out) == [(q, s) for q in "02" for s in (0, 1)]
    assert {r.seed for r in engine.requests} == {0, 1, 2000, 2001}
    assert read_meta(out).extra["order"] == "mixed"
    engine = run(order="split", limit=3)  # extended in file order: only question 1 is new
    assert {r.seed for r in engine.requests} == {1000, 1001}
    assert _pairs(out) == [(q, s) for q in "012" for s in (0, 1)]
    assert [g.question_id for g in read_pool(out).groups] == ["0", "1", "2"]
    with pytest.raises(ValueError, match="order must be split or mixed"):
        RolloutConfig(order="shuffled")


def test_snapshots_write_the_finished_part_and_a_lost_shard_resumes_from_them(tmp_path, monkeypatch):
    ref, _ = _run(tmp_path / "ref.jsonl", model="fake")
    out = tmp_path / "pool.jsonl"
    seen = []
    original = ShardWriter.snapshot

    def recording(self, order, meta, trajectories=None):
        pool = original(self, order, meta, trajectories)
        seen.append((_pairs(out), read_meta(out).extra["snapshot"], self.path.exists()))
        if len(seen) == 2:
            raise KeyboardInterrupt  # the machine goes away after the second snapshot
        return pool

    monkeypatch.setattr(ShardWriter, "snapshot", recording)
    with pytest.raises(KeyboardInterrupt):
        _run(out, model="fake", snapshot_minutes=0)
    monkeypatch.setattr(ShardWriter, "snapshot", original)
    # one snapshot after each chunk (one question each), none after the last: finalize writes that
    assert seen == [([("0", 0), ("0", 1)], True, True),
                    ([(q, s) for q in "01" for s in (0, 1)], True, True)]
    assert read_meta(out).accounting["questions"] == 2
    shard_path(out).unlink()  # only the committed snapshot reaches the next machine
    report, _ = _run(out, model="fake", snapshot_minutes=0)
    assert (report.resumed, report.generated_now) == (4, 4)
    assert _pairs(out) == _pairs(tmp_path / "ref.jsonl")
    assert read_meta(out).extra["snapshot"] is False and not shard_path(out).exists()


def test_snapshots_off_and_bad_values(tmp_path, monkeypatch):
    def never(self, order, meta, trajectories=None):
        raise AssertionError("no snapshot was asked for")

    monkeypatch.setattr(ShardWriter, "snapshot", never)
    _run(tmp_path / "pool.jsonl", model="fake", snapshot_minutes=None)
    _run(tmp_path / "pool2.jsonl", model="fake", snapshot_minutes=60)  # a fake run takes well under an hour
    assert read_meta(tmp_path / "pool.jsonl").extra["snapshot"] is False
    with pytest.raises(ValueError, match="snapshot_minutes must be >= 0"):
        RolloutConfig(snapshot_minutes=-1)


def test_stop_file_ends_the_run_between_chunks_with_a_snapshot(tmp_path, monkeypatch):
    ref, _ = _run(tmp_path / "ref.jsonl", model="fake")
    out, stop = tmp_path / "pool.jsonl", tmp_path / "drain"
    original = ShardWriter.append_group
    appended = []

    def appending(self, trajectories, checkpoint):
        original(self, trajectories, checkpoint)
        appended.append(trajectories[0].question_id)
        if len(appended) == 2:
            stop.touch()  # asked to stop while the second chunk runs: that chunk still finishes

    monkeypatch.setattr(ShardWriter, "append_group", appending)
    report, _ = _run(out, model="fake", stop_file=str(stop), snapshot_minutes=None)
    assert report.stopped and (report.questions, report.trajectories, report.generated_now) == (2, 4, 4)
    assert "stopped at the stop file with 2 questions" in report.to_text()
    assert appended == ["0", "1"]
    assert _pairs(out) == [(q, s) for q in "01" for s in (0, 1)]
    assert read_meta(out).extra["snapshot"] is True and shard_path(out).exists()

    before = out.read_bytes()
    report, engine = _run(out, model="fake", stop_file=str(stop))  # the file is still there: nothing runs
    assert report.stopped and report.trajectories == 0 and not engine.requests
    assert "stopped before starting" in report.to_text() and out.read_bytes() == before

    stop.unlink()
    report, _ = _run(out, model="fake", stop_file=str(stop))
    assert not report.stopped and (report.resumed, report.generated_now) == (4, 4)
    assert _pairs(out) == _pairs(tmp_path / "ref.jsonl")
    assert read_meta(out).extra["snapshot"] is False and not shard_path(out).exists()


def test_stop_file_after_the_last_chunk_finishes_the_pool(tmp_path):
    out, stop = tmp_path / "pool.jsonl", tmp_path / "drain"

    class StopDuringTheLastChunk(FakeEngine):
        def generate(self, requests, progress=False):
            if self.batches:
                stop.touch()
            return super().generate(requests, progress)

    report, _ = _run(out, model="fake", stop_file=str(stop), chunk_questions=len(QS),
                     engine=StopDuringTheLastChunk(search_then_answer))
    assert not report.stopped and report.trajectories == 2 * len(QS) and stop.exists()
    assert read_meta(out).extra["snapshot"] is False and not shard_path(out).exists()

"""Slow end-to-end rollouts through the real vLLM engine with the smallest packaged model (SmolLM2-135M):
every strategy and the browsing agent on 2 questions x K=2 over a five-passage setting, one engine
shared by the whole module. Run: pytest tests/rollout/test_agent_vllm.py -m slow"""

from __future__ import annotations


import pytest

from tests.conftest import tiny_setting

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine():
    from trace_selector.engines import make_engine

    eng = make_engine("vllm:smollm2-135m", max_model_len=2048, seed=0)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def setting(engine, tmp_path_factory):
    # Built after the engine: bm25s (numba) must be imported after vLLM starts.
    return tiny_setting(tmp_path_factory.mktemp("tiny_setting"), pages=True)


RUNS = [
    ("standard", []),
    ("divinit", ["divinit.candidates=4", "divinit.max_tokens=48"]),
    ("partial", ["partial.initial=1", "partial.top_steps=1", "partial.branches=1", "partial.min_step=0"]),
    ("replicas", ["replicas.mode=ohg", "replicas.max_tokens=64", "agent.max_parallel=2"]),
    ("standard", ["agent_kind=browsing", "agent.ask_confidence=true"]),
    ("standard", ["agent.continuous=true"]),  # vLLM's engine loop, turns joining the running batch
]


@pytest.mark.parametrize("strategy,extra", RUNS, ids=["standard", "divinit", "partial", "replicas", "browsing",
                                                         "continuous"])
def test_strategy_end_to_end(engine, setting, tmp_path, strategy, extra):
    from trace_selector.records import read_meta, read_pool
    from trace_selector.records.summary import summarize_pool
    from trace_selector.rollout.runner import load_rollout_config, run_rollout

    # Short turns keep the module under a few minutes on 2 cores: no <think>, two tool turns.
    cfg = load_rollout_config(None, [f"strategy={strategy}", "agent.think=false", "agent.max_turns=2",
                                     "agent.max_tokens=48", "agent.max_context=2048", "agent.temperature=0.8",
                                     *extra], setting=str(setting), split="dev", limit=2, k=2, model="smollm2-135m")
    out = tmp_path / "pool.jsonl.gz"
    report = run_rollout(cfg, out, engine=engine, progress=False)
    assert report.trajectories == 4
    summary = summarize_pool(out)
    assert summary.to_text()
    pool = read_pool(out)
    assert sorted((t.question_id, t.sample_id) for g in pool.groups for t in g.trajectories) == [
        ("q1", 0), ("q1", 1), ("q2", 0), ("q2", 1)]
    meta = read_meta(out)
    assert meta.vllm_version and meta.logprob_mode == "processed_logprobs" and meta.strategy == strategy
    acct = meta.accounting
    assert acct["generated_tokens"] > 0 and acct["prompt_tokens"] > 0 and acct["cached_tokens"] > 0
    # structured outputs: every turn that ended before max_tokens is a well-formed action (a 135M model
    # sometimes writes a URL longer than 48 tokens, and a cut turn cannot parse)
    assert acct["complete_turn_valid_rate"] == 1.0, acct
    assert acct["invalid_turns"] <= acct["truncated_turns"], acct
    sampled = [s for g in pool.groups for t in g.trajectories for s in t.steps if s.raw_text and s.logprobs]
    assert all(len(s.logprobs) > 0 and s.prompt_tokens > 0 for s in sampled)
    if strategy == "partial":
        # SmolLM2 sometimes answers without searching, and a rollout without a step has no branch
        # point (the slot is then filled with a fresh rollout); with one, the single branch must exist.
        for g in pool.groups:
            parent = next(t for t in g.trajectories if t.sample_id == 0)
            children = [t for t in g.trajectories if t.parent_sample is not None]
            if any(s.logprobs and s.tool_start is not None for s in parent.steps):
                assert [(t.parent_sample, t.branch_step) for t in children] == [(0, 0)]
            else:
                assert children == []
    if "agent_kind=browsing" in extra:
        assert all(t.style == "browsing" for g in pool.groups for t in g.trajectories)
        assert any(t.confidence is not None for g in pool.groups for t in g.trajectories)

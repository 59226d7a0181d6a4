"""Strategies: MMR selection, diversity measures, region perplexity, and each strategy on a fake engine."""

from __future__ import annotations

import math

import pytest
from tests.conftest import QUESTIONS, FakeEngine, FakeIndex, search_then_answer, turn_of

from trace_selector.records import Document, Step, Trajectory
from trace_selector.rollout import prompts
from trace_selector.rollout.agent import Agent, AgentConfig
from trace_selector.rollout.strategies import STRATEGIES
from trace_selector.rollout.strategies.context import StrategyContext
from trace_selector.rollout.strategies.divinit import (
    DivInitConfig,
    atd,
    doc_overlap,
    jaccard_distance,
    mmr_select,
    qpd,
    word_set,
)
from trace_selector.rollout.strategies.partial import PartialConfig, select_steps, step_perplexity
from trace_selector.rollout.strategies.replicas import ReplicasConfig
from trace_selector.rollout.tools import SearchTools

# --- DivInit selection and diversity -----------------------------------------------------------------


def test_word_sets_and_jaccard():
    assert word_set("Capital, of FRANCE!") == {"capital", "of", "france"}
    assert jaccard_distance("a b", "a b c") == pytest.approx(1 / 3)
    assert jaccard_distance("x y", "A, b") == 1.0
    assert jaccard_distance("", "") == 0.0


def test_mmr_pure_diversity_known_picks():
    cands = ["a b", "a b c", "x y", "a x", "A b!"]
    # farthest pair first (distance 1.0: (0, 2) and (1, 2) tie -> lower index), then max-min distance
    assert mmr_select(cands, 2) == [0, 2]
    assert mmr_select(cands, 3) == [0, 2, 3]  # "a x" is 2/3 from both; "a b c" only 1/3 from "a b"
    assert mmr_select(cands, 10) == [0, 1, 2, 3]  # "A b!" repeats "a b": not distinct
    assert mmr_select(["same", "Same.", ""], 2) == [0]


def test_mmr_relevance_term():
    cands = ["capital france", "paris population", "eiffel tower height", "france capital city"]
    q = "What is the capital of France?"
    assert mmr_select(cands, 1, q) == [0]  # k = 1: most similar to the question
    # pure relevance after the farthest pair: the remaining candidate closest to the question
    assert mmr_select(cands, 3, q, lam=1.0) == [0, 1, 3]
    assert mmr_select(cands, 3, q, lam=0.0) == [0, 1, 2]


def _traj(sid, queries, docs=()):
    steps = [Step("search", q, documents=[Document(1, d, "", doc_id=d) for d in docs]) for q in queries]
    return Trajectory("q", "Q?", sid, "", steps)


def test_qpd_atd_overlap_known_values():
    group = [_traj(0, ["a b", "c"], ["d1", "d2"]), _traj(1, ["a c", "c"], ["d2"]), _traj(2, ["x"], [])]
    # turn 1: d(ab, ac)=2/3, d(ab, x)=1, d(ac, x)=1 -> 8/9; turn 2: d(c, c)=0
    assert qpd(group) == pytest.approx(8 / 9)
    assert atd(group) == pytest.approx((8 / 9 + 0) / 2)
    # doc sets {d1,d2}, {d2}, {}: pairs with something: 1/2, 0, 0
    assert doc_overlap(group) == pytest.approx(1 / 6)
    assert qpd([_traj(0, ["a"])]) is None


# --- partial rollout: region perplexity --------------------------------------------------------------


def _step(reason_p, tool_p, n=2):
    lps = [math.log(reason_p)] * n + [math.log(tool_p)] * n
    return Step("search", "q", logprobs=lps, tool_start=n)


def test_region_perplexity_on_synthetic_logprobs():
    ppl = step_perplexity(_step(0.5, 0.25))
    assert ppl["reasoning"] == pytest.approx(2.0)
    assert ppl["exploration"] == pytest.approx(4.0)
    assert ppl["homogeneous"] == pytest.approx(2 ** 1.5)
    invalid = step_perplexity(Step("invalid", "", logprobs=[math.log(0.5)] * 3))
    assert invalid["reasoning"] == pytest.approx(2.0) and invalid["exploration"] is None
    assert step_perplexity(Step("search", "q"))["homogeneous"] is None


class _R:  # just what select_steps reads
    def __init__(self, steps):
        self.steps = steps


def test_select_steps_by_region():
    rollouts = [
        _R([_step(0.5, 0.9), _step(0.1, 0.8)]),  # ppl reasoning 2, 10; exploration 1.11, 1.25
        _R([_step(0.9, 0.2), Step("search", "injected")]),  # reasoning 1.11, exploration 5
    ]
    assert select_steps(rollouts, 2, "reasoning") == [(0, 1), (0, 0)]
    assert select_steps(rollouts, 1, "exploration") == [(1, 0)]
    assert select_steps(rollouts, 2, "homogeneous") == [(0, 1), (1, 0)]
    assert select_steps(rollouts, 3, "mixed") == [(0, 1), (1, 0), (0, 0)]
    assert len(select_steps(rollouts, 10, "exploration")) == 3  # the step without logprobs never counts
    assert select_steps(rollouts, 2, "reasoning", min_step=1) == [(0, 1)]


# --- strategies on the fake engine -------------------------------------------------------------------


def _ctx(policy=search_then_answer, k=3, options=None, **agent_cfg):
    engine = FakeEngine(policy)
    agent = Agent(engine, SearchTools(FakeIndex(), top_k=2), AgentConfig(**agent_cfg))
    return engine, StrategyContext(agent, k, seed=7, options=options,
                                   positions={q.id: i for i, q in enumerate(QUESTIONS)})


def test_standard_runs_only_requested_samples():
    engine, ctx = _ctx()
    groups = STRATEGIES["standard"](ctx, QUESTIONS[:2], [[0, 2], [1]])
    assert [[r.sample_id for r in g] for g in groups] == [[0, 2], [1]]
    assert engine.batches == [3, 3]
    assert groups[0][1].seed == 7 + 2  # seed = base + 1000 * position + sample


def test_divinit_seeds_first_queries_by_mmr():
    engine, ctx = _ctx(options=DivInitConfig(candidates=4))
    [group] = STRATEGIES["divinit"](ctx, QUESTIONS[:1], [[0, 1, 2]])
    # proposals: "capital France", "Paris city", "France capital", "Danube river" (3 repeats 1)
    firsts = [r.steps[0].content for r in group]
    assert firsts == ["capital France", "Paris city", "Danube river"]
    assert all(r.steps[0].logprobs is None for r in group)  # injected, not sampled
    assert [r.extra["divinit_query"] for r in group] == firsts
    assert ctx.stats["divinit_filled"] == 0 and ctx.stats["divinit_proposal_calls"] == 1
    prompt = engine.decode(engine.requests[0].prompt_token_ids)
    assert prompt.endswith(prompts.LIST_PREFILL) and "Write 4 different search queries" in prompt


def test_divinit_fills_with_standard_samples():
    def policy(text, req):
        if "One per line, numbered" in text:
            return " capital France\n2. France capital"
        return search_then_answer(text, req)

    engine, ctx = _ctx(policy, options=DivInitConfig(candidates=4))
    [group] = STRATEGIES["divinit"](ctx, QUESTIONS[:1], [[0, 1, 2]])
    assert ctx.stats["divinit_filled"] == 2
    assert group[1].extra.get("divinit_fill") and group[1].steps[0].logprobs is not None


def two_searches(text, req):
    """Search twice, then answer."""
    t = turn_of(text)
    return "<think>a</think><search>France</search>" if t == 0 else (
        "<think>b</think><search>Paris</search>" if t == 1 else "<think>c</think><answer>Paris</answer>")


def test_partial_branches_from_token_identical_prefix():
    def logprob(i, ch):  # low probability on the query characters of the second search
        return -2.0 if ch in "Pris" else -0.1

    engine = FakeEngine(two_searches, logprob=logprob)
    agent = Agent(engine, SearchTools(FakeIndex(), top_k=1), AgentConfig(max_turns=3))
    ctx = StrategyContext(agent, 4, options=PartialConfig(initial=1, top_steps=1, branches=2, region="exploration"))
    [group] = STRATEGIES["partial"](ctx, QUESTIONS[:1], [[0, 1, 2, 3]])
    parent, b1, b2, fresh = group
    assert [r.sample_id for r in group] == [0, 1, 2, 3]
    assert (b1.parent_sample, b1.branch_step) == (0, 1) and (b2.parent_sample, b2.branch_step) == (0, 1)
    assert fresh.parent_sample is None and ctx.stats["partial_fresh_fill"] == 1
    assert b1.steps[0] == parent.steps[0]  # inherited step
    # the branch's first request is the parent's prompt at step 1, token for token, and mostly cached
    start = parent.turn_starts[1]
    branch_reqs = [q for q in engine.requests if q.prompt_token_ids == parent.prompt_ids[:start]]
    # the parent's own turn 2, the two branches, and the fresh fill (the fake policy is deterministic)
    assert len(branch_reqs) == 4
    assert b1.steps[1].cached_tokens >= start - 4
    t = b1.to_trajectory()
    assert (t.parent_sample, t.branch_step) == (0, 1)


def test_partial_saves_computed_tokens_vs_standard():
    def run(name, options):
        engine = FakeEngine(two_searches, logprob=lambda i, ch: -2.0 if ch in "Pris" else -0.1)
        agent = Agent(engine, SearchTools(FakeIndex(), top_k=1), AgentConfig(max_turns=3))
        ctx = StrategyContext(agent, 4, options=options)
        [group] = STRATEGIES[name](ctx, QUESTIONS[:1], [[0, 1, 2, 3]])
        return group, agent.accounting.engine

    _, std = run("standard", None)
    group, par = run("partial", PartialConfig(initial=1, top_steps=1, branches=3, min_step=1))
    assert [r.branch_step for r in group] == [None, 1, 1, 1]
    assert (std.requests, par.requests) == (12, 9)  # branches skip the inherited first turn
    assert par.generated_tokens < std.generated_tokens
    assert par.computed_tokens < std.computed_tokens


def test_partial_defaults_are_parallelmuse_at_n8_and_may_branch_at_step_0():
    # The first query is the least sure (low probability on "France"): ParallelMuse's step-0 branch.
    engine = FakeEngine(two_searches, logprob=lambda i, ch: -2.0 if ch in "Fnce" else -0.1)
    agent = Agent(engine, SearchTools(FakeIndex(), top_k=1), AgentConfig(max_turns=3))
    ctx = StrategyContext(agent, 8, options=None)  # no partial section: the defaults
    [group] = STRATEGIES["partial"](ctx, QUESTIONS[:1], [list(range(8))])
    cfg = PartialConfig()
    assert (cfg.initial, cfg.top_steps, cfg.branches, cfg.min_step) == (1, 2, 3, 0)
    # M = 1 initial, k = 2 points x b = 3 branches (step 0 first, by perplexity), one fresh fill
    assert [(r.parent_sample, r.branch_step) for r in group] == [(None, None)] + [(0, 0)] * 3 + [(0, 1)] * 3 + [(None, None)]
    assert ctx.stats["partial_branches"] == 6 and ctx.stats["partial_fresh_fill"] == 1
    # the old setting never branches at step 0
    assert select_steps([group[0]], 2, "exploration", min_step=1) == [(0, 1)]


def test_replicas_ohg_appends_instructions_and_rig_does_not():
    engine, ctx = _ctx(options=ReplicasConfig(mode="ohg"))
    [group] = STRATEGIES["replicas"](ctx, QUESTIONS[:1], [[0, 1, 2]])
    assert [r.extra["strategy_instruction"] for r in group] == ["capital France", "Paris city", "France capital"]
    first_turn = [engine.decode(q.prompt_token_ids) for q in engine.requests[1:4]]
    assert all(prompts.STRATEGY_SUFFIX.format(instruction=i) in p
               for i, p in zip(["capital France", "Paris city", "France capital"], first_turn))
    engine, ctx = _ctx(options=ReplicasConfig(mode="rig"))
    [group] = STRATEGIES["replicas"](ctx, QUESTIONS[:1], [[0, 1, 2]])
    assert len({tuple(q.prompt_token_ids) for q in engine.requests[:3]}) == 1  # identical prompts
    assert [r.extra["replica"] for r in group] == ["rig"] * 3


def test_coupled_strategies_need_whole_groups():
    _, ctx = _ctx()
    with pytest.raises(ValueError, match="all 3 samples"):
        STRATEGIES["partial"](ctx, QUESTIONS[:1], [[1, 2]])


def test_strategy_config_validation():
    with pytest.raises(ValueError, match="region"):
        PartialConfig(region="tools")
    with pytest.raises(ValueError, match="lam"):
        DivInitConfig(lam=1.5)
    with pytest.raises(ValueError, match="mode"):
        ReplicasConfig(mode="both")


def test_divinit_proposal_size_exceeds_k():
    from trace_selector.rollout.strategies.divinit import n_candidates

    assert n_candidates(DivInitConfig(), 4) == 16 and n_candidates(DivInitConfig(), 16) == 32
    assert n_candidates(DivInitConfig(candidates=5), 4) == 5
    with pytest.raises(ValueError, match=r"divinit.candidates \(3\) must exceed k \(3\)"):
        n_candidates(DivInitConfig(candidates=3), 3)
    _, ctx = _ctx(options=DivInitConfig(candidates=3))
    with pytest.raises(ValueError, match="must exceed k"):
        STRATEGIES["divinit"](ctx, QUESTIONS[:1], [[0, 1, 2]])

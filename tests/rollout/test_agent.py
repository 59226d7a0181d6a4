"""ReAct agent: tag parsing, grammars, token-identical prompts, recording, forced answers, TIPEX."""

from __future__ import annotations

import re

import pytest
from tests.conftest import QUESTIONS, FakeEngine, FakeIndex, always_search, search_then_answer, turn_of

from trace_selector.records import trajectory_from_dict, trajectory_to_dict
from trace_selector.rollout import prompts
from trace_selector.rollout.agent import Agent, AgentConfig, char_to_token, parse_turn
from trace_selector.rollout.tools import SearchTools

WEBQA = ("search", "answer")


# --- parsing -----------------------------------------------------------------------------------------


def test_parse_search_answer_and_invalid():
    t = parse_turn("<think>hm</think>\n<search>  capital\n of France </search>", WEBQA)
    assert (t.kind, t.calls, t.tool_start) == ("tool", [("search", "capital of France")], 18)
    t = parse_turn("<think>x</think><answer> Paris </answer>", WEBQA)
    assert (t.kind, t.answer, t.tool_start) == ("answer", "Paris", 16)
    assert parse_turn("I think it is Paris.", WEBQA).kind == "invalid"
    assert parse_turn("<search>   </search>", WEBQA).kind == "invalid"  # empty query
    assert parse_turn("<search>unclosed", WEBQA).kind == "invalid"
    assert parse_turn("<open>x</open>", WEBQA).kind == "invalid"  # not a WebQA action


def test_parse_first_action_wins_and_parallel_searches():
    t = parse_turn("<search>a</search><answer>b</answer>", WEBQA)
    assert (t.kind, t.calls) == ("tool", [("search", "a")])
    text = "<search>a</search>\n<search>b</search><search>a</search><search>c</search>"
    assert parse_turn(text, WEBQA, max_parallel=1).calls == [("search", "a")]
    # duplicates are dropped, the cap counts distinct queries
    assert parse_turn(text, WEBQA, max_parallel=2).calls == [("search", "a"), ("search", "b")]
    assert parse_turn(text, WEBQA, max_parallel=5).calls == [("search", "a"), ("search", "b"), ("search", "c")]
    # an answer after searches ends the parallel block
    assert parse_turn("<search>a</search><answer>b</answer><search>c</search>", WEBQA, 3).calls == [("search", "a")]


def test_action_regex_accepts_one_action_only():
    one = re.compile(prompts.action_regex(WEBQA))
    assert one.fullmatch("<think>plan</think>\n<search>Budapest river</search>")
    assert one.fullmatch("<think></think><answer>Danube</answer>")
    assert not one.fullmatch("<search>Budapest river</search>")  # thinking required
    assert not one.fullmatch("<think>a</think><search>x</search><search>y</search>")
    assert not one.fullmatch("<think>a</think><search> </search>")
    assert not one.fullmatch("<think>a <b</think><answer>x</answer>")
    assert not one.fullmatch("<think>a</think><search>" + "w " * 13 + "</search>")  # at most 12 words
    assert not one.fullmatch("<think>" + "w " * 41 + "</think><answer>x</answer>")  # at most 40 words
    par = re.compile(prompts.action_regex(WEBQA, max_parallel=3))
    assert par.fullmatch("<think>a</think><search>x</search>\n<search>y</search><search>z</search>")
    assert not par.fullmatch("<think>a</think>" + "<search>x</search>" * 4)
    forced = re.compile(prompts.action_regex(("answer",)))
    assert not forced.fullmatch("<think>a</think><search>x</search>")
    assert re.compile(prompts.action_regex(WEBQA, think=False)).fullmatch("<answer>x</answer>")
    assert re.fullmatch(prompts.confidence_regex(), "100") and not re.fullmatch(prompts.confidence_regex(), "101")


def test_numbered_list_and_confidence_parsing():
    text = "1. capital France\n2) Paris city\nsome chatter\n3: \"France capital\"\n4.   \n10. last"
    assert prompts.parse_numbered_list(text) == ["capital France", "Paris city", "France capital", "last"]
    assert prompts.parse_confidence("85") == pytest.approx(0.85)
    assert prompts.parse_confidence(" 250%") == 1.0
    assert prompts.parse_confidence("none") is None


def test_char_to_token_maps_offsets():
    eng = FakeEngine(search_then_answer)
    ids = eng.encode("<think>x</think><search>q</search>")
    assert char_to_token(eng, ids, 16) == 16
    assert char_to_token(eng, ids, 0) == 0
    assert eng.decode(ids[char_to_token(eng, ids, 16):]).startswith("<search>")


# --- the loop ----------------------------------------------------------------------------------------


def _agent(policy, **cfg):
    engine = FakeEngine(policy, eos=cfg.pop("eos", False))
    agent = Agent(engine, SearchTools(FakeIndex(), top_k=2), AgentConfig(**cfg))
    return engine, agent


def test_rollouts_are_batched_and_recorded():
    engine, agent = _agent(search_then_answer, max_turns=3)
    rollouts = [agent.start(q.id, q.question, q.golden_answers, s) for q in QUESTIONS for s in range(2)]
    agent.run(rollouts)
    assert engine.batches == [6, 6]  # every turn of every trajectory goes in one engine call
    answers = {(r.question_id, r.sample_id): r.answer for r in rollouts}
    assert answers[("0", 1)] == "Paris" and answers[("1", 0)] == "Danube"
    r = rollouts[0]
    assert r.finish_reason == "answer" and r.turns == 2
    [step] = r.steps
    assert step.action == "search" and step.content == "What is the capital of France"
    assert [(d.rank, d.doc_id, d.title) for d in step.documents] == [(1, "d1", "Paris"), (2, "d2", "France")]
    assert step.search_result.startswith("Doc 1 (Title: Paris) Paris is the capital")
    assert len(step.logprobs) == len(step.raw_text)  # one per sampled (character) token
    assert step.raw_text[step.tool_start:].startswith("<search>")
    assert step.prompt_tokens > 0 and step.cached_tokens is not None
    # the recorded trajectory survives the pool record round trip
    t = r.to_trajectory()
    # (log-probabilities are stored to 3 decimals, so the first trip rounds, the second is exact)
    once = trajectory_from_dict(trajectory_to_dict(t))
    assert trajectory_from_dict(trajectory_to_dict(once)) == once
    assert once.steps[0].logprobs == pytest.approx(t.steps[0].logprobs, abs=5e-4)
    assert once.answer == t.answer and len(once.steps) == len(t.steps)
    assert agent.accounting.engine.requests == 12 and agent.accounting.tool_calls == 6


def test_prompts_extend_token_identically_and_hit_the_cache():
    engine, agent = _agent(search_then_answer)
    r = agent.start("0", QUESTIONS[0].question, ["Paris"], 0)
    agent.run([r])
    first, second = engine.requests
    assert second.prompt_token_ids[: len(first.prompt_token_ids)] == first.prompt_token_ids
    # the second turn's prompt = first prompt + sampled ids + encoded observation, nothing retokenised
    gen = engine.encode(r.steps[0].raw_text)
    obs = engine.encode(prompts.observation(r.steps[0].search_result))
    assert second.prompt_token_ids == first.prompt_token_ids + gen + obs
    assert r.steps[0].cached_tokens == 0
    cached = (len(first.prompt_token_ids) + len(gen)) // 4 * 4
    assert agent.accounting.engine.cached_tokens == cached


def test_invalid_action_then_forced_answer_structured():
    seen = []

    def policy(text, req):
        seen.append(req.regex)
        if req.regex and "search" not in req.regex:
            return "<think>done</think><answer>Nile</answer>"
        return "I am not sure." if turn_of(text) == 0 else "<think>x</think><search>river</search>"

    engine, agent = _agent(policy, max_turns=2)
    r = agent.start("9", "Longest river?", ["Nile"], 0)
    agent.run([r])
    assert [s.action for s in r.steps] == ["invalid", "search"]
    assert r.steps[0].search_result == prompts.invalid_action("webqa") and r.steps[0].tool_start is None
    assert prompts.invalid_action("webqa") in engine.decode(engine.requests[1].prompt_token_ids)
    assert r.answer == "Nile" and r.finish_reason == "forced" and r.turns == 3
    assert seen[-1] == prompts.action_regex(("answer",))  # only the answer action is allowed
    assert prompts.FORCE_ANSWER in engine.decode(engine.requests[-1].prompt_token_ids)


def test_forced_answer_unstructured_prefills_the_answer_tag():
    engine, agent = _agent(always_search, max_turns=2, structured=False)
    r = agent.start("9", "Longest river?", ["Nile"], 0)
    agent.run([r])
    assert [s.content for s in r.steps] == ["river 0", "river 1"]
    assert engine.decode(engine.requests[-1].prompt_token_ids).endswith("<answer>")
    assert (r.answer, r.finish_reason) == ("Nile", "forced")
    assert all(req.regex is None for req in engine.requests)


def test_confidence_and_trailing_eos():
    engine, agent = _agent(search_then_answer, ask_confidence=True, eos=True)
    r = agent.start("0", QUESTIONS[0].question, ["Paris"], 0)
    agent.run([r])
    assert r.confidence == pytest.approx(0.85)
    assert engine.requests[-1].max_tokens == 4
    # EOS is recorded in the log-probabilities but not carried into the continuing prompt
    assert 0 not in engine.requests[-1].prompt_token_ids


@pytest.mark.parametrize("concurrent", [True, False])
def test_tipex_parallel_searches(concurrent):
    def policy(text, req):
        if turn_of(text) == 0:
            return "<think>two</think><search>France</search>\n<search>Danube</search>"
        return "<answer>Paris</answer>"

    engine, agent = _agent(policy, max_parallel=2, concurrent_tools=concurrent)
    r = agent.start("0", QUESTIONS[0].question, ["Paris"], 0)
    agent.run([r])
    assert [s.content for s in r.steps] == ["France", "Danube"]
    assert r.steps[0].raw_text is not None and r.steps[1].raw_text is None  # one sampled turn
    assert r.step_turn == [0, 0]
    assert r.extra["parallel_turns"][0]["mode"] == ("concurrent" if concurrent else "sequential")
    assert turn_of(engine.decode(engine.requests[1].prompt_token_ids)) == 2
    assert prompts.PARALLEL_HINT.format(n=2) in engine.decode(engine.requests[0].prompt_token_ids)
    assert "</search>" not in engine.requests[0].stop  # several searches may follow each other


def test_context_limit_forces_answer():
    engine, agent = _agent(always_search, max_turns=10, max_context=1200, max_tokens=100)
    r = agent.start("9", "Longest river?", ["Nile"], 0)
    agent.run([r])
    assert r.finish_reason in ("forced", "context")
    assert all(len(q.prompt_token_ids) + q.max_tokens <= 1200 for q in engine.requests)


def test_agent_config_validation():
    with pytest.raises(ValueError, match="max_turns"):
        AgentConfig(max_turns=0)
    with pytest.raises(ValueError, match="top_p"):
        AgentConfig(top_p=0)
    with pytest.raises(ValueError, match="max_context"):
        AgentConfig(max_context=100, max_tokens=160)


def test_truncated_turns_are_counted_apart_from_invalid_actions():
    from trace_selector.rollout.runner import action_stats

    def rambles(prompt, request):  # first turn a URL too long for max_tokens, then a short answer
        if turn_of(prompt) == 0:
            return "<think>x</think><search>" + "https://example.org/" + "a" * 200 + "</search>"
        return "<think>y</think><answer>Paris</answer>"

    engine, agent = _agent(rambles, max_turns=3, max_tokens=60)
    r = agent.start("0", QUESTIONS[0].question, ["Paris"], 0)
    agent.run([r])
    assert [s.action for s in r.steps] == ["invalid"] and r.answer == "Paris"
    assert r.extra["truncated_turns"] == 1
    stats = action_stats([r.to_trajectory()])
    assert (stats["turns"], stats["invalid_turns"], stats["truncated_turns"]) == (2, 1, 1)
    assert stats["valid_action_rate"] == 0.5 and stats["complete_turn_valid_rate"] == 1.0


class ContinuousEngine(FakeEngine):
    """`FakeEngine` with the continuous-batching entry point: one request finishes per engine step,
    the one submitted last first (as a short completion overtakes long ones in vLLM's running batch),
    so a trajectory's later turns run while other trajectories still wait for their first."""

    def __init__(self, policy, **kw):
        super().__init__(policy, **kw)
        self.order: list[tuple[str, int]] = []

    def generate_continuous(self, first, on_result):
        queue = list(first)
        while queue:
            key, request = queue.pop()
            [result] = self.generate([request])
            self.order.append((key.question_id, key.turns))
            queue.extend(on_result(key, result))


@pytest.mark.parametrize("policy,turns", [(search_then_answer, 3), (always_search, 2)])
def test_continuous_batching_records_what_turn_batching_records(policy, turns):
    """Same engine policy, both loops: identical trajectories, accounting and tool calls; only the
    grouping differs (the continuous loop starts a trajectory's next turn before others end theirs)."""
    runs = {}
    for continuous in (False, True):
        engine = ContinuousEngine(policy)
        agent = Agent(engine, SearchTools(FakeIndex()), AgentConfig(max_turns=turns, continuous=continuous))
        rollouts = [agent.start(q.id, q.question, q.golden_answers, s) for q in QUESTIONS for s in range(2)]
        agent.run(rollouts)
        runs[continuous] = (engine, agent, [r.to_trajectory() for r in rollouts])
    (e0, a0, t0), (e1, a1, t1) = runs[False], runs[True]

    def record(t):  # what the prefix cache served depends on the order requests came in, nothing else
        d = trajectory_to_dict(t)
        for step in d["steps"]:
            step.pop("cached_tokens", None)
        return d

    assert [record(t) for t in t0] == [record(t) for t in t1]
    assert a0.accounting.engine.requests == a1.accounting.engine.requests
    assert a0.accounting.engine.generated_tokens == a1.accounting.engine.generated_tokens
    assert a0.accounting.tool_calls == a1.accounting.tool_calls
    assert e0.order == [] and set(e1.batches) == {1}
    # A second turn was submitted while first turns of other trajectories were still waiting.
    first_second = next(i for i, (_, turn) in enumerate(e1.order) if turn > 0)
    assert any(turn == 0 for _, turn in e1.order[first_second:])


def test_continuous_falls_back_to_turn_batches_without_engine_support():
    engine = FakeEngine(search_then_answer)
    agent = Agent(engine, SearchTools(FakeIndex()), AgentConfig(max_turns=3, continuous=True))
    rollouts = [agent.start(q.id, q.question, q.golden_answers, 0) for q in QUESTIONS]
    agent.run(rollouts)
    assert engine.batches == [3, 3] and all(r.done for r in rollouts)

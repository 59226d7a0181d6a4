"""AggAgent: its inspection tools against values worked out by hand from the reference definitions
(ROUGE-L recall, top <= 10 hits cut to 150 words, segments of <= 5 steps cut to 600 words), and the
agent loop on a scripted engine (tool results fed back, free-form finish, iteration cap, context)."""

from __future__ import annotations

import re

import pytest

from trace_selector.baselines import inspection, prompts
from trace_selector.baselines.aggagent import AggAgent, parse_action, run_tool
from trace_selector.baselines.llm import Chat, LLMConfig
from trace_selector.evaluate import score_pick
from trace_selector.records import Step, Trajectory

from tests.conftest import ScriptedEngine, make_group


def long_traj(n_steps=6, words=200):
    steps = [Step("search", f"query {i}", search_result=" ".join(f"w{i}x{j}" for j in range(words)))
             for i in range(n_steps)]
    return Trajectory("q", "Q?", 0, "A", steps=steps, final_text="So the answer is A. <answer>A</answer>")


# --- tools ----------------------------------------------------------------------------------------

def test_rouge_l_recall_by_hand():
    text = "The capital city of France is Paris."
    assert inspection.rouge_l_recall("capital of France", text) == 1.0  # capital .. of france, in order
    assert inspection.rouge_l_recall("France capital", text) == 0.5  # LCS 1 of 2 (order matters)
    assert inspection.rouge_l_recall("Berlin Bonn Paris", text) == pytest.approx(1 / 3)
    assert inspection.rouge_l_recall("", text) == 0.0 and inspection.rouge_l_recall("x", "") == 0.0


def test_messages_number_calls_results_and_final():
    t = make_group().trajectories[1]
    msgs = inspection.messages_of(t)
    assert [m.role for m in msgs] == ["assistant", "tool", "assistant"]
    assert msgs[0].content == "[search] capital of France 1" and "is London" in msgs[1].content
    assert msgs[2].content.startswith("The documents say London.")


def test_search_trajectory_ranks_filters_and_cuts():
    trajs = make_group().trajectories
    out = inspection.search_trajectory(trajs, 2, "capital France London")
    # step 2 (tool): "Doc 1 (Title: France) The capital of France is London." -> recall 1.0 ranks first;
    # step 1 has "capital of France 1" -> 2/3; step 3 "The documents say London." -> 1/3.
    assert [int(s) for s in re.findall(r"^step (\d+)", out, re.M)] == [2, 1, 3]
    assert "score 1.000" in out and "score 0.667" in out and "score 0.333" in out
    only_tool = inspection.search_trajectory(trajs, 2, "capital France London", role="tool")
    assert re.findall(r"^step (\d+)", only_tool, re.M) == ["2"]
    assert "no match" in inspection.search_trajectory(trajs, 2, "Berlin")
    assert "must be 1-3" in inspection.search_trajectory(trajs, 4, "x")
    # Hits are cut to 150 words, and at most 10 are returned even when more are asked for.
    t = long_traj(n_steps=12)
    hits = inspection.search_trajectory([t], 1, "query", k=50)
    assert len(re.findall(r"^step ", hits, re.M)) == 10
    tool_hit = inspection.search_trajectory([t], 1, "w0x0 w0x1", role="tool")
    assert tool_hit.count("w0x") == 150 and "[... truncated]" in tool_hit


def test_get_segment_and_solution_limits():
    t = long_traj(n_steps=6, words=700)  # 13 messages
    seg = inspection.get_segment([t], 1, 2, 11)
    assert re.findall(r"^step (\d+)", seg, re.M) == ["2", "3", "4", "5", "6"]  # at most 5 steps
    assert seg.count("w0x") == 600  # step 2 is the first tool result, cut to 600 words
    assert re.findall(r"^step (\d+)", inspection.get_segment([t], 1, 40, 50), re.M) == ["13"]
    assert inspection.get_solution([t], 1) == "[trajectory 1]\nSo the answer is A. <answer>A</answer>"
    g = make_group()
    assert inspection.get_solution(g.trajectories).count("[trajectory") == 3
    assert "Trajectory 2: 3 steps" in inspection.metadata(g.trajectories)


def test_parse_action_and_run_tool():
    trajs = make_group().trajectories
    a = parse_action('I should look. <tool>search_trajectory(2, "is London", "tool")</tool>')
    assert (a.name, a.args) == ("search_trajectory", [2, "is London", "tool"])
    assert "step 2 (tool" in run_tool(a, trajs)
    assert parse_action("<tool>get_solution()</tool>").args == []
    assert parse_action("<tool>get_segment(1, 1, 2)</tool>").args == [1, 1, 2]
    fin = parse_action("<finish><explanation>Doc says so.</explanation><answer> Paris </answer></finish>")
    assert (fin.name, fin.args[0]) == ("finish", "Paris")
    assert parse_action("<finish><explanation>x</explanation><answer></answer></finish>") is None
    assert parse_action("no call") is None
    assert "needs a trajectory number" in run_tool(parse_action("<tool>get_segment(1)</tool>"), trajs)


def test_regex_accepts_calls_and_finish():
    rx = prompts.aggagent_regex(3, False)
    for ok in ['Think. <tool>get_solution()</tool>', '<tool>get_solution(2)</tool>',
               '<tool>search_trajectory(3, "a b", "tool")</tool>', '<tool>get_segment(1, 2, 6)</tool>',
               'x <finish><explanation>e</explanation><answer>Paris</answer></finish>']:
        assert re.fullmatch(rx, ok), ok
    assert not re.fullmatch(rx, '<tool>get_solution(4)</tool>')
    assert not re.fullmatch(prompts.aggagent_regex(3, True), '<tool>get_solution()</tool>')
    # A forced finish opens the block at once: thoughts go into the explanation.
    final = "<finish><explanation>both agree</explanation><answer>Paris</answer></finish>"
    assert re.fullmatch(prompts.aggagent_regex(3, True), final)
    assert not re.fullmatch(prompts.aggagent_regex(3, True), "Let me think. " + final)


# --- the agent loop -------------------------------------------------------------------------------

def agent(replies, **cfg):
    script = iter(replies)
    engine = ScriptedEngine(lambda p, r: next(script))
    cfg.setdefault("max_prompt_tokens", 20000)  # the fake tokenizer counts characters
    return engine, AggAgent(Chat(engine, LLMConfig(**cfg)))


def test_agent_inspects_then_finishes_on_a_candidate():
    engine, a = agent(['<tool>get_solution()</tool>', 'Check. <tool>search_trajectory(2, "is London", "tool")</tool>',
                       '<finish><explanation>A search result says London.</explanation><answer>London</answer></finish>'])
    [p] = a.select([make_group()])
    assert (p.sample_id, p.answer, p.parse_failures) == (1, "London", 0)
    assert p.extra["actions"] == ["get_solution()", "search_trajectory(2, 'is London', 'tool')", "finish"]
    assert p.extra["iterations"] == 3 and p.extra["max_iterations"] == 100 and not p.extra["forced_finish"]
    system = engine.decode(engine.requests[0].prompt_token_ids)
    flat = " ".join(system.split())
    assert "Tool results are ground truth; agent reasoning is not" in flat and "Count evidence, not trajectories" in flat
    assert "Verify at least one key claim" in flat and "Trajectory 3: 3 steps" in flat
    last = engine.decode(engine.requests[-1].prompt_token_ids)
    assert "[trajectory 2]\nThe documents say London." in last and "step 2 (tool, score 1.000)" in last
    assert a.describe()["max_iterations"] == 100


def test_iteration_cap_forces_finish_and_is_reported():
    engine, a = agent(["hmm", '<finish><explanation>e</explanation><answer>Paris</answer></finish>'],
                      agent_max_iterations=2)
    [p] = a.select([make_group()])
    assert p.answer == "Paris" and p.parse_failures == 1 and p.extra["forced_finish"] and p.extra["max_iterations"] == 2
    assert engine.requests[-1].regex == prompts.aggagent_regex(3, True)
    assert prompts.AGGAGENT_FINAL in engine.decode(engine.requests[-1].prompt_token_ids)
    # a forced reply that still does not finish: majority fallback
    _, a = agent(["hmm", "still nothing"], agent_max_iterations=2)
    [p] = a.select([make_group()])
    assert "majority" in p.fallback and p.parse_failures == 2


def test_full_context_forces_finish_early():
    engine, a = agent(['<finish><explanation>e</explanation><answer>Rome</answer></finish>'], action_tokens=300)
    engine.config = type("Cfg", (), {"max_model_len": 3400})()  # the prompt leaves no room for a tool result
    [p] = a.select([make_group()])
    assert p.extra["forced_finish"] and len(engine.requests) == 1


def test_free_form_answer_matching_no_candidate_is_kept():
    _, a = agent(['<finish><explanation>e</explanation><answer>Lyon</answer></finish>'])
    g = make_group(gold=("Lyon",))
    [p] = a.select([g])
    assert (p.sample_id, p.answer, p.extra["synthesized"]) == (None, "Lyon", True)
    assert score_pick(g, p) == (1.0, 1.0)

"""AggAgent: an aggregator agent that inspects the trajectories with tools and finishes with a
free-form solution (Lee et al. 2025; tools and limits in `baselines.inspection`, prompt principles in
`prompts.AGGAGENT_SYSTEM`).

Loop per question (all questions advance in lock step, one engine batch per iteration): the agent
writes thoughts and one tool call (``get_solution`` / ``search_trajectory`` / ``get_segment``) or
``finish``; the tool's result comes back as the next user message. The loop ends at finish, or after
`LLMConfig.agent_max_iterations` calls (the paper's agent allows 100), or when the conversation would
no longer fit the context with room for another reply: then, as in the reference code, a final user
message asks for the answer and only ``finish`` is allowed. A reply with no valid call costs an
iteration and counts as a parse failure.

The finish answer is free-form. It becomes a pick of the candidate it names (`llm.match_candidate`),
as the other aggregators; an answer that matches no candidate is kept as it is (``sample_id`` None,
``extra["synthesized"]``), which `scoring.score_pick` scores against the gold aliases. An agent that
never finishes falls back to the majority vote. `describe` reports the iteration cap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from trace_selector.baselines import inspection, prompts
from trace_selector.baselines.aggregators import Aggregator, candidates_of
from trace_selector.baselines.llm import match_candidate
from trace_selector.baselines.pick import majority_pick, pick_from
from trace_selector.records import QuestionGroup, Trajectory
from trace_selector.records.pick import Pick

_TOOL = re.compile(r"<tool>\s*(get_solution|search_trajectory|get_segment)\s*\((.*?)\)\s*(?:</tool>|$)", re.S)
_FINISH = re.compile(r"<finish>(.*?)(?:</finish>|$)", re.S)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S)
_ARG = re.compile(r'"([^"]*)"|(-?\d+)')


@dataclass(slots=True)
class Action:
    """One parsed reply: a tool call with its arguments, or finish with its answer."""

    name: str
    """get_solution, search_trajectory, get_segment or finish."""
    args: list[str | int] = field(default_factory=list)
    """Positional arguments (ints and quoted strings) of a tool call; [answer, solution] for finish."""


def parse_action(text: str) -> Action | None:
    """The first finish block or tool call in a reply (None when there is neither)."""
    fin, call = _FINISH.search(text), _TOOL.search(text)
    if fin and (call is None or fin.start() < call.start()):
        ans = _ANSWER.search(fin.group(1))
        answer = ans.group(1).strip() if ans else ""
        return Action("finish", [answer, fin.group(1).strip()]) if answer else None
    if call is None:
        return None
    args: list[str | int] = [m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _ARG.finditer(call.group(2))]
    return Action(call.group(1), args)


def run_tool(action: Action, trajs: list[Trajectory]) -> str:
    """Execute a tool call; bad arguments come back as a one-line error for the agent to read."""
    a = action.args
    ints = [x for x in a if isinstance(x, int)]
    strs = [x for x in a if isinstance(x, str)]
    if action.name == "get_solution":
        return inspection.get_solution(trajs, ints[0] if ints else None)
    if action.name == "search_trajectory":
        if not ints or not strs:
            return '[search_trajectory] needs a trajectory number and "words"'
        role = strs[1] if len(strs) > 1 and strs[1] in ("tool", "assistant") else None
        k = ints[1] if len(ints) > 1 else inspection.SEARCH_DEFAULT_K
        return inspection.search_trajectory(trajs, ints[0], strs[0], role, k)
    if len(ints) < 3:
        return "[get_segment] needs a trajectory number, a start step and an end step"
    return inspection.get_segment(trajs, ints[0], ints[1], ints[2])


@dataclass(slots=True)
class _Episode:
    group: QuestionGroup
    cands: list[Trajectory]
    messages: list[dict[str, str]]
    tokens_in: int = 0
    tokens_out: int = 0
    parse_failures: int = 0
    actions: list[str] = field(default_factory=list)
    answer: str | None = None
    solution: str = ""
    forced: bool = False
    cut_tokens: int = 0


class AggAgent(Aggregator):
    """Tool-using aggregator (see the module docstring)."""

    name = "aggagent"

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update(max_iterations=self.chat.cfg.agent_max_iterations, action_tokens=self.chat.cfg.action_tokens,
                   observation_tokens=self.chat.cfg.observation_tokens)
        return out

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        cfg = self.chat.cfg
        episodes = []
        for g in groups:
            cands = candidates_of(g)
            user = prompts.AGGAGENT_USER.format(question=g.question, metadata=inspection.metadata(cands), k=len(cands))
            episodes.append(_Episode(g, cands, [{"role": "system", "content": prompts.AGGAGENT_SYSTEM},
                                                {"role": "user", "content": user}]))
        budget = self.chat.prompt_budget(cfg.action_tokens)
        for it in range(1, cfg.agent_max_iterations + 1):
            active = [e for e in episodes if e.answer is None]
            if not active:
                break
            for e in active:
                # Last iteration, or no room for one more observation after this reply: finish now.
                room = budget - len(self._prompt_ids(e.messages)) - cfg.observation_tokens - cfg.action_tokens
                if it == cfg.agent_max_iterations or room < 0:
                    e.forced = True
                    e.messages.append({"role": "user", "content": prompts.AGGAGENT_FINAL})
            regexes = [prompts.aggagent_regex(len(e.cands), e.forced) for e in active]
            replies = self.chat([e.messages for e in active], cfg.action_tokens, regex=regexes,
                                stop=["</tool>", "</finish>"])
            for e, r in zip(active, replies):
                e.tokens_in += r.tokens_in
                e.tokens_out += r.tokens_out
                e.messages.append({"role": "assistant", "content": r.text.strip()})
                self._step(e, r.text)
            for e in active:
                if e.forced and e.answer is None:
                    e.answer = ""  # a forced finish that did not parse: stop, majority fallback below

        return [self._pick(e) for e in episodes]

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        return self.chat.engine.chat_token_ids(messages)

    def _step(self, e: _Episode, text: str) -> None:
        """Execute one reply: record finish, or append the tool's result as the next user message."""
        action = parse_action(text)
        if action is None or (e.forced and action.name != "finish"):
            e.parse_failures += 1
            e.actions.append("invalid")
            if not e.forced:
                e.messages.append({"role": "user", "content": prompts.AGGAGENT_INVALID})
            return
        if action.name == "finish":
            e.actions.append("finish")
            e.answer, e.solution = str(action.args[0]), str(action.args[1])
            return
        e.actions.append(f"{action.name}({', '.join(map(repr, action.args))})")
        observation, cut = self.chat.fit(run_tool(action, e.cands), self.chat.cfg.observation_tokens)
        e.cut_tokens += cut
        e.messages.append({"role": "user", "content": prompts.AGGAGENT_OBSERVATION.format(observation=observation)})

    def _pick(self, e: _Episode) -> Pick:
        kw: dict[str, Any] = dict(
            tokens_in=e.tokens_in, tokens_out=e.tokens_out, parse_failures=e.parse_failures,
            extra={"actions": e.actions, "iterations": len(e.actions), "forced_finish": e.forced,
                   "max_iterations": self.chat.cfg.agent_max_iterations, "cut_tokens": e.cut_tokens},
        )
        if not e.answer:
            return majority_pick(e.group, fallback="agent did not finish with an answer; majority vote", **kw)
        chosen = match_candidate(f"<answer>{e.answer}</answer>", e.cands)
        if chosen is not None:
            return pick_from(e.group, chosen, **kw)
        kw["extra"]["synthesized"] = True
        return Pick(e.group.question_id, None, e.answer, **kw)

"""AggAgent: an aggregator agent that inspects the trajectories with tools, then picks one answer.

Tools (prompt in `prompts.AGGAGENT_SYSTEM`): ``read_solution(i)`` (final turn and answer of candidate
i), ``read_steps(i, a, b)`` (steps a..b of candidate i), ``search("text")`` (literal search over all
candidates' queries, results and final turns), ``finish(i)`` (choose candidate i). One action per
turn, at most `LLMConfig.agent_max_turns` turns; on the last turn only ``finish`` is accepted (with
structured outputs it is the only thing the model can produce). An unparseable action costs a turn
and counts as a parse failure; an agent that never finishes falls back to the majority vote.

All questions advance in lock step, one engine batch per turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trace_selector.baselines import prompts
from trace_selector.baselines.aggregators import Aggregator, candidates_of
from trace_selector.baselines.heuristics import tool_calls
from trace_selector.baselines.pick import Pick, majority_pick, pick_from
from trace_selector.baselines.render import render_final, render_steps, search_trajectories
from trace_selector.records import QuestionGroup, Trajectory

_ACTION = re.compile(
    r"(read_solution|read_steps|search|finish)\s*\(\s*(.*?)\s*\)",
    re.S,
)


@dataclass(slots=True)
class Action:
    """One parsed tool call."""

    name: str
    args: list[str]


def parse_action(text: str) -> Action | None:
    """The first tool call in `text`, with its comma-separated arguments (quotes stripped)."""
    m = _ACTION.search(text)
    if m is None:
        return None
    name, raw = m.group(1), m.group(2)
    if name == "search":
        q = re.match(r"""^["'](.*)["']$""", raw, re.S)
        return Action(name, [q.group(1) if q else raw])
    return Action(name, [a.strip() for a in raw.split(",") if a.strip()])


@dataclass(slots=True)
class _Episode:
    group: QuestionGroup
    cands: list[Trajectory]
    messages: list[dict[str, str]]
    tokens_in: int = 0
    tokens_out: int = 0
    parse_failures: int = 0
    actions: list[str] = field(default_factory=list)
    chosen: Trajectory | None = None


class AggAgent(Aggregator):
    """Tool-using aggregator (see the module docstring)."""

    name = "aggagent"

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        cfg = self.chat.cfg
        episodes = []
        for g in groups:
            cands = candidates_of(g)
            listing = "\n".join(f"{i}: {t.answer} ({tool_calls(t)} tool calls)" for i, t in enumerate(cands, 1))
            system = prompts.AGGAGENT_SYSTEM.format(k=len(cands), candidates=listing, turns=cfg.agent_max_turns)
            user = prompts.AGGAGENT_QUESTION.format(question=g.question)
            if cfg.agent_max_turns == 1:
                user += "\n" + prompts.AGGAGENT_LAST
            episodes.append(_Episode(g, cands, [{"role": "system", "content": system}, {"role": "user", "content": user}]))

        for turn in range(1, cfg.agent_max_turns + 1):
            active = [e for e in episodes if e.chosen is None]
            if not active:
                break
            last = turn == cfg.agent_max_turns
            regexes = [prompts.aggagent_regex(len(e.cands), last) for e in active]
            replies = self.chat([e.messages for e in active], cfg.action_tokens, regex=regexes)
            for e, r in zip(active, replies):
                e.tokens_in += r.tokens_in
                e.tokens_out += r.tokens_out
                e.messages.append({"role": "assistant", "content": r.text.strip()})
                observation = self._step(e, r.text, last)
                if e.chosen is None and not last:
                    left = cfg.agent_max_turns - turn
                    remaining = prompts.AGGAGENT_LAST if left == 1 else prompts.AGGAGENT_REMAINING.format(left=left)
                    e.messages.append({"role": "user", "content": prompts.AGGAGENT_OBSERVATION.format(observation=observation, remaining=remaining)})

        picks = []
        for e in episodes:
            kw = dict(tokens_in=e.tokens_in, tokens_out=e.tokens_out, parse_failures=e.parse_failures,
                      extra={"actions": e.actions, "turns": len(e.actions)})
            if e.chosen is None:
                picks.append(majority_pick(e.group, fallback="agent did not finish with a valid candidate; majority vote", **kw))
            else:
                picks.append(pick_from(e.group, e.chosen, **kw))
        return picks

    def _candidate(self, e: _Episode, arg: str) -> Trajectory | None:
        return e.cands[int(arg) - 1] if arg.isdigit() and 1 <= int(arg) <= len(e.cands) else None

    def _step(self, e: _Episode, text: str, last: bool) -> str:
        """Execute one action; returns the observation (sets `e.chosen` on a valid finish)."""
        action = parse_action(text)
        if action is None or (last and action.name != "finish"):
            e.parse_failures += 1
            e.actions.append("invalid")
            return prompts.AGGAGENT_INVALID
        e.actions.append(f"{action.name}({', '.join(action.args)})")
        cfg = self.chat.cfg
        if action.name == "search":
            out = search_trajectories(e.cands, action.args[0] if action.args else "")
            return self.chat.clip(out, cfg.observation_tokens)
        cand = self._candidate(e, action.args[0]) if action.args else None
        if cand is None:
            e.parse_failures += 1
            return f"No candidate {action.args[0] if action.args else ''}; candidates are 1 to {len(e.cands)}."
        if action.name == "finish":
            e.chosen = cand
            return ""
        if action.name == "read_solution":
            return self.chat.clip(render_final(cand), cfg.observation_tokens)
        nums = [int(a) for a in action.args[1:3] if a.isdigit()]
        start = nums[0] if nums else 1
        end = nums[1] if len(nums) > 1 else len(cand.steps)
        return self.chat.clip(render_steps(cand, start, end, cfg.doc_chars), cfg.observation_tokens)


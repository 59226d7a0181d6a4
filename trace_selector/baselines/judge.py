"""TIPEX rubric judge: an LLM scores a trajectory 0-2 on answer definiteness, evidence strength and
reasoning consistency (total 0-6). Three selection rules, as the TIPEX paper defines them over a
question's replicas (trajectories in sample_id order):

- ``global`` (judge_gs): judge every valid replica, pick the best total;
- ``first_valid`` (judge_fves, First Valid Early Stopping): return the first *valid* replica, with no
  judge call at all: the saving is that later replicas need not be read;
- ``top_k`` (judge_tks, Top-K Selection): judge only the first ceil(n/2) valid replicas (n = the
  question's replica count) and take the judge's best.

A replica is valid when it completed with an answer: a non-empty answer and a finish reason other
than a cut (`INCOMPLETE`: the forced answer turn hit max_tokens, or the context ran out). Every rule
applies this filter first, as TIPEX does; a cut-off replica is never judged or picked.

The judge reasons first (what the answer is, which result states it, whether the reasoning follows)
and then writes the bare scores inside ``<scores>`` (`prompts.JUDGE`); with `LLMConfig.constrained`
the reasoning may hold anything but ``<`` and the scores are forced into their lines
(`prompts.JUDGE_REGEX`). A judgement cut off by `LLMConfig.judge_tokens` before ``<scores>`` is
continued from what it wrote with only the scores allowed (``Pick.extra["forced_scores"]``).

Ties on the total are broken by a vote among the tied trajectories (`records.answers.vote`). A judgement that
does not parse is a parse failure and leaves that trajectory unscored; a question with no parsed
judgement, or without a valid replica, falls back to the majority vote.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Literal

from trace_selector.baselines import prompts
from trace_selector.baselines.aggregators import Aggregator, needs_call
from trace_selector.baselines.llm import Chat
from trace_selector.baselines.pick import majority_pick, pick_from
from trace_selector.baselines.render import render_transcript
from trace_selector.records import QuestionGroup, Trajectory
from trace_selector.records.answers import has_answer, vote
from trace_selector.records.pick import Pick

JudgeRule = Literal["global", "first_valid", "top_k"]
RULE_NAMES: dict[str, str] = {"global": "judge_gs", "first_valid": "judge_fves", "top_k": "judge_tks"}
CRITERIA = ("definiteness", "evidence", "consistency")
INCOMPLETE = frozenset({"length", "context"})
"""Finish reasons of a replica that was cut off rather than completed (`Trajectory.finish_reason`)."""

_LABELLED = [re.compile(rf"{c}\w*\s*[:=-]?\s*\**\s*([0-2])\b", re.I) for c in CRITERIA]


def parse_rubric(text: str) -> tuple[int, int, int] | None:
    """The three scores from a judgement: what follows its last ``<scores>`` if it has one (the
    reasoning before may name the criteria too), then the last labelled line of each criterion, else
    the first three digits 0-2 of that part."""
    _, tag, tail = text.rpartition("<scores>")
    part = tail if tag else text
    found = [p.findall(part) for p in _LABELLED]
    if all(found):
        return tuple(int(m[-1]) for m in found)  # type: ignore[return-value]
    digits = re.findall(r"(?<![\d.])([0-2])(?![\d.])", part)
    if len(digits) >= 3:
        return int(digits[0]), int(digits[1]), int(digits[2])
    return None


def is_valid(traj: Trajectory) -> bool:
    """A completed replica with an answer (see the module docstring)."""
    return has_answer(traj) and traj.finish_reason not in INCOMPLETE


def valid_replicas(group: QuestionGroup) -> list[Trajectory]:
    """Valid replicas in sample_id order."""
    return [t for t in sorted(group.trajectories, key=lambda t: t.sample_id) if is_valid(t)]


def tks_pool(group: QuestionGroup) -> list[Trajectory]:
    """The replicas TKS judges: the first ceil(n/2) valid ones, n = all replicas of the question."""
    return valid_replicas(group)[: math.ceil(len(group.trajectories) / 2)]


class Judge(Aggregator):
    """TIPEX judge with one selection rule (see the module docstring)."""

    def __init__(self, chat: Chat, rule: JudgeRule = "global"):
        super().__init__(chat)
        if rule not in RULE_NAMES:
            raise ValueError(f"rule must be one of {', '.join(RULE_NAMES)}, got {rule!r}")
        self.rule = rule
        self.name = RULE_NAMES[rule]

    def pool(self, group: QuestionGroup) -> list[Trajectory]:
        """The replicas this rule may judge and pick: the valid ones (TKS: its window of them)."""
        return tks_pool(group) if self.rule == "top_k" else valid_replicas(group)

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        if self.rule == "first_valid":  # FVES reads no transcript: no call, not even for a real choice
            picks = []
            for g in groups:
                valid = valid_replicas(g)
                if valid:
                    picks.append(pick_from(g, valid[0], extra={"judged": 0}))
                else:
                    picks.append(majority_pick(g, fallback="no valid completed replica; majority vote", extra={"judged": 0}))
            return picks
        picks: list[Pick | None] = [None] * len(groups)
        todo = []
        for i, g in enumerate(groups):
            pool = self.pool(g)
            if not pool:  # the validity filter left nothing to judge
                fallback = "no valid completed replica; majority vote" if any(has_answer(t) for t in g.trajectories) else None
                picks[i] = majority_pick(g, fallback=fallback, extra={"judged": 0})
            elif needs_call(pool, self.chat.cfg.skip_unanimous):
                todo.append(i)
            else:  # the valid replicas agree: any judgement would return that answer
                picks[i] = pick_from(g, pool[0], extra={"unanimous": True, "judged": 0})
        for i, pick in zip(todo, self._aggregate([groups[i] for i in todo])):
            picks[i] = pick
        return [p for p in picks if p is not None]

    def _judge(self, jobs: Sequence[tuple[QuestionGroup, Trajectory]]) -> list[tuple[tuple[int, int, int] | None, int, int, bool]]:
        """(scores or None, tokens in, tokens out, scores forced) per (group, trajectory): one batch of
        judgements, then one of score continuations for those cut before ``<scores>``."""
        cfg = self.chat.cfg
        convs = []
        for g, t in jobs:
            base = self.chat.prompt_tokens(prompts.JUDGE.format(question=g.question, transcript=""))
            transcript = self.chat.clip(render_transcript(t, cfg.doc_chars), self._fit(base, 1, cfg.judge_tokens))
            convs.append([{"role": "user", "content": prompts.JUDGE.format(question=g.question, transcript=transcript)}])
        replies = self.chat(convs, cfg.judge_tokens, regex=prompts.JUDGE_REGEX, stop=["</scores>"])
        out = [(r.text, r.tokens_in, r.tokens_out, False) for r in replies]
        cut = [i for i, r in enumerate(replies) if r.finish_reason == "length" and "<scores>" not in r.text]
        if cut:
            heads = [replies[i].text.rstrip() + "\n<scores>\n" for i in cut]
            tails = self.chat([convs[i] for i in cut], cfg.forced_answer_tokens, regex=prompts.JUDGE_SCORES_REGEX,
                              stop=["</scores>"], prefixes=heads)
            for i, head, r in zip(cut, heads, tails):
                text, tin, tout, _ = out[i]
                out[i] = (head + r.text, tin + r.tokens_in, tout + r.tokens_out, True)
        return [(parse_rubric(text), tin, tout, forced) for text, tin, tout, forced in out]

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        pools = [self.pool(g) for g in groups]
        # TKS with one valid replica in its window has nothing to compare: no call.
        jobs = [(gi, t) for gi, pool in enumerate(pools) if len(pool) > 1 or self.rule != "top_k" for t in pool]
        scores: list[dict[int, tuple[int, int, int] | None]] = [{} for _ in groups]
        cost = [[0, 0] for _ in groups]
        forced = [0] * len(groups)
        for (gi, t), (s, tin, tout, f) in zip(jobs, self._judge([(groups[gi], t) for gi, t in jobs])):
            scores[gi][t.sample_id] = s
            cost[gi][0] += tin
            cost[gi][1] += tout
            forced[gi] += f

        picks = []
        for gi, g in enumerate(groups):
            parsed = {sid: sum(s) for sid, s in scores[gi].items() if s is not None}
            kw = dict(
                tokens_in=cost[gi][0], tokens_out=cost[gi][1],
                parse_failures=sum(1 for s in scores[gi].values() if s is None),
                scores={sid: float(v) for sid, v in parsed.items()},
                extra={"rubric": {str(sid): list(s) if s else None for sid, s in scores[gi].items()},
                       "judged": len(scores[gi]), "forced_scores": forced[gi]},
            )
            if len(pools[gi]) == 1 and not scores[gi]:
                picks.append(pick_from(g, pools[gi][0], **kw))
            elif not parsed:
                reason = "no valid completed replica" if not pools[gi] else "no judgement parsed"
                picks.append(majority_pick(g, fallback=f"{reason}; majority vote", **kw))
            else:
                best = max(parsed.values())
                picks.append(pick_from(g, vote([t for t in pools[gi] if parsed.get(t.sample_id) == best])[0], **kw))
        return picks

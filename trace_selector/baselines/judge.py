"""TIPEX rubric judge: an LLM scores each trajectory 0-2 on answer definiteness, evidence strength
and reasoning consistency (total 0-6), and one of three rules turns scores into a selection:

- ``global`` (judge_gs): judge every answered trajectory, pick the best total;
- ``first_valid`` (judge_fves): judge trajectories in sample_id order and stop at the first whose
  total reaches `LLMConfig.judge_threshold` (saving the remaining calls); if none does, the best
  total among those judged;
- ``top_k`` (judge_tks): judge every trajectory, majority-vote among the `judge_top_k` best totals
  (ties in rank broken by sample_id).

Ties on the total are broken by a vote among the tied trajectories (`pick.vote`). A judgement that
does not parse is a parse failure and leaves that trajectory unscored (it cannot be selected by the
score); a question with no parsed judgement falls back to the majority vote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from trace_selector.baselines import prompts
from trace_selector.baselines.aggregators import Aggregator, candidates_of
from trace_selector.baselines.llm import Chat
from trace_selector.baselines.pick import Pick, majority_pick, pick_from, vote
from trace_selector.baselines.render import render_transcript
from trace_selector.records import QuestionGroup, Trajectory

JudgeRule = Literal["global", "first_valid", "top_k"]
RULE_NAMES: dict[str, str] = {"global": "judge_gs", "first_valid": "judge_fves", "top_k": "judge_tks"}
CRITERIA = ("definiteness", "evidence", "consistency")

_LABELLED = [re.compile(rf"{c}\w*\s*[:=-]?\s*\**\s*([0-2])\b", re.I) for c in CRITERIA]


def parse_rubric(text: str) -> tuple[int, int, int] | None:
    """The three scores from a judgement: labelled lines first, else the first three digits 0-2."""
    found = [p.search(text) for p in _LABELLED]
    if all(found):
        return tuple(int(m.group(1)) for m in found)  # type: ignore[union-attr,return-value]
    digits = re.findall(r"(?<![\d.])([0-2])(?![\d.])", text)
    if len(digits) >= 3:
        return int(digits[0]), int(digits[1]), int(digits[2])
    return None


class Judge(Aggregator):
    """TIPEX judge with one selection rule (see the module docstring)."""

    def __init__(self, chat: Chat, rule: JudgeRule = "global"):
        super().__init__(chat)
        if rule not in RULE_NAMES:
            raise ValueError(f"rule must be one of {', '.join(RULE_NAMES)}, got {rule!r}")
        self.rule = rule
        self.name = RULE_NAMES[rule]

    def _judge(self, jobs: Sequence[tuple[QuestionGroup, Trajectory]]) -> list[tuple[tuple[int, int, int] | None, int, int]]:
        """(scores or None, tokens in, tokens out) per (group, trajectory), in one batch."""
        convs = []
        for g, t in jobs:
            base = self.chat.count(prompts.JUDGE.format(question=g.question, transcript=""))
            transcript = self.chat.clip(render_transcript(t, self.chat.cfg.doc_chars), self._fit(base, 1))
            convs.append([{"role": "user", "content": prompts.JUDGE.format(question=g.question, transcript=transcript)}])
        replies = self.chat(convs, self.chat.cfg.judge_tokens, regex=prompts.JUDGE_REGEX)
        return [(parse_rubric(r.text), r.tokens_in, r.tokens_out) for r in replies]

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        cands = [candidates_of(g) for g in groups]
        scores: list[dict[int, tuple[int, int, int] | None]] = [{} for _ in groups]
        cost = [[0, 0] for _ in groups]
        accepted: list[Trajectory | None] = [None] * len(groups)

        def run(idx: list[int], pos: int | None) -> None:
            jobs = [(gi, t) for gi in idx for t in (cands[gi] if pos is None else cands[gi][pos : pos + 1])]
            for (gi, t), (s, tin, tout) in zip(jobs, self._judge([(groups[gi], t) for gi, t in jobs])):
                scores[gi][t.sample_id] = s
                cost[gi][0] += tin
                cost[gi][1] += tout
                if pos is not None and s is not None and sum(s) >= self.chat.cfg.judge_threshold and accepted[gi] is None:
                    accepted[gi] = t

        if self.rule == "first_valid":
            # One batch per position: question i's j-th judgement only happens if its first j failed.
            for pos in range(max((len(c) for c in cands), default=0)):
                active = [gi for gi in range(len(groups)) if accepted[gi] is None and pos < len(cands[gi])]
                if active:
                    run(active, pos)
        else:
            run(list(range(len(groups))), None)

        picks = []
        for gi, g in enumerate(groups):
            parsed = {sid: sum(s) for sid, s in scores[gi].items() if s is not None}
            failures = sum(1 for s in scores[gi].values() if s is None)
            kw = dict(
                tokens_in=cost[gi][0], tokens_out=cost[gi][1], parse_failures=failures,
                scores={sid: float(v) for sid, v in parsed.items()},
                extra={"rubric": {str(sid): list(s) if s else None for sid, s in scores[gi].items()}, "judged": len(scores[gi])},
            )
            if not parsed:
                picks.append(majority_pick(g, fallback="no judgement parsed; majority vote", **kw))
            elif accepted[gi] is not None:
                picks.append(pick_from(g, accepted[gi], **kw))
            else:
                picks.append(pick_from(g, self._choose(cands[gi], parsed), **kw))
        return picks

    def _choose(self, cands: list[Trajectory], totals: dict[int, int]) -> Trajectory | None:
        scored = [t for t in cands if t.sample_id in totals]
        if self.rule == "top_k":
            ranked = sorted(scored, key=lambda t: (-totals[t.sample_id], t.sample_id))
            return vote(ranked[: self.chat.cfg.judge_top_k])[0]
        best = max(totals[t.sample_id] for t in scored)
        return vote([t for t in scored if totals[t.sample_id] == best])[0]

"""LLM answer aggregation over a question's trajectories: SolAgg and SummAgg (ParallelMuse).

Both are selection-based here: the model's output is mapped onto one of the existing answers
(`llm.match_candidate`); an output that maps to none counts as a parse failure and the question
falls back to the majority vote. With `LLMConfig.constrained` the final call may only write
``<answer>`` + one of the candidate answers (`prompts.choice_regex`); the integrate prompts therefore
ask for the answer alone, without a reasoning line (with a free reasoning-then-answer pattern,
SmolLM2-135M's output matched no candidate on 4 of 4 SolAgg questions of the benchmark pool).

Only answered trajectories are shown, numbered 1..m in sample_id order. A question whose answered
trajectories all agree (one normalised answer) needs no call when `LLMConfig.skip_unanimous` is on:
any selection-based aggregator would return that answer.

Every call of a question is batched with the same stage of every other question, so a pool costs
one engine batch for SolAgg and two (reports, then integrate) for SummAgg.
"""

from __future__ import annotations

from collections.abc import Sequence

from trace_selector.answers import normalize_answer
from trace_selector.baselines import prompts
from trace_selector.baselines.llm import Chat, match_candidate
from trace_selector.baselines.pick import Pick, has_answer, majority_pick, pick_from
from trace_selector.baselines.render import render_transcript, short_solution
from trace_selector.records import QuestionGroup, Trajectory

PARSE_FALLBACK = "model output matched no candidate; majority vote"


def candidates_of(group: QuestionGroup) -> list[Trajectory]:
    """Answered trajectories in sample_id order (the numbering every prompt uses)."""
    return sorted((t for t in group.trajectories if has_answer(t)), key=lambda t: t.sample_id)


def distinct_answers(cands: Sequence[Trajectory]) -> list[str]:
    """The candidates' answers, one per normalised form (first occurrence's text)."""
    seen: dict[str, str] = {}
    for t in cands:
        seen.setdefault(normalize_answer(t.answer), t.answer)
    return list(seen.values())


def needs_call(cands: Sequence[Trajectory], skip_unanimous: bool) -> bool:
    """False when there is nothing to choose between."""
    distinct = {normalize_answer(t.answer) for t in cands}
    return len(distinct) > (1 if skip_unanimous else 0)


def resolve(group: QuestionGroup, cands: Sequence[Trajectory], text: str, tokens_in: int, tokens_out: int, **extra) -> Pick:
    """Map the final output onto a candidate, or fall back to the majority vote (one parse failure)."""
    chosen = match_candidate(text, cands)
    cost = {"tokens_in": tokens_in, "tokens_out": tokens_out, "extra": {"output": text[-300:], **extra}}
    if chosen is None:
        return majority_pick(group, parse_failures=1, fallback=PARSE_FALLBACK, **cost)
    return pick_from(group, chosen, **cost)


class Aggregator:
    """Shared skeleton: questions with a real choice get calls, the others a direct pick."""

    name = ""

    def __init__(self, chat: Chat):
        self.chat = chat

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        return None

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        picks: list[Pick | None] = [None] * len(groups)
        todo = []
        for i, g in enumerate(groups):
            cands = candidates_of(g)
            if needs_call(cands, self.chat.cfg.skip_unanimous):
                todo.append(i)
            else:
                picks[i] = pick_from(g, cands[0] if cands else None, extra={"unanimous": bool(cands)})
        for i, pick in zip(todo, self._aggregate([groups[i] for i in todo])):
            picks[i] = pick
        return [p for p in picks if p is not None]

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        raise NotImplementedError

    def _fit(self, template_tokens: int, parts: int) -> int:
        """Token budget of each of `parts` pieces so the prompt stays within max_prompt_tokens."""
        room = self.chat.cfg.max_prompt_tokens - template_tokens
        return max(16, room // max(1, parts))


class SolAgg(Aggregator):
    """All final answers with a short solution each, integrated in one call."""

    name = "solagg"

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        convs, cand_lists = [], []
        for g in groups:
            cands = candidates_of(g)
            base = self.chat.count(prompts.SOLAGG.format(question=g.question, candidates=""))
            each = self._fit(base, len(cands))
            blocks = [
                self.chat.clip(prompts.SOLAGG_CANDIDATE.format(i=i, solution=short_solution(t), answer=t.answer), each)
                for i, t in enumerate(cands, 1)
            ]
            convs.append([{"role": "user", "content": prompts.SOLAGG.format(question=g.question, candidates="\n".join(blocks))}])
            cand_lists.append(cands)
        regexes = [prompts.choice_regex(distinct_answers(c)) for c in cand_lists]
        replies = self.chat(convs, self.chat.cfg.answer_tokens, regex=regexes, stop=["</answer>"])
        return [resolve(g, c, r.text, r.tokens_in, r.tokens_out) for g, c, r in zip(groups, cand_lists, replies)]


class SummAgg(Aggregator):
    """ParallelMuse compressed reasoning aggregation: a structured report per trajectory, then an
    integrate call that weighs the reports' reasoning, uses no tools and never merges answers.

    `Pick.extra` records ``report_tokens`` (generated report tokens) and ``trajectory_tokens``
    (tokens of the full rendered transcripts they compress), whose ratio is the compression ratio.
    """

    name = "summagg"

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        cfg = self.chat.cfg
        jobs: list[tuple[int, Trajectory]] = []
        convs = []
        traj_tokens = [0] * len(groups)
        for gi, g in enumerate(groups):
            base = self.chat.count(prompts.SUMMAGG_REPORT.format(question=g.question, transcript=""))
            for t in candidates_of(g):
                transcript = render_transcript(t, cfg.doc_chars)
                traj_tokens[gi] += self.chat.count(transcript)
                clipped = self.chat.clip(transcript, self._fit(base, 1))
                convs.append([{"role": "user", "content": prompts.SUMMAGG_REPORT.format(question=g.question, transcript=clipped)}])
                jobs.append((gi, t))
        reports = self.chat(convs, cfg.report_tokens)

        per_group: list[list[tuple[Trajectory, str]]] = [[] for _ in groups]
        cost_in, cost_out = [0] * len(groups), [0] * len(groups)
        for (gi, t), r in zip(jobs, reports):
            per_group[gi].append((t, r.text.strip()))
            cost_in[gi] += r.tokens_in
            cost_out[gi] += r.tokens_out
        report_tokens = list(cost_out)

        convs = []
        for g, entries in zip(groups, per_group):
            base = self.chat.count(prompts.SUMMAGG_INTEGRATE.format(question=g.question, reports=""))
            each = self._fit(base, len(entries))
            blocks = [
                self.chat.clip(prompts.SUMMAGG_ENTRY.format(i=i, report=text, answer=t.answer), each)
                for i, (t, text) in enumerate(entries, 1)
            ]
            convs.append([{"role": "user", "content": prompts.SUMMAGG_INTEGRATE.format(question=g.question, reports="\n".join(blocks))}])
        regexes = [prompts.choice_regex(distinct_answers([t for t, _ in entries])) for entries in per_group]
        finals = self.chat(convs, cfg.answer_tokens, regex=regexes, stop=["</answer>"])

        picks = []
        for gi, (g, r) in enumerate(zip(groups, finals)):
            cands = [t for t, _ in per_group[gi]]
            picks.append(
                resolve(
                    g, cands, r.text, cost_in[gi] + r.tokens_in, cost_out[gi] + r.tokens_out,
                    report_tokens=report_tokens[gi], trajectory_tokens=traj_tokens[gi],
                )
            )
        return picks

"""LLM answer aggregation over a question's trajectories: SolAgg and SummAgg (ParallelMuse).

Both integrate under ParallelMuse's rules (`prompts._INTEGRATE_RULES`): the model reasons freely, then
writes ``<answer>``; agreement raises the likelihood but is not a guarantee; exactly one solution or
report is chosen; no tools; no merged answers. SolAgg shows every answered trajectory's final solution;
SummAgg first compresses each trajectory into a <report> (Solution Planning / Solution Methods /
Final Reasoning), then integrates the reports.

``solagg`` / ``summagg`` run as the papers run them: the integrate call reasons and answers freely,
and the answer is the text of its last ``<answer>`` (`llm.free_answer`), scored against the gold like
any other answer, so it may be an answer no trajectory gave (``Pick.extra["novel"]``; such a pick has
no sample_id, and on a pool without gold aliases, where only trajectories carry a stored `correct`, it
scores 0). An answer equal to a candidate's after normalisation is attributed to that trajectory. An
output without an answer is a parse failure and scores 0, as it would in the paper (no fallback).
Every question with an answer is aggregated, unanimous ones included: a free aggregator may overrule
agreement, so `LLMConfig.skip_unanimous` does not apply.

``solagg_choice`` / ``summagg_choice`` are the selection-only variants: the output is mapped onto one of
the existing answers (`llm.match_candidate`); with `LLMConfig.constrained` the integrate call may write
anything but ``<`` and then must end in ``<answer>`` + one candidate answer (`prompts.choice_regex`).
An output that maps to no candidate is a parse failure and the question falls back to the majority
vote; with `LLMConfig.skip_unanimous` a question whose answered trajectories all agree gets no call
(any selection would return that answer). They suit models too small to follow the answer format.

For both, when the free reasoning uses up `LLMConfig.answer_tokens` before ``<answer>``, one
continuation call appends ``<answer>`` to what it wrote and lets the model write the answer (a
candidate only, in the choice variants) (``Pick.extra["forced_answer"]``).

Only answered trajectories are shown (ParallelMuse drops trajectories without a prediction), numbered
1..m in sample_id order.

Budgets: prompts fit `Chat.prompt_budget` (the model's context minus the call's output budget), split
evenly over the solutions / reports; what is cut from the middle of a piece is counted in
``Pick.extra["cut_tokens"]`` (summed into results.json and the table), and the trajectories so cut in
``Pick.extra["clipped"]`` (of ``Pick.extra["shown"]``); `Aggregator.describe` reports both totals of
the last run (``clipped_trajectories`` of ``shown_trajectories``) and the free answers no trajectory gave
(``novel_answers``) in results.json.

Every call of a question is batched with the same stage of every other question, so a pool costs
one engine batch for SolAgg and two (reports, then integrate) for SummAgg, plus one for forced answers.
``summagg`` and ``summagg_choice`` in one run share their reports (`SummAgg._reports`): the second
pays only its integrate calls, and their comparison is paired on the same reports.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from trace_selector.baselines import prompts
from trace_selector.baselines.llm import Chat, Reply, free_answer, match_candidate
from trace_selector.baselines.pick import majority_pick, pick_from
from trace_selector.baselines.render import render_transcript, short_solution
from trace_selector.records import QuestionGroup, Trajectory
from trace_selector.records.answers import has_answer, normalize_answer
from trace_selector.records.pick import Pick

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


def resolve_free(group: QuestionGroup, cands: Sequence[Trajectory], text: str, tokens_in: int, tokens_out: int,
                 **extra) -> Pick:
    """The aggregator's own answer (module docstring): attributed to the first candidate that gave it,
    else a pick of no trajectory; no answer at all is one parse failure and an empty pick."""
    answer = free_answer(text)
    norm = normalize_answer(answer)
    cost: dict[str, Any] = {"tokens_in": tokens_in, "tokens_out": tokens_out}
    if not norm:
        return Pick(group.question_id, None, "", parse_failures=1, extra={"output": text[-300:], **extra}, **cost)
    same = next((t for t in cands if normalize_answer(t.answer) == norm), None)
    details = {"output": text[-300:], "novel": same is None, **extra}
    return Pick(group.question_id, None if same is None else same.sample_id, answer, extra=details, **cost)


_REPORT = re.compile(r"<report>(.*?)(?:</report>|$)", re.S | re.I)


def report_text(text: str) -> str:
    """The report inside ``<report>`` (to the end when the closing tag was cut), else the whole text."""
    m = _REPORT.search(text)
    return (m.group(1) if m else text).strip()


def final_solution(traj: Trajectory) -> str:
    """The trajectory's final turn (its solution and answer), else its queries."""
    if traj.final_text:
        return traj.final_text.strip()
    return short_solution(traj)


class Aggregator:
    """Shared skeleton: questions with something to aggregate get calls, the others a direct pick.

    Args:
        chat: the LLM calls.
        choice: the selection-only variant (answer mapped onto a candidate; module docstring).
    """

    name = ""
    family = ""
    """Method name of the free variant (SolAgg, SummAgg); the choice variant adds ``_choice``."""
    free = False
    """The method may answer otherwise than every trajectory, so unanimous questions are asked too."""

    def __init__(self, chat: Chat, choice: bool = False):
        self.chat = chat
        self.choice = choice
        if self.family:
            self.name = f"{self.family}_choice" if choice else self.family
            self.free = not choice
        self.last: dict[str, int] = {}

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        return None

    def describe(self) -> dict[str, Any]:
        """Sampling and budget settings, and what the last run clipped, for results.json."""
        cfg = self.chat.cfg
        return {"temperature": cfg.temperature, "top_p": cfg.top_p, "max_prompt_tokens": cfg.max_prompt_tokens,
                "context": self.chat.context, "answer_tokens": cfg.answer_tokens,
                "answer": "a candidate's" if self.choice else "free", **self.last}

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        picks: list[Pick | None] = [None] * len(groups)
        todo = []
        skip_unanimous = self.chat.cfg.skip_unanimous and not self.free
        for i, g in enumerate(groups):
            cands = candidates_of(g)
            if needs_call(cands, skip_unanimous):
                todo.append(i)
            else:
                picks[i] = pick_from(g, cands[0] if cands else None, extra={"unanimous": bool(cands)})
        for i, pick in zip(todo, self._aggregate([groups[i] for i in todo])):
            picks[i] = pick
        done = [p for p in picks if p is not None]
        self.last = {
            "shown_trajectories": sum(p.extra.get("shown", 0) for p in done),
            "clipped_trajectories": sum(p.extra.get("clipped", 0) for p in done),
            "novel_answers": sum(1 for p in done if p.extra.get("novel")),
        }
        return done

    def _resolve(self, group: QuestionGroup, cands: Sequence[Trajectory], text: str, tokens_in: int,
                 tokens_out: int, **extra) -> Pick:
        return (resolve if self.choice else resolve_free)(group, cands, text, tokens_in, tokens_out, **extra)

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        raise NotImplementedError

    def _fit(self, template_tokens: int, parts: int, out_tokens: int | None = None) -> int:
        """Token budget of each of `parts` pieces so the prompt fits `Chat.prompt_budget`."""
        room = self.chat.prompt_budget(self.chat.cfg.answer_tokens if out_tokens is None else out_tokens) - template_tokens
        return max(16, room // max(1, parts))

    def _integrate(self, convs: list[list[dict[str, str]]], cand_lists: list[list[Trajectory]]) -> list[tuple[str, int, int, bool]]:
        """Integrate calls with free reasoning, then a forced answer for those cut before ``<answer>``:
        (output text, tokens in, tokens out, forced) per conversation."""
        cfg = self.chat.cfg
        regexes = [prompts.choice_regex(distinct_answers(c)) for c in cand_lists] if self.choice else None
        replies = self.chat(convs, cfg.answer_tokens, regex=regexes, stop=["</answer>"])
        out = [(r.text, r.tokens_in, r.tokens_out, False) for r in replies]
        cut = [i for i, r in enumerate(replies) if r.finish_reason == "length" and "<answer>" not in r.text]
        if cut:
            heads = [replies[i].text.rstrip() + "\n<answer>" for i in cut]
            tails = self.chat([convs[i] for i in cut], cfg.forced_answer_tokens, stop=["</answer>"], prefixes=heads,
                              regex=[prompts.choice_regex(distinct_answers(cand_lists[i]), reasoning=False) for i in cut]
                              if self.choice else None)
            for i, head, r in zip(cut, heads, tails):
                text, tin, tout, _ = out[i]
                out[i] = (head + r.text, tin + r.tokens_in, tout + r.tokens_out, True)
        return out


class SolAgg(Aggregator):
    """Every answered trajectory's final solution, integrated in one call."""

    family = "solagg"

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        convs, cand_lists, cuts = [], [], []
        for g in groups:
            cands = candidates_of(g)
            # Template, chat markup and each block's frame (label, answer, join) are fixed; solutions share the rest.
            base = self.chat.prompt_tokens(prompts.SOLAGG.format(question=g.question, candidates="")) + sum(
                self.chat.count(prompts.SOLAGG_CANDIDATE.format(i=i, solution="", answer=t.answer)) + 1
                for i, t in enumerate(cands, 1))
            each = self._fit(base, len(cands))
            blocks, cut, clipped = [], 0, 0
            for i, t in enumerate(cands, 1):
                solution, n = self.chat.fit(final_solution(t), each)
                blocks.append(prompts.SOLAGG_CANDIDATE.format(i=i, solution=solution, answer=t.answer))
                cut += n
                clipped += n > 0
            convs.append([{"role": "user", "content": prompts.SOLAGG.format(question=g.question, candidates="\n".join(blocks))}])
            cand_lists.append(cands)
            cuts.append((cut, clipped))
        results = self._integrate(convs, cand_lists)
        return [self._resolve(g, c, text, tin, tout, forced_answer=forced, cut_tokens=cut, clipped=clipped, shown=len(c))
                for g, c, (text, tin, tout, forced), (cut, clipped) in zip(groups, cand_lists, results, cuts)]


class SummAgg(Aggregator):
    """ParallelMuse compressed reasoning aggregation: a structured report per trajectory, then an
    integrate call over the reports (see the module docstring).

    `Pick.extra` records ``report_tokens`` (generated report tokens) and ``trajectory_tokens``
    (tokens of the full rendered transcripts they compress), whose ratio is the compression ratio.
    """

    family = "summagg"

    def _aggregate(self, groups: list[QuestionGroup]) -> list[Pick]:
        cfg = self.chat.cfg
        jobs: list[tuple[int, Trajectory]] = []
        convs = []
        traj_tokens = [0] * len(groups)
        cuts = [0] * len(groups)
        clipped: list[set[int]] = [set() for _ in groups]  # sample ids cut in their report or integrate prompt
        for gi, g in enumerate(groups):
            base = self.chat.prompt_tokens(prompts.SUMMAGG_REPORT.format(transcript=""))
            for t in candidates_of(g):
                record = f"Question: {g.question}\n\n{render_transcript(t, cfg.doc_chars)}"
                traj_tokens[gi] += self.chat.count(record)
                shown, cut = self.chat.fit(record, self._fit(base, 1, cfg.report_tokens))
                cuts[gi] += cut
                if cut:
                    clipped[gi].add(t.sample_id)
                convs.append([{"role": "user", "content": prompts.SUMMAGG_REPORT.format(transcript=shown)}])
                jobs.append((gi, t))
        reports = self._reports(groups, jobs, convs)

        per_group: list[list[tuple[Trajectory, str]]] = [[] for _ in groups]
        cost_in, cost_out = [0] * len(groups), [0] * len(groups)
        for (gi, t), r in zip(jobs, reports):
            per_group[gi].append((t, report_text(r.text)))
            cost_in[gi] += r.tokens_in
            cost_out[gi] += r.tokens_out
        report_tokens = list(cost_out)

        convs = []
        for gi, (g, entries) in enumerate(zip(groups, per_group)):
            base = self.chat.prompt_tokens(prompts.SUMMAGG_INTEGRATE.format(question=g.question, reports="")) + sum(
                self.chat.count(prompts.SUMMAGG_ENTRY.format(i=i, report="", answer=t.answer)) + 1
                for i, (t, _) in enumerate(entries, 1))
            each = self._fit(base, len(entries))
            blocks = []
            for i, (t, text) in enumerate(entries, 1):
                report, cut = self.chat.fit(text, each)
                cuts[gi] += cut
                if cut:
                    clipped[gi].add(t.sample_id)
                blocks.append(prompts.SUMMAGG_ENTRY.format(i=i, report=report, answer=t.answer))
            convs.append([{"role": "user", "content": prompts.SUMMAGG_INTEGRATE.format(question=g.question, reports="\n".join(blocks))}])
        finals = self._integrate(convs, [[t for t, _ in entries] for entries in per_group])

        picks = []
        for gi, (g, (text, tin, tout, forced)) in enumerate(zip(groups, finals)):
            cands = [t for t, _ in per_group[gi]]
            picks.append(
                self._resolve(
                    g, cands, text, cost_in[gi] + tin, cost_out[gi] + tout, forced_answer=forced, cut_tokens=cuts[gi],
                    clipped=len(clipped[gi]), shown=len(cands),
                    report_tokens=report_tokens[gi], trajectory_tokens=traj_tokens[gi],
                )
            )
        return picks

    def _reports(self, groups: list[QuestionGroup], jobs: list[tuple[int, Trajectory]],
                 convs: list[list[dict[str, str]]]) -> list[Reply]:
        """One report per job; a report another SummAgg variant of this run already generated from the
        same prompt is reused (`Chat.memo`), and its tokens still count in this method's cost, as if
        it ran alone."""
        memo = self.chat.memo.setdefault("summagg_reports", {})
        keys = [(groups[gi].question_id, t.sample_id, conv[0]["content"]) for (gi, t), conv in zip(jobs, convs)]
        todo = [i for i, key in enumerate(keys) if key not in memo]
        for i, reply in zip(todo, self.chat([convs[i] for i in todo], self.chat.cfg.report_tokens)):
            memo[keys[i]] = reply
        return [memo[key] for key in keys]

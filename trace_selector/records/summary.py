"""What is in a rollout pool: sizes, answer coverage, steps, and how good voting and the oracle are.

`trace-selector validate POOL` reads the pool with every check of `trace_selector.records` and prints
`PoolSummary.to_text()` (or ``--json``). Accuracy figures use `answers.is_correct`: exact match
against the gold aliases; a question without gold is scored from the stored ``correct`` flags instead
(browsing pools), and a question with neither is left out of the accuracy figures.

- single rollout: mean over questions of the fraction of its trajectories that are correct;
- majority: the most frequent normalised non-empty answer (ties go to the answer seen first in the
  file, empty answers do not vote; a question without any answer counts as wrong);
- oracle: some trajectory of the question is correct (pass@K);
- mixed: some but not all of the question's trajectories are correct, the questions where selection
  matters;
- gold in evidence: share of the trajectories that searched whose retrieved text contains a gold alias
  as whole normalised words (did the agent find the answer, whatever it then wrote);
- mixed per hour: mixed questions produced per hour of rollout wall time on the machine that wrote the
  pool (from the metadata's accounting), the signal a training pool buys per hour;
- families (pools of the bundled settings, whose question ids read ``<setting>-<family>-<number>``):
  questions, majority, oracle and mixed share per question family, so a pool that holds one family
  only says so;
- adaptive (a pool of an adaptive rollout, whose sidecar has an ``adaptive`` entry): trajectories
  sampled per question and why its questions stopped; per question under ``meta.extra.adaptive`` of
  ``--json``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from statistics import mean
from typing import Any

from pathlib import Path

from trace_selector.records.answers import is_correct, normalize_answer, vote
from trace_selector.records.evidence import evidence_words, mentions
from trace_selector.records.files import pool_format, read_pool
from trace_selector.records.trajectory import ACTIONS, Pool, PoolMeta, QuestionGroup


@dataclass(slots=True)
class PoolSummary:
    """Figures of one pool; `to_text` for people, `to_json` for scripts."""

    path: str
    """The pool file."""
    format: str
    """"jsonl", "jsonl.gz" or "parquet"."""
    style: str
    """"webqa" or "browsing"."""
    questions: int
    """Number of questions."""
    trajectories: int
    """Number of trajectories."""
    per_question: tuple[int, float, int]
    """Trajectories per question: min, mean, max."""
    answer_coverage: float
    """Fraction of trajectories with a non-empty answer."""
    questions_with_gold: int
    """Questions that carry at least one gold alias."""
    steps: tuple[int, float, int]
    """Steps (tool calls) per trajectory: min, mean, max."""
    actions: dict[str, int]
    """Number of steps of each action."""
    scored_questions: int
    """Questions whose every trajectory could be scored (gold, else stored `correct`)."""
    single: float | None
    """Mean accuracy of one rollout; None when no question could be scored."""
    majority: float | None
    """Accuracy of majority voting over normalised answers."""
    oracle: float | None
    """Fraction of questions with at least one correct trajectory (pass@K)."""
    mixed: float | None
    """Fraction of scored questions with some but not all trajectories correct."""
    gold_in_evidence: float | None = None
    """Share of searching trajectories (with gold) whose retrieved text contains a gold alias."""
    seconds_per_trajectory: float | None = None
    """Rollout wall seconds per trajectory (metadata accounting); None when not recorded."""
    mixed_per_hour: float | None = None
    """Mixed questions per hour of rollout wall time; None when the wall time is not recorded."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Non-empty fields of the pool's sidecar metadata."""
    families: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per question family of a bundled setting, in first-seen order: scored questions, majority,
    oracle and mixed share; empty when some scored question's id names no family of the pool's setting."""

    def to_json(self) -> str:
        """All fields as a JSON object."""
        return json.dumps(asdict(self), ensure_ascii=False, indent=2)

    def to_text(self) -> str:
        """A few aligned lines for a terminal."""
        lo, avg, hi = self.per_question
        slo, savg, shi = self.steps
        acts = ", ".join(f"{a} {n}" for a, n in self.actions.items())
        lines = [
            f"pool             {self.path} ({self.format}, {self.style} style)",
            f"questions        {self.questions} ({self.questions_with_gold} with gold answers)",
            f"trajectories     {self.trajectories} (per question min {lo} / mean {avg:.2f} / max {hi})",
            f"answer coverage  {self.answer_coverage:.1%} of trajectories have a non-empty answer",
            f"steps            per trajectory min {slo} / mean {savg:.2f} / max {shi} ({acts})",
        ]
        if self.meta.get("extra", {}).get("snapshot"):
            lines.insert(1, "status           snapshot of a rollout in progress: rerun its command to finish it")
        if self.scored_questions:
            lines.append(
                f"accuracy (EM)    single rollout {self.single:.3f}, majority {self.majority:.3f}, "
                f"oracle {self.oracle:.3f} over {self.scored_questions} questions"
            )
            lines.append(f"mixed questions  {self.mixed:.1%} (some but not all trajectories correct)")
        else:
            lines.append("accuracy (EM)    n/a (no question has gold answers or stored correctness)")
        if self.families:
            lines.append("families         " + "; ".join(
                f"{name} {int(f['questions'])} (majority {f['majority']:.3f}, oracle {f['oracle']:.3f}, "
                f"mixed {f['mixed']:.1%})" for name, f in self.families.items()))
        if self.gold_in_evidence is not None:
            lines.append(f"gold in evidence {self.gold_in_evidence:.1%} of searching trajectories retrieved a gold alias")
        if self.mixed_per_hour is not None:
            lines.append(f"throughput       {self.seconds_per_trajectory:.2f} s per trajectory, "
                         f"{self.mixed_per_hour:.0f} mixed questions per hour")
        if self.meta:
            m = self.meta
            keys = ("setting", "split", "policy_model", "strategy", "vllm_version", "logprob_mode", "seed")
            lines.append("metadata         " + ", ".join(f"{k}={m[k]}" for k in keys if k in m))
            samp = m.get("sampling", {})
            if samp:
                lines.append("sampling         " + ", ".join(f"{k}={v}" for k, v in samp.items()))
            acct = m.get("accounting", {})
            figures = [(k, acct[k]) for k in ("generated_tokens", "prompt_tokens", "cached_tokens", "tool_calls",
                                               "wall_seconds", "valid_action_rate") if k in acct]
            if figures:
                lines.append("accounting       " + ", ".join(f"{k}={v}" for k, v in figures)
                             + " (all fields: --json)")
            adaptive = m.get("extra", {}).get("adaptive")
            if adaptive:
                lines.append("adaptive         " + describe_adaptive(adaptive) + " (per question: --json)")
        return "\n".join(lines)


def describe_adaptive(entry: dict[str, Any]) -> str:
    """One line on the sidecar's ``adaptive`` entry of an adaptive rollout (rollout/waves.py): the
    trajectories it sampled per question and why its questions stopped."""
    stopped = ", ".join(f"{n} {why}" for why, n in entry.get("stopped", {}).items()) or "none"
    return (f"mean {entry.get('mean_trajectories', 0):.2f} of k={entry.get('k')} trajectories per question "
            f"(waves of {entry.get('wave')}, threshold {entry.get('threshold')}); stopped: {stopped}")


def _score(group: QuestionGroup) -> tuple[float, float, float, bool] | None:
    """(single, majority, oracle, mixed) of one question, or None if some trajectory is unscorable."""
    marks = [is_correct(t, group.golden_answers) for t in group.trajectories]
    if any(m is None for m in marks):
        return None
    winner = vote(group.trajectories)[0]  # the `majority` baseline's vote: validate and evaluate agree
    majority = 0.0 if winner is None else float(marks[group.trajectories.index(winner)])
    hits = sum(marks)
    return hits / len(marks), majority, float(hits > 0), 0 < hits < len(marks)


def family_of(question_id: str, setting: str) -> str | None:
    """The family named by a bundled setting's question id, ``<setting>-<family>-<number>`` (the ids
    search/wikileads.py and search/wikihops.py write); None for any other id."""
    found = re.fullmatch(rf"{re.escape(setting)}-([a-z_]+)-\d+", question_id) if setting else None
    return found.group(1) if found else None


def _by_family(scored: list[tuple[QuestionGroup, tuple[float, float, float, bool]]],
               setting: str) -> dict[str, dict[str, float]]:
    names = [family_of(g.question_id, setting) for g, _ in scored]
    if not names or None in names:
        return {}
    out: dict[str, list[tuple[float, float, float, bool]]] = {}
    for name, (_, score) in zip(names, scored):
        out.setdefault(name, []).append(score)
    return {name: {"questions": len(rows), "majority": float(mean(r[1] for r in rows)),
                   "oracle": float(mean(r[2] for r in rows)), "mixed": float(mean(r[3] for r in rows))}
            for name, rows in out.items()}


def gold_in_evidence(pool: Pool) -> float | None:
    """Share of trajectories that searched (in questions with gold) whose evidence holds a gold alias."""
    hits = []
    for group in pool.groups:
        golden = [a for a in (normalize_answer(g) for g in group.golden_answers) if a]
        for t in group.trajectories:
            if golden and t.steps:
                words = evidence_words(t)
                hits.append(any(mentions(words, g) for g in golden))
    return float(mean(hits)) if hits else None


def _spread(values: list[int]) -> tuple[int, float, int]:
    return min(values), float(mean(values)), max(values)


def summarize(pool: Pool) -> PoolSummary:
    """Summarise a pool already read (and checked) by `read_pool`."""
    trajectories = list(pool.trajectories())
    scored = [(g, s) for g in pool.groups if (s := _score(g)) is not None]
    scores = [s for _, s in scored]
    actions = Counter(step.action for t in trajectories for step in t.steps)

    def avg(i: int) -> float | None:
        return float(mean(s[i] for s in scores)) if scores else None

    wall = pool.meta.accounting.get("wall_seconds") if isinstance(pool.meta.accounting, dict) else None
    mixed = avg(3)
    per_traj = wall / len(trajectories) if wall else None
    per_hour = mixed * len(scores) * 3600 / wall if wall and mixed is not None else None
    empty = PoolMeta()
    meta = {f.name: getattr(pool.meta, f.name) for f in fields(PoolMeta)}
    meta = {k: v for k, v in meta.items() if v != getattr(empty, k)}
    return PoolSummary(
        path=str(pool.path),
        format=pool_format(pool.path) if pool.path else "",
        style=trajectories[0].style,
        questions=len(pool.groups),
        trajectories=len(trajectories),
        per_question=_spread([len(g.trajectories) for g in pool.groups]),
        answer_coverage=sum(bool(t.answer.strip()) for t in trajectories) / len(trajectories),
        questions_with_gold=sum(bool(g.golden_answers) for g in pool.groups),
        steps=_spread([len(t.steps) for t in trajectories]),
        actions={a: actions[a] for a in ACTIONS},
        scored_questions=len(scores),
        single=avg(0),
        majority=avg(1),
        oracle=avg(2),
        mixed=mixed,
        gold_in_evidence=gold_in_evidence(pool),
        seconds_per_trajectory=per_traj,
        mixed_per_hour=per_hour,
        meta=meta,
        families=_by_family(scored, pool.meta.setting or ""),
    )


def summarize_pool(path: str | Path, labels: str | Path | None = None) -> PoolSummary:
    """Read and check a pool (with its labels file, `records.labels`), then summarise it; `FormatError` if bad."""
    return summarize(read_pool(path, labels))

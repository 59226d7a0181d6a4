"""A labels file: correctness and gold answers kept apart from the rollouts they judge.

TRACE's browser rollouts store what the agent did in one file and what a judge said of it in another,
so that the rollout file can be shared before the answers are graded. `read_pool` reads such a file
when it sits next to the pool as ``<pool>.labels.jsonl`` (or is passed as ``labels=``), and fills in
each trajectory's ``correct`` and each question's ``golden_answers`` from it. One JSON object per line:

- ``qid`` (or ``question_index``): the question, as in the pool;
- ``traj_idx`` (or ``sample_id``, or ``seed`` with sample_id = seed - 42): the trajectory; a line
  without one labels the question only;
- ``correct`` (true / false), or ``label`` (1 / 0, true / false): the trajectory's correctness;
- ``golden_answers`` (a list of strings) or ``gold`` (a string or a list): the question's gold answers.

A value the pool already holds wins over nothing but must agree: a stored ``correct`` or gold list
that differs from the label is a `FormatError` naming the labels file and line, because one of the
two files then belongs to another run. Labels for trajectories the pool lacks are ignored (a labels
file may cover a larger run than the pool).

    labels = read_labels("rollouts.jsonl.labels.jsonl")   # records.files: the file, through this module
    labelled = labels.apply(trajectory)      # a copy with correct / golden_answers filled in
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_selector.errors import FormatError
from trace_selector.records.codec import Checker, is_int, show
from trace_selector.records.trajectory import SEED_OFFSET, Trajectory


def labels_path(pool_path: str | Path) -> Path:
    """The labels sidecar of a pool: ``<pool path>.labels.jsonl``."""
    return Path(f"{pool_path}.labels.jsonl")


@dataclass(slots=True)
class Labels:
    """What a labels file says, keyed by question id (a string) and sample id."""

    path: str
    """The file, for messages."""
    correct: dict[tuple[str, int], tuple[bool, int]] = field(default_factory=dict)
    """(question, sample) -> (correct, line)."""
    gold: dict[str, tuple[list[str], int]] = field(default_factory=dict)
    """question -> (gold answers, line)."""

    def apply(self, t: Trajectory) -> Trajectory:
        """`t` with its label and its question's gold filled in; `FormatError` on a contradiction."""
        changes: dict[str, object] = {}
        label = self.correct.get((t.question_id, t.sample_id))
        if label is not None:
            value, line = label
            if t.correct is not None and t.correct != value:
                raise FormatError(self.path, line, "correct",
                                  f"says {value} for question {t.question_id!r} trajectory {t.sample_id}, the pool says {t.correct}")
            changes["correct"] = value
        gold = self.gold.get(t.question_id)
        if gold is not None:
            answers, line = gold
            if t.golden_answers and t.golden_answers != answers:
                raise FormatError(self.path, line, "golden_answers",
                                  f"differ from the pool's for question {t.question_id!r}: {answers} vs {t.golden_answers}")
            changes["golden_answers"] = list(answers)
        return dataclasses.replace(t, **changes) if changes else t


def labels_from_records(records: Iterable[tuple[int, dict[str, Any]]], path: str | Path) -> Labels:
    """Parse the (line, object) records of a labels file (format in the module docstring); every
    failure names `path`, the line and the field."""
    labels = Labels(str(path))
    for line, d in records:
        c = Checker(path, line)
        key = "qid" if "qid" in d else "question_index"
        qid = c.get(d, key, "qid", None, lambda v: isinstance(v, str) or is_int(v), "an integer or a string")
        if qid is None:
            c.fail("qid", "missing (nor question_index)")
        qid = str(qid)
        sample = _sample(c, d)
        value = _correct(c, d)
        if value is not None:
            if sample is None:
                c.fail("traj_idx", "missing: a correctness label needs its trajectory (traj_idx or sample_id)")
            if (qid, sample) in labels.correct:
                c.fail("traj_idx", f"question {qid!r} trajectory {sample} is labelled twice "
                                   f"(also on line {labels.correct[(qid, sample)][1]})")
            labels.correct[(qid, sample)] = (value, line)
        gold = _gold(c, d)
        if gold is not None:
            seen = labels.gold.get(qid)
            if seen is not None and seen[0] != gold:
                c.fail("golden_answers", f"differ from line {seen[1]} for question {qid!r}")
            labels.gold.setdefault(qid, (gold, line))
        if value is None and gold is None:
            c.fail(None, "labels nothing: expected correct / label or golden_answers / gold")
    return labels


def _sample(c: Checker, d: dict) -> int | None:
    for key in ("traj_idx", "sample_id"):
        if d.get(key) is not None:
            return c.int_(d, key, key)
    seed = c.int_(d, "seed", "seed", None)
    return None if seed is None else seed - SEED_OFFSET


def _correct(c: Checker, d: dict) -> bool | None:
    if d.get("correct") is not None:
        return c.bool_(d, "correct", "correct")
    v = d.get("label")
    if v is None:
        return None
    if isinstance(v, bool) or v in (0, 1):
        return bool(v)
    c.fail("label", f"expected 1, 0, true or false, got {show(v)}")


def _gold(c: Checker, d: dict) -> list[str] | None:
    if d.get("golden_answers") is not None:
        return list(c.str_list(d, "golden_answers", "golden_answers"))
    v = d.get("gold")
    if v is None:
        return None
    if isinstance(v, str):
        return [v]
    return list(c.str_list(d, "gold", "gold"))

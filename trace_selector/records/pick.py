"""What a selection method chose for one question: the `Pick` record shared by the baselines, the
trained selector and `evaluate`.

A pick names the chosen trajectory (so selection-based methods always return an existing answer),
the answer text, optional per-trajectory scores, and the method's cost and fallbacks. The `single`
baseline is not a choice but an expectation; it sets `weights` (a distribution over trajectories) and
is scored as the weighted mean of their correctness. With no non-empty answer the pick is empty
(`sample_id` None, answer ""), which scores as wrong because no trajectory answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Pick:
    """One method's answer for one question."""

    question_id: str
    """The question."""
    sample_id: int | None
    """Chosen trajectory; None when nothing was chosen (no answers) or for an expectation (`single`)."""
    answer: str
    """The chosen answer text as the trajectory stated it ("" when nothing was chosen)."""
    scores: dict[int, float] = field(default_factory=dict)
    """Per-trajectory score the method ranked by (sample_id -> score), when it has one (the selector:
    every candidate; merged answers under their first trajectory's id)."""
    correct: float | None = None
    """Exact match of `answer` against the pool's gold answers, when the method knows it (the selector)."""
    weights: dict[int, float] | None = None
    """Distribution over trajectories for expectation methods; the pick is scored as their weighted mean."""
    tokens_in: int = 0
    """Prompt tokens the method spent on this question (LLM methods)."""
    tokens_out: int = 0
    """Generated tokens the method spent on this question (LLM methods)."""
    parse_failures: int = 0
    """Model outputs that could not be parsed and needed a fallback."""
    fallback: str | None = None
    """Why the method fell back to another rule for this question (None when it did not)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Method-specific details (report tokens, judge rubric scores, agent turns, ...)."""

    def to_dict(self) -> dict[str, Any]:
        """The selections-file row: question_id, sample_id, answer, scores (string keys), correct, then
        only those other fields that differ from their defaults."""
        out: dict[str, Any] = {"question_id": self.question_id, "sample_id": self.sample_id, "answer": self.answer,
                               "scores": {str(k): v for k, v in self.scores.items()}, "correct": self.correct}
        if self.weights is not None:
            out["weights"] = {str(k): v for k, v in self.weights.items()}
        for name, default in (("tokens_in", 0), ("tokens_out", 0), ("parse_failures", 0), ("fallback", None)):
            if getattr(self, name) != default:
                out[name] = getattr(self, name)
        if self.extra:
            out["extra"] = self.extra
        return out

"""What a trajectory read, and whether an answer occurs in it.

Weak policies often answer with an entity that appears nowhere in what they retrieved; an answer
copied from the evidence is much more often right (on the shipped wikileads train and test pools,
374 of 390 right answers, 96%, occur in their own trajectory's evidence, against 37% of wrong
ones). The graph builders turn this into answer-node features, and `grounded_vote` votes with it.

    words = evidence_words(traj)
    mentions(words, normalize_answer(traj.answer))   # whole normalised words, e.g. "paris" not in "parisian"

Dashes that separate words (en and em dash, minus sign) become spaces before the answer normalisation
drops punctuation: otherwise a life span "(1483–1546)" reads as one word "14831546" and a year answer
is never found in it. On the multi-hop train pool (bridge questions end in a year of a life span)
this turned 223 of 1,406 answers from "not read" into "read", and what the feature says flipped:
answers not read were right more often (20.2%) than read ones (10.3%) before, and 6.4% against 20.7%
after. On the wikileads pools it changes 15 of 12,156 answers. The ASCII hyphen still joins
("Jean-Paul" -> "jeanpaul", as in the normalised answer).
"""

from __future__ import annotations

from trace_selector.records.answers import normalize_answer
from trace_selector.records.trajectory import Document, Step, Trajectory


def passage_text(doc: Document) -> str:
    """A retrieved passage as read (and as a chunk node is embedded): title line, then the text."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


_SEPARATING_DASHES = str.maketrans({"\u2012": " ", "\u2013": " ", "\u2014": " ", "\u2015": " ", "\u2212": " "})
"""Figure, en, em dash, horizontal bar and minus sign: between words they separate, never join."""


def _step_text(step: Step) -> list[str]:
    """What one step returned: its passages, or the tool's text when it recorded none."""
    if step.documents:
        return [passage_text(d) for d in step.documents]
    return [step.search_result] if step.search_result else []


def _words(parts: list[str]) -> str:
    return f" {normalize_answer(' '.join(parts).translate(_SEPARATING_DASHES))} "


def evidence_words(traj: Trajectory) -> str:
    """Everything `traj` read (retrieved passages with titles, opened pages, find results),
    normalised like answers and padded with one space on each side."""
    return _words([part for step in traj.steps for part in _step_text(step)])


def last_read_words(traj: Trajectory) -> str:
    """What the last step that returned something read, like `evidence_words`: the last hop's
    passages. A multi-step policy's answer comes from its last hop when it follows the chain; on the
    multi-hop train pool, answers in the last hop's passages were right 21.3% of the time, answers
    read only in an earlier hop 8.0%, unread ones 6.9%."""
    for step in reversed(traj.steps):
        if parts := _step_text(step):
            return _words(parts)
    return "  "


def first_read_words(traj: Trajectory) -> str:
    """What the first step that returned something read, like `evidence_words`: the first hop's
    passages. An answer read in a trajectory's evidence but not here was reached by a later hop."""
    for step in traj.steps:
        if parts := _step_text(step):
            return _words(parts)
    return "  "


def mentions(words: str, answer: str) -> bool:
    """True if the normalised `answer` occurs as whole words in `words` (from `evidence_words`)."""
    return bool(answer) and f" {answer} " in words


def is_grounded(traj: Trajectory) -> bool:
    """True if the trajectory's own answer occurs in the evidence it read."""
    return mentions(evidence_words(traj), normalize_answer(traj.answer))

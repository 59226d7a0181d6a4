"""Calibrated selector confidence: how sure a selector is of its pick, as a number that outcomes can
check.

A selector scores every candidate of a question (one logit per trajectory). The confidence of its pick
is the softmax mass of the *chosen answer*: the logits are divided by a temperature T, softmaxed over
the candidates, and the probabilities of all candidates whose answers normalise to the chosen one
(`records.answers.normalize_answer`) are summed. The ``margin`` variant subtracts the mass of the best
other answer. One T per selector is fitted on a pool by minimising the negative log-likelihood of "the
chosen answer is correct" (temperature scaling, Guo et al. 2017, https://arxiv.org/abs/1706.04599).
Calibration is judged by the expected calibration error over 10 equal-width bins and shown as a
reliability diagram (`plot_reliability`; ``trace-selector evaluate ... --calibration reliability.png``).

    items = [scored_pick(g, p, correct) for g, p, correct in ...]     # None for picks without scores
    t = fit_temperature([i for i in items if i])
    conf = confidences(items, t)                                      # one per item
    report = calibrate(items, temperature=t, source="dev pool")       # ECE at t and at T = 1

A question whose candidates all give one answer has confidence 1 at every temperature: the softmax is
over the candidates that exist, so T cannot express doubt about answers no trajectory gave. Such
picks carry no information about T and are left out of the fit (`Calibration.unanimous` counts them);
they stay in the ECE, where a unanimous-but-wrong share shows up in the top bin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trace_selector.records import QuestionGroup
from trace_selector.records.answers import normalize_answer
from trace_selector.records.pick import Pick
from trace_selector.types import ConfidenceKind

ECE_BINS = 10
"""Equal-width confidence bins of the expected calibration error and the reliability diagram."""
TEMPERATURE_RANGE = (1e-2, 1e3)
"""Bounds of the fitted temperature. The shipped selectors' logits span about +-40 (a learned output
scale up to `ModelConfig.max_scale`), so T well above 1 must be reachable; at either bound the
confidences are already all 0/1 or all uniform."""
FIT_GRID = 61
"""Log-spaced temperatures tried before the golden-section refinement (10 per decade of the range)."""
FIT_TOLERANCE = 1e-4
"""Refinement stops when the bracket on log T is this narrow (a relative change of 0.01% in T)."""
NLL_EPS = 1e-12
"""Probabilities are clipped to [eps, 1 - eps] in the NLL, so one wrong pick at confidence 1 costs a
finite amount."""


@dataclass(frozen=True, slots=True)
class Scored:
    """One pick's candidate logits, grouped by normalised answer, and whether the pick is right."""

    logits: tuple[float, ...]
    """Candidate scores as the selector returned them (one per candidate)."""
    answer: tuple[int, ...]
    """Answer group of each candidate: 0 is the chosen answer, 1, 2, ... the others (first-seen order)."""
    correct: bool | None = None
    """The chosen answer is correct (None when unknown, e.g. during an online decision)."""

    @property
    def unanimous(self) -> bool:
        """Every candidate gives the chosen answer: confidence 1 at every temperature."""
        return all(a == 0 for a in self.answer)


def scored_pick(group: QuestionGroup, pick: Pick, correct: bool | None = None) -> Scored | None:
    """A pick's `Scored` form from its per-trajectory scores (keys: sample ids of `group`); None when the
    pick has no scores (a fallback) or none of its scored candidates gives the chosen answer."""
    if not pick.scores:
        return None
    answers = {t.sample_id: normalize_answer(t.answer) for t in group.trajectories}
    chosen = normalize_answer(pick.answer)
    slots: dict[str, int] = {chosen: 0}
    logits, groups = [], []
    for sid, score in pick.scores.items():
        if sid not in answers or not math.isfinite(score):
            continue
        logits.append(float(score))
        groups.append(slots.setdefault(answers[sid], len(slots)))
    if 0 not in groups:
        return None
    return Scored(tuple(logits), tuple(groups), correct)


def _pack(items: Sequence[Scored]) -> tuple[np.ndarray, np.ndarray]:
    """[N, M] logits padded with -inf and [N, M] answer groups padded with -1."""
    width = max((len(i.logits) for i in items), default=0)
    logits = np.full((len(items), width), -np.inf)
    groups = np.full((len(items), width), -1, dtype=int)
    for row, item in enumerate(items):
        logits[row, : len(item.logits)] = item.logits
        groups[row, : len(item.answer)] = item.answer
    return logits, groups


def _answer_mass(logits: np.ndarray, groups: np.ndarray, temperature: float, answer: int) -> np.ndarray:
    """Softmax mass (at `temperature`) of answer group `answer` in every row (0 where it is absent)."""
    z = logits / temperature
    top = np.max(z, axis=1, keepdims=True)
    e = np.where(groups >= 0, np.exp(z - top), 0.0)
    return (e * (groups == answer)).sum(axis=1) / e.sum(axis=1)


def confidences(items: Sequence[Scored | None], temperature: float = 1.0,
                kind: ConfidenceKind = "probability") -> list[float | None]:
    """The confidence of each pick at `temperature`: the chosen answer's softmax mass (``probability``)
    or that mass minus the largest other answer's (``margin``, in [-1, 1]); None where `items` has None."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if kind not in ("probability", "margin"):
        raise ValueError(f"confidence kind must be probability or margin, got {kind!r}")
    present = [i for i in items if i is not None]
    if not present:
        return [None] * len(items)
    logits, groups = _pack(present)
    value = _answer_mass(logits, groups, temperature, 0)
    if kind == "margin":
        others = [_answer_mass(logits, groups, temperature, a) for a in range(1, int(groups.max()) + 1)]
        value = value - (np.max(others, axis=0) if others else 0.0)
    it = iter(value.tolist())
    return [None if i is None else next(it) for i in items]


def nll(items: Sequence[Scored], temperature: float) -> float:
    """Mean negative log-likelihood of the labels of `items` (all labelled) under the chosen answer's mass."""
    if not items:
        return 0.0
    logits, groups = _pack(items)
    p = np.clip(_answer_mass(logits, groups, temperature, 0), NLL_EPS, 1.0 - NLL_EPS)
    y = np.array([bool(i.correct) for i in items])
    return float(-np.mean(np.where(y, np.log(p), np.log1p(-p))))


def fit_temperature(items: Sequence[Scored | None]) -> float:
    """The temperature in `TEMPERATURE_RANGE` minimising the NLL of the labelled, non-unanimous items:
    a log-spaced grid, then golden-section search between the best grid point's neighbours. 1.0 when
    no item says anything about T (all unanimous, unlabelled or missing)."""
    useful = [i for i in items if i is not None and i.correct is not None and not i.unanimous]
    if not useful:
        return 1.0
    logits, groups = _pack(useful)
    y = np.array([bool(i.correct) for i in useful])

    def loss(log_t: float) -> float:
        p = np.clip(_answer_mass(logits, groups, math.exp(log_t), 0), NLL_EPS, 1.0 - NLL_EPS)
        return float(-np.mean(np.where(y, np.log(p), np.log1p(-p))))

    grid = np.linspace(math.log(TEMPERATURE_RANGE[0]), math.log(TEMPERATURE_RANGE[1]), FIT_GRID)
    values = [loss(g) for g in grid]
    best = int(np.argmin(values))
    lo, hi = grid[max(0, best - 1)], grid[min(len(grid) - 1, best + 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = loss(a), loss(b)
    while hi - lo > FIT_TOLERANCE:
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = loss(b)
    refined = (lo + hi) / 2.0
    # The grid point wins when the minimum sits on a bound of the range.
    return float(math.exp(refined if loss(refined) <= values[best] else grid[best]))


@dataclass(frozen=True, slots=True)
class Reliability:
    """Accuracy against confidence in equal-width bins over [0, 1]."""

    counts: tuple[int, ...]
    """Picks per bin."""
    confidence: tuple[float | None, ...]
    """Mean confidence per bin (None for an empty bin)."""
    accuracy: tuple[float | None, ...]
    """Share of correct picks per bin (None for an empty bin)."""
    ece: float
    """Expected calibration error: sum over bins of (bin share) x |accuracy - mean confidence|."""

    def to_dict(self) -> dict[str, Any]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 4)

        return {"counts": list(self.counts), "confidence": [r(v) for v in self.confidence],
                "accuracy": [r(v) for v in self.accuracy], "ece": round(self.ece, 4)}


def reliability(confidence: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> Reliability:
    """Bin picks by confidence (bin i holds [i/bins, (i+1)/bins), the last one also 1.0) and compare."""
    if len(confidence) != len(correct):
        raise ValueError(f"{len(confidence)} confidences for {len(correct)} outcomes")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    c = np.clip(np.asarray(confidence, dtype=float), 0.0, 1.0)
    y = np.asarray(correct, dtype=float)
    index = np.minimum((c * bins).astype(int), bins - 1)
    counts, conf, acc, ece = [], [], [], 0.0
    for b in range(bins):
        mask = index == b
        n = int(mask.sum())
        counts.append(n)
        if n:
            conf.append(float(c[mask].mean()))
            acc.append(float(y[mask].mean()))
            ece += n / len(c) * abs(acc[-1] - conf[-1])
        else:
            conf.append(None)
            acc.append(None)
    return Reliability(tuple(counts), tuple(conf), tuple(acc), float(ece))


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> float:
    """ECE over `bins` equal-width bins (0 for no picks)."""
    return reliability(confidence, correct, bins).ece if len(confidence) else 0.0


@dataclass(frozen=True, slots=True)
class Calibration:
    """How well one selector's confidences match its outcomes on one pool."""

    temperature: float
    """The temperature the confidences are read at."""
    source: str
    """Where that temperature comes from (the pool it was fitted on, "given", or "none" for T = 1)."""
    calibrated: Reliability
    """Reliability at `temperature`."""
    uncalibrated: Reliability
    """Reliability at T = 1."""
    n: int
    """Labelled picks with scores (the ECE's population)."""
    unanimous: int
    """Of those, picks whose candidates all give one answer (confidence 1 at any T)."""
    unscored: int = 0
    """Picks left out: no scores (fallbacks) or no label."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What the picks are (e.g. every wave of an adaptive run), for the reader."""

    def to_dict(self) -> dict[str, Any]:
        return {"temperature": round(self.temperature, 4), "temperature_source": self.source,
                "ece": round(self.calibrated.ece, 4), "ece_uncalibrated": round(self.uncalibrated.ece, 4),
                "n": self.n, "unanimous": self.unanimous, "unscored": self.unscored,
                "bins": self.calibrated.to_dict(), **self.extra}


def calibrate(items: Sequence[Scored | None], temperature: float | None = None, source: str = "",
              bins: int = ECE_BINS) -> Calibration:
    """Reliability of labelled `items` at `temperature` (None: fitted on these items, in-sample, which
    `source` should then say) and at T = 1."""
    labelled = [i for i in items if i is not None and i.correct is not None]
    if temperature is None:
        temperature = fit_temperature(labelled)
    y = [bool(i.correct) for i in labelled]
    after = [float(c) for c in confidences(labelled, temperature) if c is not None]
    before = [float(c) for c in confidences(labelled, 1.0) if c is not None]
    return Calibration(temperature, source, reliability(after, y, bins), reliability(before, y, bins), len(labelled),
                       sum(1 for i in labelled if i.unanimous), len(items) - len(labelled))


def plot_reliability(rows: dict[str, Calibration], path: str | Path, title: str = "") -> None:
    """Reliability diagram PNG: accuracy against mean confidence per bin, one line per row, at T = 1
    (left) and at each row's temperature (right), with the diagonal of perfect calibration."""
    from matplotlib.figure import Figure

    from trace_selector.atomic import atomic_write

    fig = Figure(figsize=(9.6, 4.2))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, which in zip(axes, ("uncalibrated", "calibrated")):
        ax.plot([0, 1], [0, 1], ls="--", color="black", lw=0.8, label="perfect")
        for name, cal in rows.items():
            rel: Reliability = getattr(cal, which)
            pts = [(c, a) for c, a in zip(rel.confidence, rel.accuracy) if c is not None and a is not None]
            t = 1.0 if which == "uncalibrated" else cal.temperature
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                    label=f"{name} (T={t:.3g}, ECE {rel.ece:.3f})")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence of the chosen answer")
        ax.set_title(("T = 1" if which == "uncalibrated" else "temperature-scaled") + (f": {title}" if title else ""),
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("accuracy")
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)

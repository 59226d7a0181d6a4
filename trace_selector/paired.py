"""Paired differences between two selection methods on the same questions, with a bootstrap interval.

Two methods scored on one pool see the same questions, and most questions are right (or wrong) for
both, so the spread of their EM difference is far smaller than the spread of either EM. Resampling
questions and taking the mean per-question difference keeps that pairing; comparing two unpaired
intervals would throw it away and call real gaps noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

BOOTSTRAP_RESAMPLES = 10_000
"""Resamples of the questions behind every interval unless told otherwise."""


@dataclass(frozen=True, slots=True)
class Paired:
    """Method A minus method B over the same questions, in points (per-question scores x 100), or in
    the unit of `paired_difference`'s `scale` (trajectories used, with scale 1)."""

    diff: float
    """Mean per-question difference."""
    low: float
    """2.5th percentile of the bootstrapped mean difference."""
    high: float
    """97.5th percentile of the bootstrapped mean difference."""
    won: int
    """Questions where A scores higher than B."""
    lost: int
    """Questions where A scores lower than B."""
    n: int
    """Questions compared."""

    @property
    def significant(self) -> bool:
        """The 95% interval excludes zero."""
        return self.low > 0.0 or self.high < 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    def to_text(self) -> str:
        """``+3.1 [+1.0, +5.2] 24/9``: difference, 95% interval, questions won/lost."""
        return f"{points(self.diff)} [{points(self.low)}, {points(self.high)}] {self.won}/{self.lost}"


def points(x: float) -> str:
    """Signed, one decimal; a rounded -0.0 prints as +0.0."""
    return f"{round(x, 1) + 0.0:+.1f}"


def paired_difference(a: Sequence[float], b: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = 0, scale: float = 100.0) -> Paired:
    """`a` minus `b`, where both hold one score in [0, 1] per question, in the same question order.

    The interval is the percentile bootstrap over questions (`resamples` draws with replacement,
    seeded, so a rerun prints the same numbers). Differences are multiplied by `scale`: 100 turns
    scores into points; 1 keeps any other per-question quantity (trajectories used) in its own unit."""
    import numpy as np

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired scores need two equal-length 1-D sequences, got {x.shape} and {y.shape}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if len(x) == 0:
        return Paired(0.0, 0.0, 0.0, 0, 0, 0)
    d = scale * (x - y)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    # Chunked so 10k resamples of a few thousand questions never hold one giant index matrix.
    step = max(1, 2_000_000 // len(d))
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        means[start:stop] = d[rng.integers(0, len(d), size=(stop - start, len(d)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Paired(float(d.mean()), float(low), float(high), int((d > 0).sum()), int((d < 0).sum()), len(d))

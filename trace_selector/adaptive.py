"""Offline adaptive sampling: stop drawing trajectories for a question once a method is sure, replayed on
a finished pool.

Each question's trajectories arrive in the pool's sample order (sample_id) in waves of `wave` (the
last wave may be smaller). After every wave a method picks an answer from the trajectories seen so
far and a stopping rule decides, from that prefix alone, whether to stop or wait for the next wave;
after the last wave it stops anyway. The answer is the pick at the stopping wave, and the cost is the
trajectories (and generated tokens) seen by then. The rules:

- ``majority_adaptive_ac``, Adaptive-Consistency (Aggarwal et al. 2023, https://arxiv.org/abs/2305.11860):
  with v1 votes for the leading answer and v2 for the runner-up (0 if there is none), the leader's
  share p has the posterior Beta(v1 + 1, v2 + 1); stop when P(p > 1/2) >= `AdaptiveConfig.ac_threshold`
  (0.95 in the paper). With integer parameters, P(p > 1/2) = P(Binomial(v1 + v2 + 1, 1/2) <= v1),
  exact (`beta_lead_probability`). At 0.95 a unanimous prefix stops at 4 votes (31/32 = 0.969; 3
  votes give 15/16 = 0.9375), a 6-1 split stops (247/256 = 0.965), a 5-1 split does not (0.9375).
  The paper decides after every sample; here only at wave ends, so it can overshoot by wave - 1.
- ``majority_adaptive_esc``, Early-Stopping Self-Consistency (Li et al. 2024,
  https://arxiv.org/abs/2401.10480): stop when the latest window of `wave` answers all agree (same
  normalised, non-empty answer); the answer is the majority over everything seen.
- ``<selector>_adaptive`` (``trace_adaptive``, ``trace_grounded_adaptive``, ...): the selector scores a
  graph built from the seen trajectories only (so vote features such as c/R describe the prefix), and
  the run stops when the calibrated confidence of its pick (calibration.py) is >= the row's threshold,
  from wave `AdaptiveConfig.min_waves` on. The confidence is a softmax over the answers *seen*, so a
  first wave whose trajectories agree reads 1.0 at any temperature; waiting for a second wave is what
  lets the selector see disagreement at all (on the dev pool, stopping on such first waves cost
  trace_grounded more than the 0.5-point tolerance). A prefix the selector cannot score (no trajectory
  with both an answer and a search result) never stops early.

Every wave of every question is computed once (`AdaptiveMethod.waves`): the decision at wave n reads
only wave n's prefix, so replaying a threshold on these waves (`WaveTable`) is exactly what an online
run would do, and a threshold sweep (`WaveTable.sweep`, the EM-vs-trajectories curve) or a choice of
threshold on a dev pool (`choose_threshold`) costs no further scoring.

The pool's sample order is one order of arrival; a new rollout of the same questions draws its first
trajectories at random. A threshold chosen on one order fits that order's luck, so choices and
expected figures replay many random orders (`arrival_orders`, `AdaptiveMethod.waves(orders=...)`)
and read the mean over them (`WaveTable.stack`): experiments/adaptive_selection.py ``--orders``.

    trace-selector evaluate --pool data/pools/wikileads-dev.jsonl.gz \\
        --checkpoint trace_grounded=checkpoints/wikileads-grounded \\
        --methods majority,majority_adaptive_ac,majority_adaptive_esc,trace_grounded,trace_grounded_adaptive \\
        --plot budget.png --calibration reliability.png adaptive.calibration_pool=<another pool>
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from trace_selector.baselines.pick import Method
from trace_selector.baselines.registry import ADAPTIVE_VOTE_METHODS
from trace_selector.calibration import Scored, confidences, scored_pick
from trace_selector.records import QuestionGroup
from trace_selector.records.answers import normalize_answer
from trace_selector.records.pick import Pick
from trace_selector.types import ConfidenceKind

ADAPTIVE_SUFFIX = "_adaptive"
"""``<selector row>_adaptive`` is the adaptive row of a selector checkpoint."""


@dataclass(slots=True)
class AdaptiveConfig:
    """Settings of the adaptive rows of `evaluate` (defaults < YAML < ``adaptive.KEY=VALUE``)."""

    wave: int = 2
    """Trajectories per wave: a method decides after every `wave` new trajectories (and ESC's window)."""
    ac_threshold: float = 0.95
    """Adaptive-Consistency: stop when the Beta posterior puts at least this much mass on the leader
    staying ahead (the paper's 0.95)."""
    trace_threshold: float = 0.95
    """Selector rows: stop when the calibrated confidence of the pick reaches this; choose it on a dev
    pool (`choose_threshold`, experiments/adaptive_selection.py)."""
    thresholds: dict[str, float] = field(default_factory=dict)
    """Per-row thresholds overriding the two above, e.g. ``{trace_grounded_adaptive: 0.9}``."""
    min_waves: int = 2
    """Selector rows never stop before this wave (1: from the first): a softmax over the first wave's
    answers alone is 1.0 whenever they agree."""
    confidence: ConfidenceKind = "probability"
    """Selector confidence: the chosen answer's softmax mass, or its margin over the next answer."""
    temperature: dict[str, float] = field(default_factory=dict)
    """Temperatures of selector rows by adaptive row name, e.g. fitted on a dev pool."""
    calibration_pool: str | None = None
    """Pool to fit each selector row's temperature on (every wave of every question) when
    `temperature` does not give it; with neither, T = 1 (uncalibrated; results.json says so)."""
    match_points: float = 0.5
    """Two rows whose EM differs by at most this many points count as equally accurate: their
    trajectories used are then paired question by question (``trajectories_vs_<row>``)."""
    curve_points: int = 40
    """Most thresholds per row in the EM-vs-trajectories curve (quantiles of the observed statistics)."""
    orders: int = 0
    """Random orders of arrival (`arrival_orders`, seeded by `evaluate`'s seed) each adaptive row is
    also replayed on: its ``over_orders`` entry (mean EM and trajectories, and their spread) and its
    curve then come from them, the expectation for a new rollout; 0: the pool's sample order alone."""

    def __post_init__(self) -> None:
        if self.wave < 1:
            raise ValueError(f"adaptive.wave must be >= 1, got {self.wave}")
        if self.min_waves < 1:
            raise ValueError(f"adaptive.min_waves must be >= 1, got {self.min_waves}")
        for name in ("ac_threshold", "trace_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"adaptive.{name} must be in [0, 1], got {getattr(self, name)}")
        if self.confidence not in ("probability", "margin"):
            raise ValueError(f"adaptive.confidence must be probability or margin, got {self.confidence!r}")
        for row, t in self.temperature.items():
            if not isinstance(t, (int, float)) or not t > 0:
                raise ValueError(f"adaptive.temperature of {row!r} must be a number > 0, got {t!r}")
        for row, t in self.thresholds.items():
            if not isinstance(t, (int, float)) or isinstance(t, bool):
                raise ValueError(f"adaptive.thresholds of {row!r} must be a number, got {t!r}")
        if self.match_points < 0:
            raise ValueError(f"adaptive.match_points must be >= 0, got {self.match_points}")
        if self.orders < 0:
            raise ValueError(f"adaptive.orders must be >= 0, got {self.orders}")
        if self.curve_points < 2:
            raise ValueError(f"adaptive.curve_points must be >= 2, got {self.curve_points}")

    def threshold(self, row: str) -> float:
        """The stopping threshold of an adaptive row (ESC has none: its window agreeing is the rule)."""
        if row in self.thresholds:
            return float(self.thresholds[row])
        if row == "majority_adaptive_esc":
            return 1.0
        return self.ac_threshold if row == "majority_adaptive_ac" else self.trace_threshold


def beta_lead_probability(v1: int, v2: int) -> float:
    """P(p > 1/2) for p ~ Beta(v1 + 1, v2 + 1): the posterior chance that the answer with v1 votes is
    ahead of the one with v2 (Adaptive-Consistency's stopping statistic).

    For integers a, b, P(Beta(a, b) <= x) = P(Binomial(a + b - 1, x) >= a), so the upper tail at 1/2 is
    P(Binomial(v1 + v2 + 1, 1/2) <= v1), summed exactly."""
    if v1 < 0 or v2 < 0:
        raise ValueError(f"vote counts must be >= 0, got {v1}, {v2}")
    n = v1 + v2 + 1
    return sum(math.comb(n, j) for j in range(v1 + 1)) / 2**n


def top_votes(group: QuestionGroup) -> tuple[int, int]:
    """Votes of the leading and the runner-up normalised answer (empty answers never vote)."""
    counts = Counter(a for a in (normalize_answer(t.answer) for t in group.trajectories) if a)
    top = sorted(counts.values(), reverse=True) + [0, 0]
    return top[0], top[1]


def window_agrees(group: QuestionGroup, window: int) -> bool:
    """The last `window` trajectories to arrive (the prefix's list order: `prefix_of`) all answer, with
    one normalised answer."""
    trajs = group.trajectories[-window:]
    answers = {normalize_answer(t.answer) for t in trajs}
    return len(trajs) == window and len(answers) == 1 and "" not in answers


class StopRule(Protocol):
    """A stopping statistic of a prefix and its pick; the run stops once it reaches `threshold`."""

    threshold: float

    def statistic(self, prefix: QuestionGroup, pick: Pick) -> float | None:
        """Higher is surer; None: cannot tell (never stops early)."""
        ...


@dataclass(slots=True)
class BetaRule:
    """Adaptive-Consistency's Beta stopping rule on the prefix's top two vote counts."""

    threshold: float = 0.95
    """Stop when `beta_lead_probability` reaches this."""

    def statistic(self, prefix: QuestionGroup, pick: Pick) -> float | None:
        v1, v2 = top_votes(prefix)
        return beta_lead_probability(v1, v2) if v1 else None


@dataclass(slots=True)
class WindowRule:
    """Early-Stopping Self-Consistency: 1 when the latest window of answers agrees, else 0."""

    window: int = 2
    """Answers in the window."""
    threshold: float = 1.0
    """1: stop on agreement (0 would stop after the first wave whatever it holds)."""

    def statistic(self, prefix: QuestionGroup, pick: Pick) -> float | None:
        return float(window_agrees(prefix, self.window))


@dataclass(slots=True)
class ConfidenceRule:
    """A selector's calibrated confidence in its pick (calibration.py)."""

    threshold: float = 0.95
    """Stop when the confidence reaches this."""
    temperature: float = 1.0
    """Temperature the logits are divided by."""
    kind: ConfidenceKind = "probability"
    """Chosen answer's mass, or its margin over the next answer."""
    min_trajectories: int = 0
    """Prefixes shorter than this cannot stop (statistic None)."""

    def statistic(self, prefix: QuestionGroup, pick: Pick) -> float | None:
        if len(prefix.trajectories) < self.min_trajectories:
            return None
        return confidences([scored_pick(prefix, pick)], self.temperature, self.kind)[0]


@dataclass(slots=True)
class Wave:
    """What a method knows about one question after one wave."""

    seen: int
    """Trajectories seen so far (the prefix length)."""
    pick: Pick
    """The method's pick on the prefix."""
    statistic: float | None
    """The stopping statistic of the prefix (None: cannot tell)."""
    tokens: int | None
    """Generated tokens of the prefix's trajectories (None when one of them does not record it)."""
    prefix: QuestionGroup
    """The trajectories seen (for calibration and tests)."""


def prefix_of(group: QuestionGroup, n: int, order: Sequence[int] | None = None) -> QuestionGroup:
    """The first n trajectories to arrive, in arrival order: by sample_id, or in `order` (sample ids,
    every one of the group's once: `arrival_orders`)."""
    if order is None:
        trajs = sorted(group.trajectories, key=lambda t: t.sample_id)[:n]
    else:
        by_id = {t.sample_id: t for t in group.trajectories}
        trajs = [by_id[sid] for sid in order[:n]]
    return QuestionGroup(group.question_id, group.question, group.golden_answers, trajs)


def arrival_orders(groups: Sequence[QuestionGroup], seed: int) -> list[list[int]]:
    """A random order of arrival of every question's trajectories (sample ids), from
    numpy's default_rng(seed). A new rollout of the same questions draws its first trajectories at
    random, so a threshold replayed on the pool's one sample order is one draw of what it will do; its
    expectation is the mean over many orders (experiments/adaptive_selection.py ``--orders``)."""
    rng = np.random.default_rng(seed)
    out = []
    for g in groups:
        ids = sorted(t.sample_id for t in g.trajectories)
        out.append([ids[i] for i in rng.permutation(len(ids))])
    return out


def generated_tokens(group: QuestionGroup) -> int | None:
    """Sum of the trajectories' `generated_tokens` (None when any lacks it)."""
    counts = [t.generated_tokens for t in group.trajectories]
    return None if any(c is None for c in counts) else int(sum(counts))  # type: ignore[arg-type]


def wave_sizes(k: int, wave: int) -> list[int]:
    """Prefix lengths after each wave: wave, 2 wave, ... and k itself (one empty wave when k = 0)."""
    return list(range(wave, k, wave)) + [k]


class AdaptiveMethod:
    """A selection method run wave by wave with a stopping rule.

    Args:
        name: the row (``majority_adaptive_ac``, ``trace_grounded_adaptive``, ...).
        base: the method that picks from a prefix (majority vote, a selector).
        rule: the stopping rule.
        wave: trajectories per wave.
    """

    def __init__(self, name: str, base: Method, rule: StopRule, wave: int = 2):
        if wave < 1:
            raise ValueError(f"wave must be >= 1, got {wave}")
        self.name = name
        self.base = base
        self.rule = rule
        self.wave = wave
        self.history: list[list[Wave]] = []
        """Every wave of every question of the last `select` call."""

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        return self.base.check(groups)

    def describe(self) -> dict[str, Any]:
        """Settings a reader needs next to the number."""
        out: dict[str, Any] = {"wave": self.wave, "threshold": self.rule.threshold, "rule": type(self.rule).__name__}
        if isinstance(self.rule, ConfidenceRule):
            out.update(temperature=round(self.rule.temperature, 4), confidence=self.rule.kind,
                       min_trajectories=self.rule.min_trajectories)
        return out

    def step(self, prefixes: Sequence[QuestionGroup]) -> list[tuple[Pick, float | None]]:
        """One decision per prefix (the trajectories seen so far of one question): the base method's
        pick, from one `base.select` call over all of them, and the rule's statistic. What `waves`
        computes at every wave, and what an online adaptive rollout asks after each one
        (trace_selector/adaptive_rollout.py); stop where `reaches(statistic, rule.threshold)`."""
        picks = self.base.select(prefixes)
        return [(pick, self.rule.statistic(prefix, pick)) for prefix, pick in zip(prefixes, picks)]

    def waves(self, groups: Sequence[QuestionGroup], orders: Sequence[Sequence[int]] | None = None,
              until_stopped: bool = False) -> list[list[Wave]]:
        """Every wave of every question. Wave n's picks come from one `step` over the questions that
        still have unseen trajectories, each cut to its first n x wave to arrive (by sample_id, or in
        `orders`, one list of sample ids per question: `arrival_orders`). With `until_stopped`, a
        question's waves end at the one that reaches the rule's threshold: `stopped_pick` is the same,
        and the later waves, which only the threshold sweep reads, are not scored."""
        if orders is not None and len(orders) != len(groups):
            raise ValueError(f"orders: {len(orders)} lists for {len(groups)} questions")
        sizes = [wave_sizes(len(g.trajectories), self.wave) for g in groups]
        out: list[list[Wave]] = [[] for _ in groups]
        stopped: set[int] = set()
        for n in range(max((len(s) for s in sizes), default=0)):
            live = [i for i, s in enumerate(sizes) if n < len(s) and i not in stopped]
            prefixes = [prefix_of(groups[i], sizes[i][n], None if orders is None else orders[i]) for i in live]
            for i, prefix, (pick, statistic) in zip(live, prefixes, self.step(prefixes)):
                out[i].append(Wave(len(prefix.trajectories), pick, statistic, generated_tokens(prefix), prefix))
                if until_stopped and reaches(statistic, self.rule.threshold):
                    stopped.add(i)
        return out

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        """The pick at each question's stopping wave, with what it cost in `Pick.extra`."""
        self.history = self.waves(groups)
        return [stopped_pick(w, self.rule.threshold) for w in self.history]


def reaches(statistic: float | None, threshold: float) -> bool:
    """The stopping rule's test: a statistic that can tell (not None) and is at least `threshold`."""
    return statistic is not None and statistic >= threshold


def stop_index(statistics: Sequence[float | None], threshold: float) -> int:
    """The first wave whose statistic `reaches` `threshold`; the last wave when none does."""
    for i, s in enumerate(statistics):
        if reaches(s, threshold):
            return i
    return len(statistics) - 1


def stopped_pick(waves: Sequence[Wave], threshold: float) -> Pick:
    """The pick of the stopping wave, its cost recorded in `Pick.extra`."""
    at = stop_index([w.statistic for w in waves], threshold)
    w = waves[at]
    extra = {**w.pick.extra, "trajectories_used": w.seen, "waves": at + 1,
             "stop_statistic": None if w.statistic is None else round(w.statistic, 6)}
    if w.tokens is not None:
        extra["generated_tokens"] = w.tokens
    return dataclasses.replace(w.pick, extra=extra)


def usage(group: QuestionGroup, pick: Pick) -> tuple[float, float | None]:
    """(trajectories, generated tokens) a pick used: an adaptive pick's own record; an expectation
    (`single`) one trajectory and its expected tokens; any other pick every trajectory of the group."""
    if "trajectories_used" in pick.extra:
        return float(pick.extra["trajectories_used"]), pick.extra.get("generated_tokens")
    if pick.weights is not None:
        by_id = {t.sample_id: t.generated_tokens for t in group.trajectories}
        known = all(by_id.get(sid) is not None for sid in pick.weights)
        tokens = sum(w * by_id[sid] for sid, w in pick.weights.items()) if known else None  # type: ignore[operator]
        return (1.0 if pick.weights else 0.0), tokens
    return float(len(group.trajectories)), generated_tokens(group)


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """One threshold of an adaptive row, replayed over the pool."""

    threshold: float
    """Stopping threshold (inf: never stop early, i.e. fixed K)."""
    em: float
    """EM in percent over the pool's questions."""
    mean_trajectories: float
    """Trajectories used per question."""
    mean_generated_tokens: float | None
    """Generated tokens used per question (None when the pool does not record them)."""

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": None if math.isinf(self.threshold) else round(self.threshold, 6), "em": round(self.em, 4),
                "mean_trajectories": round(self.mean_trajectories, 4),
                "mean_generated_tokens": None if self.mean_generated_tokens is None else round(self.mean_generated_tokens, 2)}


@dataclass(slots=True)
class WaveTable:
    """Every wave of every question as [questions, waves] arrays, for replaying thresholds."""

    statistic: np.ndarray
    """Stopping statistic (NaN: cannot tell, or padding)."""
    valid: np.ndarray
    """The wave exists (a question has ceil(K / wave) of them)."""
    seen: np.ndarray
    """Trajectories seen."""
    tokens: np.ndarray
    """Generated tokens seen (NaN when unknown)."""
    em: np.ndarray
    """EM in [0, 1] of the wave's pick."""

    @classmethod
    def build(cls, history: Sequence[Sequence[Wave]], groups: Sequence[QuestionGroup],
              score: Callable[[QuestionGroup, Pick], float]) -> WaveTable:
        """From `AdaptiveMethod.history`; `score` is the EM in [0, 1] of a pick on its full group."""
        width = max((len(h) for h in history), default=0)
        shape = (len(history), max(1, width))
        stat, seen = np.full(shape, np.nan), np.zeros(shape)
        tokens, em, valid = np.full(shape, np.nan), np.zeros(shape), np.zeros(shape, dtype=bool)
        for q, (waves, group) in enumerate(zip(history, groups)):
            for j, w in enumerate(waves):
                valid[q, j] = True
                stat[q, j] = np.nan if w.statistic is None else w.statistic
                seen[q, j] = w.seen
                tokens[q, j] = np.nan if w.tokens is None else w.tokens
                em[q, j] = score(group, w.pick)
        return cls(stat, valid, seen, tokens, em)

    @classmethod
    def stack(cls, tables: Sequence[WaveTable]) -> WaveTable:
        """Several replays of the same questions (one per order of arrival) as one table: its
        operating points are the means over the replays, and row r * questions + q is question q of
        replay r."""
        if not tables:
            raise ValueError("stack needs at least one table")
        width = max(t.statistic.shape[1] for t in tables)

        def pad(a: np.ndarray, fill: Any) -> np.ndarray:
            return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=fill)

        return cls(*(np.concatenate([pad(getattr(t, name), fill) for t in tables])
                     for name, fill in (("statistic", np.nan), ("valid", False), ("seen", 0.0), ("tokens", np.nan),
                                        ("em", 0.0))))

    def stops(self, threshold: float) -> np.ndarray:
        """Stopping wave of every question (`stop_index`, vectorised)."""
        with np.errstate(invalid="ignore"):
            hit = self.valid & (self.statistic >= threshold)
        last = np.maximum(self.valid.sum(axis=1) - 1, 0)
        return np.where(hit.any(axis=1), hit.argmax(axis=1), last)

    def from_wave(self, first: int) -> WaveTable:
        """The same waves with stopping allowed only from wave `first` (1-based) on."""
        statistic = self.statistic.copy()
        statistic[:, : max(0, first - 1)] = np.nan
        return WaveTable(statistic, self.valid, self.seen, self.tokens, self.em)

    def point(self, threshold: float) -> OperatingPoint:
        """EM and cost at one threshold."""
        return self.points([threshold])[0]

    def points(self, thresholds: Sequence[float]) -> list[OperatingPoint]:
        """EM and cost at each threshold, exactly and at once. A question's stopping wave moves only
        where the running maximum of its statistics rises (lowering the threshold past such a record
        moves the stop from the next record, or the last wave, to it), so the totals are the
        every-question-at-its-last-wave sums plus the changes of the records at or above the threshold:
        one sort of the records, where replaying each threshold would scan the whole table (tables
        stacked over many orders of arrival have tens of thousands of distinct statistics)."""
        n_rows, width = self.em.shape
        rows = np.arange(n_rows)
        stat = np.where(self.valid & ~np.isnan(self.statistic), self.statistic, -np.inf)
        last = np.maximum(self.valid.sum(axis=1) - 1, 0)
        # em, seen, known tokens and unknown-token counts: summed alike, [4, rows, waves]
        values = np.stack([self.em, self.seen, np.nan_to_num(self.tokens), np.isnan(self.tokens).astype(float)])
        base = values[:, rows, last].sum(axis=1)
        rising = np.maximum.accumulate(stat, axis=1)
        before = np.concatenate([np.full((n_rows, 1), -np.inf), rising[:, :-1]], axis=1)
        record = np.isfinite(stat) & (stat > before)
        # the next record after each wave (the last wave when there is none)
        at_or_after = np.minimum.accumulate(np.where(record, np.arange(width), width)[:, ::-1], axis=1)[:, ::-1]
        after = np.concatenate([at_or_after[:, 1:], np.full((n_rows, 1), width)], axis=1)
        nxt = np.where(after < width, after, last[:, None])
        q, j = np.nonzero(record)
        value = stat[q, j]
        order = np.argsort(-value, kind="stable")
        change = np.cumsum((values[:, q, j] - values[:, q, nxt[q, j]])[:, order], axis=1)
        falling = -value[order]  # ascending
        out = []
        n = max(1, n_rows)
        for t in thresholds:
            applied = int(np.searchsorted(falling, -t, side="right"))  # records >= t
            total = base + (change[:, applied - 1] if applied else 0.0)
            tokens = None if n_rows == 0 or total[3] > 0.5 else float(total[2]) / n
            out.append(OperatingPoint(float(t), 100.0 * float(total[0]) / n, float(total[1]) / n, tokens))
        return out

    def thresholds(self) -> list[float]:
        """Every threshold that gives a distinct operating point: the observed statistics, then inf."""
        finite = np.unique(self.statistic[self.valid & ~np.isnan(self.statistic)])
        return [float(t) for t in finite] + [math.inf]

    def sweep(self, points: int | None = None) -> list[OperatingPoint]:
        """Operating points over `thresholds` (at most `points` of them, evenly spaced in rank, the
        smallest and inf always kept)."""
        ts = self.thresholds()
        if points is not None and len(ts) > points:
            keep = sorted(set(np.linspace(0, len(ts) - 1, points).round().astype(int).tolist()))
            ts = [ts[i] for i in keep]
        return self.points(ts)


def choose_threshold(table: WaveTable, target_em: float | None = None, tolerance: float = 0.5) -> OperatingPoint:
    """The threshold that reaches `target_em` (default: the fixed-K EM, i.e. never stopping early)
    within `tolerance` points with the fewest trajectories per question (ties: higher EM, then the
    higher threshold); the most accurate point when none reaches it."""
    points = table.points(table.thresholds())
    target = table.point(math.inf).em if target_em is None else target_em
    good = [p for p in points if p.em >= target - tolerance - 1e-9]
    if not good:
        return max(points, key=lambda p: (p.em, -p.mean_trajectories))
    return min(good, key=lambda p: (p.mean_trajectories, -p.em, -p.threshold))


def build_adaptive(name: str, cfg: AdaptiveConfig, base: Method | None = None) -> AdaptiveMethod:
    """The adaptive row `name`: a vote rule of `ADAPTIVE_VOTE_METHODS` (on majority vote), or a
    selector row around `base` (its temperature from `cfg.temperature`, else 1)."""
    from trace_selector.baselines.voting import Majority

    threshold = cfg.threshold(name)
    if name == "majority_adaptive_ac":
        return AdaptiveMethod(name, Majority(), BetaRule(threshold), cfg.wave)
    if name == "majority_adaptive_esc":
        return AdaptiveMethod(name, Majority(), WindowRule(cfg.wave, threshold), cfg.wave)
    if name in ADAPTIVE_VOTE_METHODS or base is None:
        raise ValueError(f"adaptive row {name!r} needs a selector to wrap")
    rule = ConfidenceRule(threshold, float(cfg.temperature.get(name, 1.0)), cfg.confidence, cfg.min_waves * cfg.wave)
    return AdaptiveMethod(name, base, rule, cfg.wave)


def restate(history: Sequence[Sequence[Wave]], rule: StopRule) -> None:
    """Recompute every wave's statistic under `rule` (after its temperature or minimum changed); the
    picks stay, so no selector runs again."""
    for waves in history:
        for w in waves:
            w.statistic = rule.statistic(w.prefix, w.pick)


def wave_items(history: Sequence[Sequence[Wave]], groups: Sequence[QuestionGroup],
               score: Callable[[QuestionGroup, Pick], float]) -> list[Scored | None]:
    """Every wave's pick in the `calibration.Scored` form, labelled by `score` (EM on the full group),
    for fitting and checking the temperature the stopping rule reads its confidences at."""
    return [scored_pick(w.prefix, w.pick, score(g, w.pick) == 1.0)
            for waves, g in zip(history, groups) for w in waves]

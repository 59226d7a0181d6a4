"""DeepConf offline voting (Fu et al. 2025, "Deep Think with Confidence", https://arxiv.org/abs/2508.15260).

Definitions (the paper, Sec. 3, and its offline analysis code):

- token confidence C_i = -mean_j log P_i(j) over the top-k candidates at position i (k = 20), recorded
  at rollout time in `Step.token_conf` / `Trajectory.final_token_conf`; a peaked distribution has
  very negative tail log-probs and so a *high* C_i;
- group confidence: the mean C_i over a sliding window of `window` tokens (the paper's 2048), stride 1
  (n - window + 1 groups); a trace shorter than the window is one group, its mean;
- trajectory scores: ``mean`` (all tokens), ``tail`` (last `tail` tokens, the paper's 2048),
  ``bottom10`` (mean of the lowest floor(10% x groups) group confidences, at least one) and
  ``lowest`` (the lowest group). Our trajectories are far shorter than 2048 tokens (wikileads: about
  90), so with the paper's sizes every trace is one group and the four scores coincide: the mean
  confidence of its free tokens;
- weighted vote: each answered trajectory adds its score to its answer's total;
- filtering: among answered trajectories, keep those whose score reaches the (1 - eta) percentile
  (linear interpolation, numpy's default) and vote among them, weighted: DeepConf-low keeps
  eta = 10%, DeepConf-high 90%.

Fallback. A pool written before top-20 recording has only the sampled token's log-prob. With k = 1
the formula gives -log P(sampled), the token's *surprisal*, which grows when the model is unsure, so
it would rank the least sure trajectories first. The fallback therefore uses c_i = log P(sampled)
(<= 0, higher = surer) under the same windows and statistics, and votes with exp(score) (the
geometric-mean token probability of the span: positive and monotone in the score). Every pick says
which signal it used (`Pick.extra["signal"]`: ``token_conf`` or ``sampled_logprob``), and
`DeepConfVote.describe` reports the settings, so a results table never passes the fallback off as
DeepConf.

A trajectory's tokens are those of every turn in order (each step's tokens, then the final turn's).

Grammar-forced tokens. Our rollouts sample under a structured-output grammar and record log-probs
in vLLM's processed mode, where the grammar's mask is applied before the log-softmax: at a position
where the grammar allows one token, that token has log-prob 0 and the other 19 candidates are -inf,
read as `engines.base.CONF_FLOOR` (-20), so C_i = 19.0 whatever the model thought. Such positions say
nothing about the model, yet they sit in every turn (closing tags), so with `exclude_forced` (the
default) they are left out: a position counts as forced when its sampled log-prob is 0 and its C_i is
19, both to the three decimals pools store (`forced_positions`). This is read from what pools
already hold, so pools written before this rule need no new rollout. Positions where the grammar
allows two or three tokens (the first token of a tag) cannot be told apart from a very sure free
token after the fact and stay in; only new rollouts without the grammar, or that record the
unconstrained top-20, would remove them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from trace_selector.baselines.pick import majority_pick, pick_from
from trace_selector.records import QuestionGroup, Trajectory
from trace_selector.records.answers import has_answer, vote
from trace_selector.records.pick import Pick

ConfScore = Literal["mean", "tail", "bottom10", "lowest"]
"""Trajectory-level confidence scores."""
Signal = Literal["token_conf", "sampled_logprob"]
"""Which per-token signal a score was computed from (see the module docstring)."""

CONF_SCORES: tuple[str, ...] = ("mean", "tail", "bottom10", "lowest")
PAPER_WINDOW = 2048
"""DeepConf's group size and tail length, for traces of roughly 10^4 tokens."""
FORCED_CONF = 19.0
"""C_i of a position with one finite candidate among the top 20: -(0 + 19 x -20) / 20."""
STORED_EPS = 5e-4
"""Half the last stored decimal: pools round log-probs and confidences to three decimals."""
PERCENTILE_EPS = 1e-12
"""A score this close below the percentile threshold still passes (interpolation round-off)."""


@dataclass(slots=True)
class ConfidenceConfig:
    """How per-token confidences become one trajectory score, and which trajectories vote."""

    score: ConfScore = "bottom10"
    """Which trajectory score weights and filters the vote (the paper's offline tables lead with bottom-10%)."""
    window: int = PAPER_WINDOW
    """Group size in tokens: the paper's 2048, or the whole trajectory when shorter (every trajectory of
    our pools: wikileads has about 90 tokens on the WebQA dev pool, 113 on the browsing test pool, so
    ``bottom10`` = ``lowest`` = ``mean`` there). 16 (about half a turn) was our earlier setting, which
    gives some 60 groups per trajectory, the paper's regime of many overlapping windows at our scale."""
    tail: int = PAPER_WINDOW
    """Tokens of the ``tail`` score: the paper's 2048, or the whole trajectory when shorter. 32 (most of
    our final answer turn) was our earlier setting."""
    bottom_fraction: float = 0.1
    """Fraction of the lowest groups averaged by ``bottom10`` (floor, at least one group, as the paper's code)."""
    keep_top: float = 1.0
    """Filtering: the fraction eta of a question's answered trajectories that vote, by the percentile
    rule (DeepConf-low 0.1, DeepConf-high 0.9; 1.0 = all vote)."""
    exclude_forced: bool = True
    """Leave grammar-forced positions out of token confidences (module docstring); False counts every
    sampled token, as before."""

    def __post_init__(self) -> None:
        if self.score not in CONF_SCORES:
            raise ValueError(f"score must be one of {', '.join(CONF_SCORES)}, got {self.score!r}")
        if self.window < 1 or self.tail < 1:
            raise ValueError(f"window and tail must be >= 1, got window={self.window}, tail={self.tail}")
        if not 0.0 < self.bottom_fraction <= 1.0:
            raise ValueError(f"bottom_fraction must be in (0, 1], got {self.bottom_fraction}")
        if not 0.0 < self.keep_top <= 1.0:
            raise ValueError(f"keep_top must be in (0, 1], got {self.keep_top}")


# --- per-token signals ----------------------------------------------------------------------------

def token_logprobs(traj: Trajectory) -> list[float] | None:
    """All sampled-token log-probs of a trajectory in generation order, or None if it has none."""
    parts = [s.logprobs for s in traj.steps if s.logprobs] + ([traj.final_logprobs] if traj.final_logprobs else [])
    if not parts:
        return None
    return [float(x) for p in parts for x in p]


def forced_positions(logprobs: Sequence[float] | None, token_conf: Sequence[float]) -> list[bool]:
    """Which positions of a turn the grammar forced: sampled log-prob 0 and C = 19, to the stored
    precision (module docstring). Without log-probs nothing counts as forced."""
    if logprobs is None or len(logprobs) != len(token_conf):
        return [False] * len(token_conf)
    return [lp >= -STORED_EPS and c >= FORCED_CONF - STORED_EPS for lp, c in zip(logprobs, token_conf)]


def token_confidences(traj: Trajectory, exclude_forced: bool = False) -> list[float] | None:
    """All DeepConf token confidences of a trajectory in generation order (without grammar-forced
    positions when `exclude_forced`), or None when any turn that has sampled tokens lacks them (a
    partial record would silently drop turns from the windows) or no position is left."""
    turns = [(s.logprobs, s.token_conf) for s in traj.steps] + [(traj.final_logprobs, traj.final_token_conf)]
    out: list[float] = []
    for lps, conf in turns:
        if conf is None:
            if lps:
                return None
            continue
        forced = forced_positions(lps, conf) if exclude_forced else [False] * len(conf)
        out.extend(float(c) for c, f in zip(conf, forced) if not f)
    return out or None


def token_signal(traj: Trajectory, exclude_forced: bool = False) -> tuple[Signal, list[float]] | None:
    """The best per-token signal a trajectory has: DeepConf confidences, else sampled log-probs."""
    conf = token_confidences(traj, exclude_forced)
    if conf is not None:
        return "token_conf", conf
    lps = token_logprobs(traj)
    if lps is not None:
        return "sampled_logprob", lps
    return None


# --- scores ---------------------------------------------------------------------------------------

def group_confidences(values: Sequence[float], window: int) -> list[float]:
    """Mean of every `window` consecutive values (stride 1); one group, the mean, when shorter."""
    n = len(values)
    if n == 0:
        return []
    w = min(window, n)
    # Running sum: O(n) rather than O(n * w) for 2048-token windows over long traces.
    total = math.fsum(values[:w])
    out = [total / w]
    for i in range(w, n):
        total += values[i] - values[i - w]
        out.append(total / w)
    return out


def trajectory_confidence(values: Sequence[float], cfg: ConfidenceConfig) -> float:
    """The configured score of a non-empty sequence of per-token values."""
    if not values:
        raise ValueError("no per-token values to score")
    if cfg.score == "mean":
        return math.fsum(values) / len(values)
    if cfg.score == "tail":
        tail = values[-min(cfg.tail, len(values)) :]
        return math.fsum(tail) / len(tail)
    groups = group_confidences(values, cfg.window)
    if cfg.score == "lowest":
        return min(groups)
    # floor, as the paper's code (int(len * 0.1)): 9 groups -> the single lowest.
    keep = max(1, int(len(groups) * cfg.bottom_fraction + 1e-9))
    return math.fsum(sorted(groups)[:keep]) / keep


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def keep_top(scores: Sequence[float], fraction: float) -> list[bool]:
    """Which scores reach the (1 - fraction) percentile: DeepConf's filter (ties all pass)."""
    if fraction >= 1.0:
        return [True] * len(scores)
    threshold = percentile(scores, 100.0 * (1.0 - fraction))
    return [s >= threshold - PERCENTILE_EPS for s in scores]


# --- the method -----------------------------------------------------------------------------------

@dataclass(slots=True)
class DeepConfVote:
    """Confidence-weighted vote with optional filtering (see the module docstring).

    Per question, the signal is DeepConf's token confidence when any answered trajectory has it, else
    the sampled log-prob fallback; never a mix (the two are on different scales). An answered
    trajectory without the chosen signal gets the mean weight of those with it (neutral imputation,
    ``Pick.extra["imputed"]``); a question where none has either signal falls back to the majority vote.
    """

    cfg: ConfidenceConfig = field(default_factory=ConfidenceConfig)
    name: str = "weighted_token"
    _cache: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)

    def _scores(self, traj: Trajectory) -> dict[str, float]:
        # Budget-curve subsets revisit trajectories many times; windows are O(tokens), so cache.
        key = (traj.question_id, traj.sample_id)
        if key not in self._cache:
            out: dict[str, float] = {}
            conf = token_confidences(traj, self.cfg.exclude_forced)
            if conf is not None:
                out["token_conf"] = trajectory_confidence(conf, self.cfg)
            lps = token_logprobs(traj)
            if lps is not None:
                out["sampled_logprob"] = trajectory_confidence(lps, self.cfg)
            self._cache[key] = out
        return self._cache[key]

    def describe(self) -> dict[str, Any]:
        """Settings that belong next to the method's numbers in results.json."""
        return {"score": self.cfg.score, "window": self.cfg.window, "tail": self.cfg.tail,
                "bottom_fraction": self.cfg.bottom_fraction, "keep_top": self.cfg.keep_top,
                "exclude_forced": self.cfg.exclude_forced}

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        if any(self._scores(t) for g in groups for t in g.trajectories):
            return None
        return "pool has no token log-probabilities (Step.logprobs / final_logprobs) nor token confidences"

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        return [self._select_one(g) for g in groups]

    def _select_one(self, group: QuestionGroup) -> Pick:
        answered = [t for t in group.trajectories if has_answer(t)]
        per = {t.sample_id: self._scores(t) for t in answered}
        signal: Signal | None = next((s for s in ("token_conf", "sampled_logprob")
                                      if any(s in v for v in per.values())), None)  # type: ignore[misc]
        if signal is None:
            fallback = "no answered trajectory has token confidences or log-probabilities; majority vote"
            return majority_pick(group, fallback=fallback if answered else None)
        raw = {sid: v.get(signal) for sid, v in per.items()}
        known = [s for s in raw.values() if s is not None]
        mean = math.fsum(known) / len(known)
        scores = {sid: (s if s is not None else mean) for sid, s in raw.items()}
        # The paper sums C directly (C >= 0); the log-prob fallback is <= 0, so it votes with exp(score).
        weight = (lambda s: s) if signal == "token_conf" else math.exp
        passed = keep_top([scores[t.sample_id] for t in answered], self.cfg.keep_top)
        voters = [t for t, ok in zip(answered, passed) if ok]
        winner, _ = vote(voters, [weight(scores[t.sample_id]) for t in voters])
        extra: dict[str, Any] = {"signal": signal, "voters": len(voters)}
        imputed = sum(1 for s in raw.values() if s is None)
        if imputed:
            extra["imputed"] = imputed
        return pick_from(group, winner, scores={sid: float(s) for sid, s in scores.items()}, extra=extra)


def deepconf_vote(cfg: ConfidenceConfig | None = None, name: str = "weighted_token") -> DeepConfVote:
    """A `DeepConfVote` named `name`."""
    return DeepConfVote(cfg or ConfidenceConfig(), name)

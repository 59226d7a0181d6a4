"""Adaptive sampling in waves: draw a question's trajectories `wave` at a time and stop once a stop hook
says the question is decided, the engine's slots going to the questions still open.

The hook is a plain callable (`StopHook`): it gets the trajectories seen so far of every question
whose wave just finished and returns one `WaveDecision` each. This package never learns what decides;
`trace-selector rollout ... adaptive.checkpoint=<selector>` passes a hook that scores the seen
trajectories with a trained selector (trace_selector/adaptive_rollout.py).

Scheduling (`WaveScheduler`): the run keeps `RolloutConfig.chunk_questions x k` trajectories in flight,
the same as a fixed-K run, spread over as many questions' waves as fit. When a wave finishes it is
decided at once and written to the shard; a question that goes on gets its next wave before any new
question starts, and a decided question's slots go to other questions' waves. With turn batches every
engine batch holds the current turn of every wave in flight, waves that start between turns joining
the next batch; with continuous batching (`AgentConfig.continuous`) a new wave joins the running
batch as soon as trajectories end and free its slots (in-process vLLM keeps stepping the requests in
flight in its engine-core process while the hook decides). Waves draw sample ids 0, 1, 2, ... in order, with the seeds a
fixed-K run gives them, so where per-request seeds apply (GPU) a question's waves are the first
trajectories of the fixed-K pool.

Each wave's decision is recorded on its last trajectory (`Trajectory.extra["wave_decision"]`:
wave, trajectories seen, confidence, and ``stop``: "confident", "budget" or null), so a killed run
resumes from its shard without asking the hook again: a question with k trajectories, or whose last
recorded wave stopped confident, is closed; any other gets its next wave. Trajectories without a record (a fixed-K pool being extended)
count as seen, and the question's next wave decides. The pool's sidecar sums the records up per
question (`adaptive_meta`), which `trace-selector validate` prints.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trace_selector.records import QuestionGroup, Trajectory
from trace_selector.rollout.agent import Rollout
from trace_selector.rollout.strategies.context import QuestionLike, StrategyContext
from trace_selector.types import ConfidenceKind

DECISION_KEY = "wave_decision"
"""`Trajectory.extra` key of the decision taken after the wave the trajectory closes."""


@dataclass
class AdaptiveRolloutConfig:
    """Online adaptive sampling (``adaptive.KEY=VALUE`` of `trace-selector rollout`)."""

    checkpoint: str | None = None
    """Selector checkpoint folder (or Hub id) that decides when a question has enough trajectories;
    None: every question gets k (no adaptive sampling)."""
    threshold: float = 0.95
    """Stop a question once the selector's calibrated confidence in its pick reaches this (choose it on
    a dev pool: experiments/adaptive_selection.py)."""
    wave: int = 2
    """Trajectories sampled per question between two decisions."""
    min_waves: int = 2
    """No question stops before this wave (1: from the first); as the offline rule, since a first wave
    whose answers agree reads confidence 1 at any temperature."""
    temperature: float | None = None
    """Temperature of the selector's confidence; None: the checkpoint's ``calibration.json``, else 1."""
    confidence: ConfidenceKind = "probability"
    """The chosen answer's softmax mass, or its margin over the next answer."""

    def __post_init__(self) -> None:
        if self.wave < 1:
            raise ValueError(f"adaptive.wave must be >= 1, got {self.wave}")
        if self.min_waves < 1:
            raise ValueError(f"adaptive.min_waves must be >= 1, got {self.min_waves}")
        if self.temperature is not None and not self.temperature > 0:
            raise ValueError(f"adaptive.temperature must be > 0 or null, got {self.temperature}")
        if self.confidence not in ("probability", "margin"):
            raise ValueError(f"adaptive.confidence must be probability or margin, got {self.confidence!r}")


@dataclass(frozen=True, slots=True)
class WaveDecision:
    """What the stop hook says about one question after one of its waves."""

    stop: bool
    """The question is decided: sample no more."""
    confidence: float | None = None
    """The statistic behind it (None: could not tell), recorded for the reader."""


StopHook = Callable[[Sequence[QuestionGroup]], Sequence[WaveDecision]]
"""Seen trajectories of the questions whose wave just finished (one group each, by sample id) ->
one decision per group."""


def last_decision(trajectories: Iterable[Trajectory]) -> dict[str, Any] | None:
    """The record of the latest decided wave among `trajectories` (None: none recorded)."""
    records = [t.extra[DECISION_KEY] for t in trajectories if isinstance(t.extra.get(DECISION_KEY), dict)]
    return max(records, key=lambda r: int(r.get("seen", 0)), default=None)


def question_record(trajectories: Sequence[Trajectory], k: int) -> dict[str, Any]:
    """How one question's sampling went: trajectories sampled, waves, and why it stopped: "confident"
    (at its last wave), "budget" (k reached) or "open" (a snapshot, a stopped run, or a larger k since:
    the same command samples more). Only a record of the last wave over all the trajectories counts."""
    record = last_decision(trajectories) or {}
    current = int(record.get("seen", -1)) == len(trajectories)
    stop = record.get("stop") if current else None
    if stop != "confident":
        stop = "budget" if len(trajectories) >= k else "open"
    return {"sampled": len(trajectories), "waves": record.get("wave") if current else None, "stop": stop,
            "confidence": record.get("confidence") if current else None}


def is_closed(trajectories: Sequence[Trajectory], k: int) -> bool:
    """No further wave: k trajectories seen, or the selector was sure after the last wave."""
    return question_record(trajectories, k)["stop"] != "open"


def adaptive_meta(cfg: AdaptiveRolloutConfig, groups: dict[str, list[Trajectory]], k: int) -> dict[str, Any] | None:
    """The pool sidecar's ``adaptive`` entry: settings, per question `question_record`, and totals; None
    when no trajectory carries a wave decision (a fixed-K pool)."""
    if not any(DECISION_KEY in t.extra for ts in groups.values() for t in ts):
        return None
    questions = {qid: question_record(ts, k) for qid, ts in groups.items()}
    stops = [q["stop"] for q in questions.values()]
    sampled = [q["sampled"] for q in questions.values()]
    return {**asdict(cfg), "k": k, "questions": questions,
            "stopped": {s: stops.count(s) for s in ("confident", "budget", "open") if s in stops},
            "mean_trajectories": round(sum(sampled) / max(1, len(sampled)), 4)}


@dataclass(slots=True)
class _Question:
    """Sampling state of one question."""

    question: QuestionLike
    seen: list[Trajectory]
    """Trajectories sampled so far (resumed and new), by sample id."""
    missing: deque[int]
    """Sample ids still to draw, in order."""
    wave: list[Rollout] = field(default_factory=list)
    """The wave in flight."""
    pending: int = 0
    """Rollouts of that wave not finished yet."""


class WaveScheduler:
    """Runs questions wave by wave through one `Agent.run`, asking `hook` after every wave.

    Args:
        ctx: the strategy context (agent, k, seeds).
        todo: (question, sample ids still missing) of every open question, in split order.
        seen: trajectories already sampled, by question id (from the shard).
        hook: decides after each wave.
        wave: trajectories per wave.
        slots: trajectories kept in flight (a wave starts while fewer are: up to slots + wave - 1).
        on_wave: called with each finished wave's trajectories, its decision recorded (the shard write).
        stopping: polled before a wave starts; once true no wave starts and the run drains.
        style: trajectory style ("webqa" or "browsing").
    """

    def __init__(self, ctx: StrategyContext, todo: Sequence[tuple[QuestionLike, Sequence[int]]],
                 seen: dict[str, list[Trajectory]], hook: StopHook, wave: int, slots: int,
                 on_wave: Callable[[list[Trajectory]], None], stopping: Callable[[], bool] = lambda: False,
                 style: str = "webqa"):
        if wave < 1 or slots < 1:
            raise ValueError(f"wave and slots must be >= 1, got {wave}, {slots}")
        self.ctx, self.hook, self.wave, self.slots = ctx, hook, wave, slots
        self.on_wave, self.stopping, self.style = on_wave, stopping, style
        states = [_Question(q, sorted(seen.get(str(q.id), []), key=lambda t: t.sample_id), deque(sorted(ids)))
                  for q, ids in todo]
        # Questions under way go first: their shard lines are already spent.
        self.ready: deque[_Question] = deque(s for s in states if s.seen)
        self.fresh: deque[_Question] = deque(s for s in states if not s.seen)
        self.owner: dict[int, _Question] = {}
        """id(rollout) -> its question, for the rollouts in flight."""
        self.in_flight = 0
        self.stopped = False
        """`stopping` refused a wave that had work to do."""

    def run(self) -> None:
        """Sample until every question is closed (or `stopping`); each wave goes to `on_wave`."""
        self.ctx.agent.run(self._admit(), on_batch=self.ctx.on_batch, on_finish=self._finished)

    def _admit(self) -> list[Rollout]:
        """Start waves while slots are free: questions under way first, then new ones."""
        out: list[Rollout] = []
        while self.in_flight < self.slots and (self.ready or self.fresh):
            if self.stopping():
                self.stopped = True
                break
            state = (self.ready or self.fresh).popleft()
            ids = [state.missing.popleft() for _ in range(min(self.wave, len(state.missing)))]
            state.wave = [self.ctx.start(state.question, s) for s in ids]
            state.pending = len(state.wave)
            self.owner.update((id(r), state) for r in state.wave)
            self.in_flight += len(ids)
            out.extend(state.wave)
        return out

    def _finished(self, rollouts: list[Rollout]) -> list[Rollout]:
        done: list[_Question] = []
        for r in rollouts:
            state = self.owner.pop(id(r))
            self.in_flight -= 1
            state.pending -= 1
            if state.pending == 0:
                done.append(state)
        if done:
            self._decide(done)
        return self._admit()

    def _decide(self, states: list[_Question]) -> None:
        """Ask the hook about every finished wave at once, record, write, and requeue the open ones."""
        waves = [[r.to_trajectory(self.style) for r in sorted(s.wave, key=lambda r: r.sample_id)] for s in states]
        groups = []
        for s, new in zip(states, waves):
            s.seen = sorted(s.seen + new, key=lambda t: t.sample_id)
            q = s.question
            groups.append(QuestionGroup(str(q.id), q.question, list(q.golden_answers), list(s.seen)))
        decisions = list(self.hook(groups))
        if len(decisions) != len(groups):
            raise ValueError(f"stop hook returned {len(decisions)} decisions for {len(groups)} questions")
        for s, new, d in zip(states, waves, decisions):
            full = not s.missing
            stop = "confident" if d.stop else ("budget" if full else None)
            new[-1].extra[DECISION_KEY] = {
                "wave": math.ceil(len(s.seen) / self.wave), "seen": len(s.seen),
                "confidence": None if d.confidence is None else round(float(d.confidence), 6), "stop": stop}
            s.wave, s.pending = [], 0
            self.on_wave(new)
            if stop is None:
                self.ready.append(s)

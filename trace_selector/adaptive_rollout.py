"""Online adaptive rollout: sample each question's trajectories in waves and stop as soon as a trained
selector is sure of its pick, the decision the offline ``<selector>_adaptive`` rows of `evaluate` replay
on a finished pool, taken while the pool is being written.

    trace-selector rollout --config rollout/wikileads-standard.yaml --split dev --limit 40 --k 16 \\
        --out pools/dev-adaptive.jsonl.gz agent.continuous=true \\
        adaptive.checkpoint=checkpoints/wikileads-grounded adaptive.threshold=0.9 adaptive.temperature=0.6

After each wave of a question, `SelectorStop` scores a graph built from that question's trajectories
seen so far with `AdaptiveMethod.step`, the offline replay's own step (the selector's pick through
`TraceMethod`, its calibrated confidence through `ConfidenceRule`, from wave ``adaptive.min_waves``
on), and the question stops when the confidence reaches ``adaptive.threshold``, or at k. So on a pool
written this way, `evaluate --methods trace_adaptive` with the same settings stops every question at
the wave where it stopped here (tests/test_adaptive_rollout.py holds the two equal).

The temperature the confidence is read at: ``adaptive.temperature``, else the checkpoint folder's
``calibration.json`` (``trace-selector calibrate --checkpoint C --pool <dev pool>`` writes it;
checkpoint_calibration.py), else 1 (uncalibrated, which the run
says). Choose the threshold on a dev pool (experiments/adaptive_selection.py).

Layering: the rollout package schedules waves and knows only a plain stop hook (rollout/waves.py); this
module sits above both the rollout and the selector, builds the hook and hands it to `run_rollout`.
The selector loads at the hook's first call, after the engine has started.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trace_selector.errors import InputError
from trace_selector.records import QuestionGroup
from trace_selector.rollout.runner import RolloutConfig, RolloutReport, run_rollout
from trace_selector.rollout.waves import AdaptiveRolloutConfig, WaveDecision

ROW = "trace"
"""Name of the selector row whose adaptive sibling (``trace_adaptive``) decides."""


def resolve_temperature(cfg: AdaptiveRolloutConfig) -> tuple[float, str]:
    """(temperature, where it comes from): `cfg.temperature`, the checkpoint's calibration file, or 1."""
    if cfg.temperature is not None:
        return float(cfg.temperature), "given"
    if cfg.checkpoint is not None:
        from trace_selector.model.hub import CALIBRATION_FILE, read_temperature

        found = read_temperature(cfg.checkpoint)
        if found is not None:
            return found, str(Path(cfg.checkpoint) / CALIBRATION_FILE)
    return 1.0, "none (T = 1, uncalibrated: set adaptive.temperature)"


class SelectorStop:
    """The stop hook of an adaptive rollout: a question is decided when the selector's calibrated
    confidence in its pick from the seen trajectories reaches the threshold.

    Args:
        cfg: the rollout's adaptive settings (checkpoint, threshold, wave, min_waves, confidence).
        temperature: the temperature the confidence is read at (`resolve_temperature`).
        encoder_threads: CPU threads of the selector's text encoder (None: its default).
    """

    def __init__(self, cfg: AdaptiveRolloutConfig, temperature: float = 1.0, encoder_threads: int | None = None):
        if cfg.checkpoint is None:
            raise InputError("adaptive rollout needs adaptive.checkpoint (a selector folder or Hub id)")
        self.cfg = cfg
        self.temperature = temperature
        self.encoder_threads = encoder_threads
        self.method: Any = None
        """The `AdaptiveMethod` that decides, built at the first call (after the engine started)."""
        self.calls = 0
        """Hook calls (one per engine batch, or per finished wave with continuous batching)."""
        self.questions = 0
        """Question waves decided."""
        self.seconds = 0.0
        """Time spent deciding, selector loading included."""

    def _build(self) -> Any:
        from trace_selector.adaptive import ADAPTIVE_SUFFIX, AdaptiveConfig, build_adaptive
        from trace_selector.evaluate import TraceMethod
        from trace_selector.records import Pool

        trace = TraceMethod(self.cfg.checkpoint, Pool(groups=[]), name=ROW, encoder_threads=self.encoder_threads)
        if trace.reason is not None:
            raise InputError(f"adaptive.checkpoint {self.cfg.checkpoint}: {trace.reason}")
        row = ROW + ADAPTIVE_SUFFIX
        settings = AdaptiveConfig(wave=self.cfg.wave, min_waves=self.cfg.min_waves, confidence=self.cfg.confidence,
                                  thresholds={row: self.cfg.threshold}, temperature={row: self.temperature})
        return build_adaptive(row, settings, trace)

    def __call__(self, groups: Sequence[QuestionGroup]) -> list[WaveDecision]:
        from trace_selector.adaptive import reaches

        t0 = time.perf_counter()
        if self.method is None:
            self.method = self._build()
        decisions = [WaveDecision(reaches(statistic, self.method.rule.threshold), statistic)
                     for _, statistic in self.method.step(list(groups))]
        self.calls += 1
        self.questions += len(decisions)
        self.seconds += time.perf_counter() - t0
        return decisions

    def describe(self) -> str:
        return (f"selector decided {self.questions} waves in {self.calls} calls, {self.seconds:.1f} s "
                f"(threshold {self.cfg.threshold}, T={self.temperature:g})")


def run_adaptive_rollout(cfg: RolloutConfig, out: str | Path, *, engine: Any = None, toolbox: Any = None,
                         questions: list[Any] | None = None, progress: bool = True,
                         encoder_threads: int | None = None) -> tuple[RolloutReport, SelectorStop, str]:
    """`run_rollout` with the selector of `cfg.adaptive.checkpoint` deciding after every wave. The
    resolved temperature is written into `cfg.adaptive.temperature` (so the pool's sidecar and resolved
    config record it). Returns the report, the hook (its time and calls) and the temperature's source."""
    temperature, source = resolve_temperature(cfg.adaptive)
    cfg.adaptive.temperature = temperature
    hook = SelectorStop(cfg.adaptive, temperature, encoder_threads)
    report = run_rollout(cfg, out, engine=engine, toolbox=toolbox, questions=questions, progress=progress,
                         stop_hook=hook)
    return report, hook, source

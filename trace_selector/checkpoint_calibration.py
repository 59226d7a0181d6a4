"""A selector checkpoint's confidence temperature, kept in the checkpoint folder as ``calibration.json``.

The adaptive rows of `evaluate` and the online adaptive rollout stop a question when the selector's
temperature-scaled confidence in its pick reaches a threshold (calibration.py), so a checkpoint is only
usable for stopping once its temperature is known. `fit_checkpoint` fits it the way those rows read it:
the pick after every wave of every question of a labelled pool the selector did not train on (its dev
pool), and `write_calibration` stores it with where it came from (`model.hub.read_temperature` reads
it back):

    trace-selector calibrate --checkpoint checkpoints/wikileads-grounded --pool data/pools/wikileads-dev.jsonl.gz

``{"temperature": T, ...}``: the other keys say what T was fitted on (pool, K, wave, picks) and how far
it moved the expected calibration error, so a reader can judge whether it applies to their pool.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_selector.errors import InputError
from trace_selector.model.hub import CALIBRATION_FILE

if TYPE_CHECKING:
    from trace_selector.calibration import Calibration
    from trace_selector.records import Pool


@dataclass(frozen=True, slots=True)
class CheckpointCalibration:
    """What ``calibration.json`` holds."""

    temperature: float
    """Logits are divided by this before the softmax over a question's candidates."""
    pool: str
    """The labelled pool it was fitted on."""
    questions: int
    """Questions of that pool used."""
    k: int
    """Trajectories per question read (the largest group after `--k`)."""
    wave: int
    """Trajectories per wave: picks were scored on prefixes of 1, 2, ... waves."""
    picks: int
    """Labelled wave picks with scores (the fit's population)."""
    unanimous: int
    """Of those, picks whose candidates all give one answer (confidence 1 at any temperature)."""
    ece_uncalibrated: float
    """Expected calibration error of those picks at T = 1."""
    ece: float
    """The same at `temperature` (in-sample: the fit's own picks)."""
    confidence: str = "probability"
    """The confidence that was fitted: the softmax mass of the chosen answer."""

    @property
    def at_bound(self) -> bool:
        """The fit ended at an end of `calibration.TEMPERATURE_RANGE` (scores unrelated to correctness,
        or every pick right)."""
        from trace_selector.calibration import TEMPERATURE_RANGE

        lo, hi = TEMPERATURE_RANGE
        return not lo * 1.01 < self.temperature < hi / 1.01

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("temperature", "ece", "ece_uncalibrated"):
            out[key] = round(out[key], 4)
        return out


def fit_checkpoint(checkpoint: str, pool: Pool, k: int | None = None, wave: int = 2, questions: int | None = None,
                   encoder_runtime: str | None = None) -> tuple[CheckpointCalibration, Calibration]:
    """Fit `checkpoint`'s temperature on every wave pick of `pool`'s first `questions` questions, each
    cut to its first `k` trajectories. Returns the file's contents and the full calibration (for the
    reliability diagram)."""
    from trace_selector.adaptive import AdaptiveConfig, build_adaptive, wave_items
    from trace_selector.calibration import calibrate, fit_temperature
    from trace_selector.evaluate import TraceMethod, restrict
    from trace_selector.scoring import em_of

    where = str(pool.path) if pool.path else "the pool"
    groups = restrict(pool.groups[:questions], k)
    if not groups:
        raise InputError(f"{where}: no questions to calibrate on")
    if not any(g.golden_answers or any(t.correct is not None for t in g.trajectories) for g in groups):
        raise InputError(f"{where}: no gold answers or correctness labels: a temperature needs labelled picks")
    trace = TraceMethod(checkpoint, pool, encoder_runtime=encoder_runtime)
    if trace.reason:
        raise InputError(f"{checkpoint}: {trace.reason}")
    method = build_adaptive("trace_adaptive", AdaptiveConfig(wave=wave), trace)
    items = wave_items(method.waves(groups), groups, em_of)
    if not any(i is not None and not i.unanimous for i in items):
        raise InputError(f"{where}: every scored pick is unanimous or unlabelled: nothing to fit a temperature on")
    temperature = fit_temperature(items)
    cal = calibrate(items, temperature, f"fitted on {where}")
    record = CheckpointCalibration(
        temperature=temperature, pool=where, questions=len(groups), k=max(len(g.trajectories) for g in groups),
        wave=wave, picks=cal.n, unanimous=cal.unanimous, ece_uncalibrated=cal.uncalibrated.ece, ece=cal.calibrated.ece)
    return record, cal


def checkpoint_folder(checkpoint: str | Path) -> Path:
    """`checkpoint` as a local checkpoint folder, the only place a calibration file can go."""
    folder = Path(checkpoint)
    if not (folder / "config.json").is_file():
        raise InputError(f"{folder}: not a local checkpoint folder (no config.json); calibration.json is written "
                         f"beside a checkpoint's weights")
    return folder


def write_calibration(checkpoint: str | Path, record: CheckpointCalibration) -> Path:
    """Write `record` to ``<checkpoint>/calibration.json`` (atomically); returns the path."""
    from trace_selector.atomic import atomic_write

    path = checkpoint_folder(checkpoint) / CALIBRATION_FILE
    with atomic_write(path) as f:
        f.write(json.dumps(record.to_dict(), indent=2) + "\n")
    return path


def trained_on(checkpoint: str | Path, pool_path: str | Path) -> bool:
    """Whether `pool_path` is the pool `checkpoint` was trained on (its ``training_config.yaml``)."""
    import yaml

    config = Path(checkpoint) / "training_config.yaml"
    if not config.is_file():
        return False
    train_pool = ((yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("data") or {}).get("train_pool")
    return bool(train_pool) and Path(train_pool).resolve() == Path(pool_path).resolve()


__all__ = ["CheckpointCalibration", "checkpoint_folder", "fit_checkpoint", "trained_on", "write_calibration"]

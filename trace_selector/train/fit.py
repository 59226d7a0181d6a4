"""One training run with Lightning, from a resolved `TrainConfig` into one run folder.

    trace-selector train --config training/wikileads.yaml data.train_pool=data/pools/train.jsonl.gz
    trace-selector train --config training/synthetic.yaml optim.epochs=30 --resume

Run folder ``<out_dir>/<name>/``: ``config.yaml`` (resolved config, seed included),
``checkpoints/best.ckpt`` (best validation selection accuracy, ties to the lower validation loss with
``optim.tie_break``) and ``checkpoints/last.ckpt`` (for ``--resume``), ``logs/`` (CSV, always; W&B
too when ``trainer.wandb=true``), and ``selector/``: the best weights in Hub format (see model/hub.py) with
the resolved config beside them as ``training_config.yaml``, ready for `Selector.from_pretrained`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch

from trace_selector.config import dump_config, load_config, to_dict
from trace_selector.errors import InputError
from trace_selector.model import SelectorNet
from trace_selector.model.hub import TRAINING_CONFIG
from trace_selector.train.config import TrainConfig
from trace_selector.train.data import PoolDataModule
from trace_selector.train.module import SelectorModule, majority_accuracy

@dataclass(slots=True)
class TrainResult:
    """Where a run put its outputs and how well it did."""

    run_dir: Path
    best_checkpoint: Path | None
    last_checkpoint: Path | None
    selector_dir: Path | None
    """Hub-format export of the best weights (rank 0 only; None on other ranks)."""
    best_val_acc: float | None
    val_majority_acc: float | None
    """Majority vote's accuracy on the same validation questions: the bar the selector must clear."""
    global_step: int
    best_score: float | None = None
    """The monitored validation score of the best checkpoint (``optim.monitor``): what seeds are ranked by."""


def resolve_config(config_path: str | Path | None, overrides: list[str] | None = None, resume: bool = False) -> TrainConfig:
    """Defaults < YAML < overrides; with `resume`, the run folder's saved config < overrides."""
    cfg = load_config(TrainConfig, config_path, overrides)
    saved = cfg.run_dir / "config.yaml"
    if resume:
        if not saved.is_file():
            raise InputError(f"--resume: {saved} not found (no earlier run with this name)")
        cfg = load_config(TrainConfig, saved, overrides)
    return cfg


def _loggers(cfg: TrainConfig) -> list:
    from lightning.pytorch.loggers import CSVLogger

    loggers: list = [CSVLogger(save_dir=str(cfg.run_dir), name="logs")]
    if cfg.trainer.wandb:
        from trace_selector.extras import require

        require("wandb", "W&B logging (trainer.wandb=true)")
        from lightning.pytorch.loggers import WandbLogger

        loggers.append(WandbLogger(project=cfg.trainer.wandb_project, name=cfg.name or cfg.setting,
                                   save_dir=str(cfg.run_dir), offline=cfg.trainer.wandb_offline))
    return loggers


def _best_acc(trainer: L.Trainer, ckpt: Any, module: SelectorModule, dm: PoolDataModule, monitor: str) -> float | None:
    """Validation accuracy of the best checkpoint (its monitored score when that is the accuracy)."""
    if ckpt.best_model_score is None:
        return None
    if monitor == "val/acc":
        return float(ckpt.best_model_score)
    return float(trainer.validate(module, datamodule=dm, ckpt_path=ckpt.best_model_path, verbose=False)[0]["val/acc"])


def train(cfg: TrainConfig, resume: bool = False, datamodule: PoolDataModule | None = None) -> TrainResult:
    """Run one experiment into ``cfg.run_dir`` (see the module docstring for the folder layout)."""
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    run_dir = cfg.run_dir
    last = run_dir / "checkpoints" / "last.ckpt"
    if resume and not last.is_file():
        raise InputError(f"--resume: {last} not found")
    if cfg.trainer.threads is not None:
        torch.set_num_threads(cfg.trainer.threads)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    dm = datamodule or PoolDataModule(cfg)
    dm.setup("fit")
    module = SelectorModule(to_dict(cfg), pos_weight=dm.pos_weight)
    monitor = cfg.optim.monitor
    ckpt = ModelCheckpoint(dirpath=str(run_dir / "checkpoints"), filename="best", monitor=monitor,
                           mode="max", save_top_k=1, save_last=True, auto_insert_metric_name=False)
    callbacks: list = [ckpt]
    if cfg.optim.early_stopping:
        callbacks.append(EarlyStopping(monitor=monitor, mode="max", patience=cfg.optim.early_stopping))
    t = cfg.trainer
    # A batch rarely has every relation (top-3 retrieval never fills rank_4/rank_5), so some
    # relation weights get no gradient in a step; DDP must be told, or it aborts the step.
    strategy = "ddp_find_unused_parameters_true" if t.strategy == "ddp" else t.strategy
    trainer = L.Trainer(
        default_root_dir=str(run_dir), max_epochs=cfg.optim.epochs, max_steps=cfg.optim.max_steps,
        gradient_clip_val=cfg.optim.grad_clip or None, accelerator=t.accelerator, devices=t.devices,
        strategy=strategy, num_nodes=t.num_nodes, precision=t.precision, logger=_loggers(cfg),
        callbacks=callbacks, enable_progress_bar=t.progress_bar, log_every_n_steps=t.log_every,
        enable_model_summary=False,
    )
    if trainer.is_global_zero:
        dump_config(cfg, run_dir / "config.yaml")
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from trace_selector.shutdown import EXIT_CODE

    try:
        trainer.fit(module, datamodule=dm, ckpt_path=str(last) if resume else None)
    except SIGTERMException as exc:
        # Lightning ends fit on SIGTERM with a bare SystemExit, exit status 0: a sweep or a script
        # under `set -e` would go on as if the half-trained run had finished.
        raise SystemExit(EXIT_CODE) from exc

    if not ckpt.best_model_path:
        # max_steps ended training before the first epoch-end validation: validate now, so every
        # run has a best checkpoint and an exported selector.
        metrics = trainer.validate(module, datamodule=dm, verbose=False)[0]
        path = run_dir / "checkpoints" / "best.ckpt"
        trainer.save_checkpoint(path)
        ckpt.best_model_path, ckpt.best_model_score = str(path), torch.tensor(metrics[monitor])
    best = Path(ckpt.best_model_path)
    score = _best_acc(trainer, ckpt, module, dm, monitor)
    voted = majority_accuracy(dm.val_graphs)
    selector_dir = None
    if trainer.is_global_zero and best.is_file():
        from trace_selector.model.hub import save_selector

        state = torch.load(best, map_location="cpu", weights_only=False)["state_dict"]
        net = SelectorNet(cfg.model)
        net.load_state_dict({k[len("net."):]: v for k, v in state.items() if k.startswith("net.")})
        metrics = {"val_selection_accuracy": score if score is not None else math.nan,
                   "val_majority_accuracy": voted if voted is not None else math.nan,
                   "train_questions": len(dm.train_graphs), "val_questions": dm.val_questions,
                   **({"val_views": len(dm.val_graphs)} if cfg.data.val_budgets else {}),
                   "global_step": trainer.global_step}
        selector_dir = save_selector(net, run_dir / "selector", setting=cfg.setting, metrics=metrics,
                                     extra={"seed": cfg.seed, "trained with": "trace-selector train",
                                            **({"train pool": f"`{cfg.data.train_pool}`"} if cfg.data.source == "pool" else {}),
                                            "training questions": dm.training_text(),
                                            "validation": validation_text(cfg, dm),
                                            "resolved config": "`training_config.yaml`"})
        dump_config(cfg, selector_dir / TRAINING_CONFIG)
    return TrainResult(run_dir, best, last if last.is_file() else None, selector_dir, score, voted, trainer.global_step,
                       None if ckpt.best_model_score is None else float(ckpt.best_model_score))


def validation_text(cfg: TrainConfig, dm: PoolDataModule) -> str:
    """The model card's account of where the checkpoint was chosen."""
    d = cfg.data
    where = (f"`{d.val_pool}`" if d.val_pool else
             f"a {d.val_fraction:g} hash split of the training questions by {d.val_split}")
    views = f" at full K and first {', '.join(map(str, d.val_budgets))}" if d.val_budgets else ""
    shared = (f" ({dm.shared_answers} of them share a gold answer with a training question)"
              if dm.shared_answers else "")
    k = ""
    if dm.val_k is not None:
        lo, hi = dm.val_k
        k = f" x {lo}" if lo == hi else f" x {lo}-{hi}"
    return (f"{where}, {dm.val_questions} questions{k}{views}{shared}; the checkpoint was chosen on them, so scores "
            "there are not held-out")

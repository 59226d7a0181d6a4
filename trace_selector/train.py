"""Training with Lightning: a LightningModule around the pure `SelectorNet`, a DataModule that turns
pools into graphs, and `train()` which runs a whole experiment into one run folder.

    trace-selector train --config training/wikileads.yaml data.train_pool=data/pools/train.jsonl.gz
    trace-selector train --config training/synthetic.yaml optim.epochs=30 --resume

Run folder ``<out_dir>/<name>/``: ``config.yaml`` (resolved config, seed included),
``checkpoints/best.ckpt`` (best validation selection accuracy, ties to the lower validation loss with
``optim.tie_break``) and ``checkpoints/last.ckpt`` (for ``--resume``), ``logs/`` (CSV, always; W&B
too when ``trainer.wandb=true``), and ``selector/``: the best weights in Hub format (see model/hub.py) with
the resolved config beside them as ``training_config.yaml``, ready for `Selector.from_pretrained`.

Training uses only questions whose candidates mix correct and incorrect answers (the others carry no
selection signal); with ``data.subsets`` each epoch sees a fresh random subset of k of each question's
trajectories (graph/subset.py), so one selector serves every budget. Validation is every held-out
question at its full K, scored by whether the argmax candidate is correct. The train/validation split
is by a hash of the normalised question text, so it is stable across runs, pools and K.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch import Tensor

from trace_selector.config import dump_config, from_dict, load_config, to_dict
from trace_selector.errors import InputError
from trace_selector.model import LossConfig, ModelConfig, SelectorNet, selection_loss
from trace_selector.model.hub import TRAINING_CONFIG
from trace_selector.records import Pool, QuestionGroup
from trace_selector.records.answers import normalize_answer
from trace_selector.records.synthetic import SyntheticConfig

ABLATIONS: dict[str, list[str]] = {
    "full": [],
    "no_gnn": ["model.layers=0"],
    "no_cross": ["model.cross_trajectory=false"],
    "fixed_query": ["model.readout=fixed"],
    # Merged nodes span several trajectories, so these two train on full pools (no subsets).
    "merge_evidence": ["model.merge_evidence=true", "data.subsets=false"],
    "merge_answers": ["model.merge_answers=true", "data.subsets=false"],
    "no_grounding": ["model.grounding=false"],
    "no_prior": ["model.vote_prior=false"],
    "no_count": ["model.count_input=false"],
    "echo": ["model.echo=true"],
    "no_echo": ["model.echo=false"],
}
"""The model variants of the ablation tables, as training-config overrides."""


@dataclass
class DataConfig:
    """Where the training questions come from and how they are batched."""

    source: str = "pool"
    """"pool" (read `train_pool`) or "synthetic" (generate from `synthetic`)."""
    train_pool: str | None = None
    """Training pool file (JSONL, JSONL.gz or Parquet)."""
    val_pool: str | None = None
    """Validation pool; None splits the training pool by question hash."""
    val_fraction: float = 0.1
    """Share of questions held out for validation when there is no `val_pool`."""
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    """Generator settings when source = "synthetic"."""
    batch_size: int = 16
    """Questions (graphs) per batch."""
    num_workers: int = 0
    """DataLoader worker processes (graphs are in memory; 0 is usually fastest)."""
    embed_cache: str | None = None
    """Embedding cache root (None: the package cache, $TRACE_SELECTOR_HOME/embeddings)."""
    graph_cache: str | None = None
    """Folder for built graphs, so repeated runs skip graph building (None: no graph cache)."""
    subsets: bool = False
    """Train each question, every epoch, on a fresh random subset of k of its trajectories, k uniform
    in subset_min..subset_max, redrawn until it mixes right and wrong answers; False: always all of
    them (runs before this field). Users score budgets from 2 to 16+; a selector that saw only K=8
    sees vote features at K=16 that it never met in training."""
    subset_min: int = 2
    """Smallest subset size (k = 1 leaves nothing to select)."""
    subset_max: int | None = None
    """Largest subset size (None: all of a question's retained trajectories)."""
    min_val_questions: int = 0
    """Refuse to train with fewer validation questions than this (56 could not separate two seeds:
    both at 21.7%); 0: no check (runs before this field)."""
    val_budgets: list[int] = field(default_factory=list)
    """Also validate on each question's first k trajectories, for every k listed that is smaller than
    the question's count: `val/acc` (and the checkpoint and seed it chooses) then averages over the
    full-K view and these views, so a selector is chosen for the budgets it will serve, not for the
    validation pool's K alone. Empty: the full K only (runs before this field)."""

    def __post_init__(self) -> None:
        if self.source not in ("pool", "synthetic"):
            raise ValueError(f"data.source must be 'pool' or 'synthetic', got {self.source!r}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"data.val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.batch_size < 1 or self.num_workers < 0:
            raise ValueError("data.batch_size must be >= 1 and data.num_workers >= 0")
        if self.subset_min < 1 or (self.subset_max is not None and self.subset_max < self.subset_min):
            raise ValueError(f"need 1 <= data.subset_min <= data.subset_max, got {self.subset_min}, {self.subset_max}")
        if self.min_val_questions < 0:
            raise ValueError(f"data.min_val_questions must be >= 0, got {self.min_val_questions}")
        if any(k < 2 for k in self.val_budgets) or len(set(self.val_budgets)) != len(self.val_budgets):
            raise ValueError(f"data.val_budgets must be distinct sizes >= 2, got {self.val_budgets}")


@dataclass
class OptimConfig:
    """AdamW and the length of training."""

    lr: float = 1e-3
    """Learning rate."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    epochs: int = 30
    """Maximum epochs."""
    max_steps: int = -1
    """Stop after this many optimizer steps (-1: no limit)."""
    grad_clip: float = 1.0
    """Gradient-norm clipping (0: off)."""
    tie_break: bool = False
    """Among epochs with the same validation accuracy, keep the one with the lower validation loss
    (checkpointing and early stopping then follow ``val/objective``); False: the first epoch with
    the best accuracy (runs before this field). Accuracy moves in steps of 1/questions, so ties
    are common."""
    early_stopping: int = 0
    """Lightning EarlyStopping patience: stop after this many validation rounds without a better
    checkpoint (by the same criterion as the best checkpoint); 0: off."""

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError("optim.lr must be > 0, weight_decay and grad_clip >= 0")
        if self.epochs < 1 or (self.max_steps < 1 and self.max_steps != -1):
            raise ValueError("optim.epochs must be >= 1 and max_steps >= 1 or -1")
        if self.early_stopping < 0:
            raise ValueError(f"optim.early_stopping must be >= 0 (0: off), got {self.early_stopping}")

    @property
    def monitor(self) -> str:
        """The logged metric that picks the best checkpoint (maximised)."""
        return "val/objective" if self.tie_break else "val/acc"


@dataclass
class TrainerConfig:
    """Lightning Trainer settings (hardware, distribution, logging)."""

    accelerator: str = "auto"
    """"cpu", "gpu" or "auto"."""
    devices: Any = 1
    """Devices per node (int, list or "auto")."""
    strategy: str = "auto"
    """"auto", "ddp", "ddp_spawn", ..."""
    num_nodes: int = 1
    """Machines (DDP across nodes)."""
    precision: str = "32-true"
    """Lightning precision string ("bf16-mixed" on GPUs that support it)."""
    progress_bar: bool = True
    """Show the progress bar."""
    log_every: int = 10
    """Log training metrics every N steps."""
    wandb: bool = False
    """Also log to Weights & Biases."""
    wandb_project: str = "trace-selector"
    """W&B project name."""
    wandb_offline: bool = False
    """Write W&B runs locally only (sync later with `wandb sync`)."""
    threads: int | None = None
    """torch intra-op threads per process (None: torch's default). The graphs are small, and on a
    busy 2-core machine 1 thread measured 60x faster per step than 2 (spinning OpenMP workers)."""

    def __post_init__(self) -> None:
        if self.num_nodes < 1 or self.log_every < 1:
            raise ValueError("trainer.num_nodes and trainer.log_every must be >= 1")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"trainer.threads must be >= 1 or null, got {self.threads}")


@dataclass
class TrainConfig:
    """One training experiment (training/<setting>.yaml)."""

    setting: str = "wikileads"
    """Search setting the pools come from (recorded in the model card)."""
    name: str | None = None
    """Run folder name under `out_dir` (default: the setting)."""
    out_dir: str = "runs"
    """Root of run folders."""
    seed: int = 0
    """Seed for weights, shuffling and dropout."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Architecture and graph options."""
    data: DataConfig = field(default_factory=DataConfig)
    """Pools and batching."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Optimizer and schedule."""
    loss: LossConfig = field(default_factory=LossConfig)
    """Loss-term weights."""
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """Lightning Trainer settings."""

    def __post_init__(self) -> None:
        if self.data.source == "pool" and not self.data.train_pool:
            raise ValueError("data.train_pool is required when data.source is 'pool'")
        if self.data.subsets and (self.model.merge_answers or self.model.merge_evidence):
            # Merged nodes belong to several trajectories at once; a subset of them is not a graph
            # the builders would make, so the ablations train on full pools only.
            raise ValueError("data.subsets needs per-trajectory graphs: turn off model.merge_answers and model.merge_evidence")
        if self.data.val_budgets and (self.model.merge_answers or self.model.merge_evidence):
            raise ValueError("data.val_budgets needs per-trajectory graphs: turn off model.merge_answers and model.merge_evidence")

    @property
    def run_dir(self) -> Path:
        return Path(self.out_dir) / (self.name or self.setting)


# --- data ------------------------------------------------------------------------------------------


def is_val_question(question: str, fraction: float) -> bool:
    """Stable split: the normalised question's sha1, read as a number in [0, 1), is below `fraction`."""
    digest = hashlib.sha1(normalize_answer(question).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def is_mixed(graph: Any) -> bool:
    """The question has at least one known-correct and one known-wrong candidate."""
    y = graph["answer"].y
    y = y[~torch.isnan(y)]
    return bool((y > 0.5).any() and (y < 0.5).any())


def _read(path: str) -> Pool:
    from trace_selector.records import read_pool

    if not Path(path).is_file():
        raise InputError(f"{path}: pool file not found")
    return read_pool(path)


class PoolDataModule(L.LightningDataModule):
    """Graphs of the training and validation questions.

    Args:
        config: the experiment config (data, model graph options, seed).
        encoder: text encoder (default: `config.model.encoder`).
        graphs: pre-built ``(train, val)`` graph lists, which skips pools and encoding entirely
            (benchmarks, tests).
    """

    def __init__(self, config: TrainConfig, encoder: Any = None, graphs: tuple[list, list] | None = None):
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.train_graphs: list | None = None
        self.val_graphs: list | None = None
        self.val_questions = 0
        self.pos_weight = 1.0
        if graphs is not None:
            self._set(*graphs)

    def _set(self, train: list, val: list) -> None:
        from trace_selector.graph.subset import subset_graph

        self.train_graphs = [g for g in train if is_mixed(g)]
        if not self.train_graphs:
            raise InputError("no training question mixes correct and incorrect answers: nothing to learn from")
        if not val:
            raise InputError("no validation questions: set data.val_pool or a larger data.val_fraction")
        need = self.config.data.min_val_questions
        if len(val) < need:
            raise InputError(f"{len(val)} validation questions, fewer than data.min_val_questions={need}: "
                             "set data.val_pool or a larger data.val_fraction")
        self.val_questions = len(val)
        # Smaller budgets as extra views of the same questions (first k trajectories, as `evaluate --k`).
        self.val_graphs = list(val) + [subset_graph(g, range(k)) for k in self.config.data.val_budgets
                                       for g in val if k < g["answer"].num_nodes]
        y = torch.cat([g["answer"].y for g in self.train_graphs])
        y = y[~torch.isnan(y)]
        pos = int((y > 0.5).sum())
        self.pos_weight = (y.numel() - pos) / pos

    def _pools(self) -> tuple[list[QuestionGroup], list[QuestionGroup]]:
        d = self.config.data
        if d.source == "synthetic":
            from trace_selector.records.synthetic import make_pool

            groups = make_pool(d.synthetic).groups
        else:
            groups = _read(d.train_pool).groups
        if d.val_pool:
            return groups, _read(d.val_pool).groups
        val = [g for g in groups if is_val_question(g.question, d.val_fraction)]
        return [g for g in groups if not is_val_question(g.question, d.val_fraction)], val

    def setup(self, stage: str | None = None) -> None:
        if self.train_graphs is not None:
            return
        from trace_selector.graph.dataset import load_or_build
        from trace_selector.graph.encoder import make_encoder
        from trace_selector.graph.plan import graph_options

        d, m = self.config.data, self.config.model
        if self.encoder is None:
            from trace_selector import paths

            self.encoder = make_encoder(m.encoder, m.embed_dim, d.embed_cache or paths.embeddings_dir(), m.encoder_runtime)
        if self.encoder.dim != m.embed_dim:
            raise InputError(f"model.embed_dim={m.embed_dim} but encoder {self.encoder.identity} gives {self.encoder.dim}")
        train_groups, val_groups = self._pools()
        options = graph_options(m)
        train = load_or_build(Pool(train_groups), self.encoder, options, d.graph_cache).graphs
        val = load_or_build(Pool(val_groups), self.encoder, options, d.graph_cache).graphs
        self._set(train, val)

    def train_dataloader(self):
        from torch_geometric.loader import DataLoader

        from trace_selector.graph.subset import SubsetGraphs

        d = self.config.data
        data = SubsetGraphs(self.train_graphs, d.subset_min, d.subset_max) if d.subsets else self.train_graphs
        return DataLoader(data, batch_size=d.batch_size, shuffle=True, num_workers=d.num_workers)

    def val_dataloader(self):
        from torch_geometric.loader import DataLoader

        return DataLoader(self.val_graphs, batch_size=self.config.data.batch_size,
                          num_workers=self.config.data.num_workers)


# --- module ----------------------------------------------------------------------------------------


def selected_correct(scores: Tensor, labels: Tensor, group: Tensor, num_groups: int) -> Tensor:
    """Per question, the label of its argmax candidate (first on ties; unknown counts as wrong).

    Shapes: scores [A], labels [A], group [A] -> [num_groups].
    """
    top = scores.new_full((num_groups,), float("-inf")).scatter_reduce(0, group, scores, "amax", include_self=True)
    idx = torch.arange(scores.numel(), device=scores.device)
    at_max = torch.where(scores >= top[group], idx, torch.full_like(idx, scores.numel()))
    first = torch.full((num_groups,), scores.numel(), device=scores.device).scatter_reduce(0, group, at_max, "amin")
    found = first < scores.numel()
    out = torch.zeros(num_groups, device=scores.device)
    picked = torch.nan_to_num(labels[first[found]], nan=0.0)
    out[found] = picked
    return out


def validation_objective(acc: float, loss: float, questions: int) -> float:
    """Accuracy first, then lower loss, as one number to maximise (``val/objective``).

    The loss term, loss / (1 + loss) / (2 * questions), is below half of one question's 1/questions
    of accuracy, so it decides only between equal accuracies.
    """
    loss = max(loss, 0.0)
    return acc - loss / (1.0 + loss) / (2.0 * max(questions, 1))


class SelectorModule(L.LightningModule):
    """Lightning wrapper: loss, metrics and optimizer around a `SelectorNet`.

    Args:
        config: the resolved `TrainConfig` as a plain dict (stored in the checkpoint's hparams).
        pos_weight: BCE weight of positives (negatives / positives over training candidates).
    """

    def __init__(self, config: dict[str, Any], pos_weight: float = 1.0):
        super().__init__()
        self.save_hyperparameters()
        self.cfg = from_dict(TrainConfig, config)
        self.net = SelectorNet(self.cfg.model)
        self.register_buffer("pos_weight", torch.tensor(float(pos_weight)))
        self._val: list[Tensor] = []

    def forward(self, batch: Any) -> Tensor:
        return self.net(batch)

    def _terms(self, batch: Any):
        scores = self.net(batch)
        a = batch["answer"]
        return scores, selection_loss(scores, a.y, a.batch, float(self.pos_weight), self.cfg.loss)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        _, terms = self._terms(batch)
        n = batch.num_graphs
        self.log("train/loss", terms.total, batch_size=n, prog_bar=True)
        self.log_dict({"train/bce": terms.bce, "train/listwise": terms.listwise,
                       "train/hard": terms.hard_negative, "train/scale": self.net.scale}, batch_size=n)
        return terms.total

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        scores, terms = self._terms(batch)
        a = batch["answer"]
        n = batch.num_graphs
        right = selected_correct(scores, a.y, a.batch, n).sum()
        # The bar a selector must clear: the most frequent answer (log1p(c) is monotone in the count c;
        # ties go to the lowest sample_id, as in `majority`).
        voted = selected_correct(a.vote[:, 0], a.y, a.batch, n).sum()
        # Sums, reduced once per epoch: exact accuracy over all questions (and all DDP ranks).
        self._val.append(torch.stack([right, terms.total.detach() * n, scores.new_tensor(float(n)), voted]))

    def on_validation_epoch_end(self) -> None:
        # Every rank must join the gather, even one that got no validation batch.
        sums = torch.stack(self._val).sum(0) if self._val else torch.zeros(4, device=self.device)
        self._val.clear()
        if self.trainer.world_size > 1:
            sums = self.all_gather(sums).sum(0)
        right, loss_sum, n, voted = sums.tolist()
        if n == 0:
            return
        acc, loss = right / n, loss_sum / n
        self.log("val/acc", acc, prog_bar=True)
        objective = validation_objective(acc, loss, int(n))
        self.log_dict({"val/loss": loss, "val/objective": objective, "val/questions": n, "val/majority": voted / n})

    def configure_optimizers(self):
        o = self.cfg.optim
        return torch.optim.AdamW(self.parameters(), lr=o.lr, weight_decay=o.weight_decay)


# --- experiment ------------------------------------------------------------------------------------


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
                                            "validation": validation_text(cfg, dm),
                                            "resolved config": "`training_config.yaml`"})
        dump_config(cfg, selector_dir / TRAINING_CONFIG)
    return TrainResult(run_dir, best, last if last.is_file() else None, selector_dir, score, voted, trainer.global_step,
                       None if ckpt.best_model_score is None else float(ckpt.best_model_score))


def validation_text(cfg: TrainConfig, dm: PoolDataModule) -> str:
    """The model card's account of where the checkpoint was chosen."""
    d = cfg.data
    where = f"`{d.val_pool}`" if d.val_pool else f"a {d.val_fraction:g} hash split of the training questions"
    views = f" at full K and first {', '.join(map(str, d.val_budgets))}" if d.val_budgets else ""
    return (f"{where}, {dm.val_questions} questions{views}; the checkpoint was chosen on them, so scores "
            "there are not held-out")


def train_seeds(cfg: TrainConfig, seeds: Sequence[int], resume: bool = False) -> tuple[TrainResult, list[dict[str, Any]]]:
    """One run per seed in ``<run_dir>/seed-<s>/``; the best by validation (``optim.monitor``: accuracy,
    ties to the lower loss with ``optim.tie_break``; equal scores to the earlier seed) is copied to
    ``<run_dir>/selector/``, and every seed's scores go to ``<run_dir>/seeds.json``.

    A seed whose run folder holds a finished run (``seed.json``) is read back, not retrained, so an
    interrupted sweep continues; with `resume`, unfinished seeds continue from their last checkpoint.
    Returns the chosen seed's result and the table written to seeds.json.
    """
    import json
    import shutil

    from trace_selector.atomic import atomic_write

    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError(f"--seeds: need distinct seeds, got {list(seeds)}")
    dump_config(cfg, cfg.run_dir / "config.yaml")  # what --resume reads back
    results: list[tuple[dict[str, Any], TrainResult]] = []  # (its seeds.json row, the run) per seed
    for seed in seeds:
        sub = replace(cfg, seed=seed, name=f"{cfg.name or cfg.setting}/seed-{seed}")
        done = sub.run_dir / "seed.json"
        if done.is_file():
            row = json.loads(done.read_text())
            result = TrainResult(sub.run_dir, sub.run_dir / "checkpoints" / "best.ckpt", None, sub.run_dir / "selector",
                                 row["val_acc"], row["val_majority"], row["global_step"], row["score"])
        else:
            result = train(sub, resume=resume and (sub.run_dir / "checkpoints" / "last.ckpt").is_file())
            row = {"seed": seed, "val_acc": result.best_val_acc, "val_majority": result.val_majority_acc,
                   "score": result.best_score, "global_step": result.global_step}
            with atomic_write(done) as fh:
                json.dump(row, fh)
        results.append((row, result))
    ranked = [r for r in results if r[1].best_score is not None and r[1].selector_dir is not None]
    if not ranked:
        raise InputError(f"{cfg.run_dir}: no seed produced a validated checkpoint")
    chosen_row, chosen = max(ranked, key=lambda r: r[1].best_score)  # max keeps the first of equals
    target = cfg.run_dir / "selector"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(chosen.selector_dir, target)
    table = [{**row, "chosen": row is chosen_row} for row, _ in results]
    for folder in (cfg.run_dir, target):  # the selector carries the table its card points to
        with atomic_write(folder / "seeds.json") as fh:
            json.dump({"monitor": cfg.optim.monitor, "seeds": table}, fh, indent=2)
            fh.write("\n")
    if (target / "README.md").is_file():
        from trace_selector.model.hub import relocate_card

        every = ", ".join(str(row["seed"]) for row, _ in results)
        relocate_card(target, chosen.selector_dir, {"seed": f"{chosen_row['seed']} (the best on validation of "
                                                            f"seeds {every}; every seed's scores in `seeds.json`)"})
    return replace(chosen, run_dir=cfg.run_dir, selector_dir=target), table


def majority_accuracy(graphs: Sequence[Any]) -> float | None:
    """Share of `graphs` whose most frequent answer is right (None without graphs)."""
    if not graphs:
        return None
    right = sum(float(selected_correct(g["answer"].vote[:, 0], g["answer"].y,
                                       torch.zeros_like(g["answer"].y, dtype=torch.long), 1)[0]) for g in graphs)
    return right / len(graphs)

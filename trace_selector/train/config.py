"""The training experiment's settings: one `TrainConfig` per run (a YAML in training/ fills it) and
the model variants of the ablation tables as config overrides.

    cfg = load_config(TrainConfig, "training/wikileads.yaml", ["data.train_pool=pools/train.jsonl.gz"])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_selector.model import LossConfig, ModelConfig
from trace_selector.records.synthetic import SyntheticConfig

ABLATIONS: dict[str, list[str]] = {
    "full": [],
    "no_gnn": ["model.layers=0"],
    "no_cross": ["model.cross_trajectory=false"],
    "fixed_query": ["model.readout=fixed"],
    "no_qformer": ["model.readout=mean"],
    # Merged nodes span several trajectories, so these two train on full pools (no subsets).
    "merge_evidence": ["model.merge_evidence=true", "data.subsets=false"],
    "merge_answers": ["model.merge_answers=true", "data.subsets=false"],
    "no_grounding": ["model.grounding=false"],
    "no_prior": ["model.vote_prior=false"],
    "no_count": ["model.count_input=false"],
    "echo": ["model.echo=true"],
    "no_echo": ["model.echo=false"],
    "last_hop": ["model.last_hop=true"],
    "no_last_hop": ["model.last_hop=false"],
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
    """Validation pool; None splits the training pool by hash (`val_split`)."""
    val_fraction: float = 0.1
    """Share of questions held out for validation when there is no `val_pool`."""
    val_split: str = "question"
    """How the training pool is split when there is no `val_pool`: "question" (a hash of each
    question's text; runs before this field) or "answer" (questions that share a gold answer, directly
    or through a chain of shared answers, fall on the same side). Pools whose questions repeat answers
    (multi-hop ones built from a few bridge articles: 45 of 73 held-out wikihops train questions had a
    gold answer that a training question also had) score a question split too well, because the
    selector learns which answers tend to be right."""
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
        if self.val_split not in ("question", "answer"):
            raise ValueError(f"data.val_split must be 'question' or 'answer', got {self.val_split!r}")
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

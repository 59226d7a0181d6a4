"""Training a selector with Lightning: `trace-selector train` (re-exports only).

- `config.py`: `TrainConfig` and its sections, and the ablation variants as overrides;
- `data.py`: `PoolDataModule`, pools -> graphs of the training and validation questions;
- `module.py`: `SelectorModule`, the LightningModule around the pure `SelectorNet`;
- `fit.py`: `train()`, one run into one run folder (layout in its docstring);
- `seeds.py`: `train_seeds()`, one run per seed, the best kept by validation.
"""

from trace_selector.train.config import ABLATIONS, DataConfig, OptimConfig, TrainConfig, TrainerConfig
from trace_selector.train.data import PoolDataModule, is_mixed, is_val_question
from trace_selector.train.fit import TrainResult, resolve_config, train, validation_text
from trace_selector.train.module import SelectorModule, majority_accuracy, selected_correct, validation_objective
from trace_selector.train.seeds import train_seeds

__all__ = [
    "ABLATIONS", "DataConfig", "OptimConfig", "PoolDataModule", "SelectorModule", "TrainConfig", "TrainResult",
    "TrainerConfig", "is_mixed", "is_val_question", "majority_accuracy", "resolve_config", "selected_correct",
    "train", "train_seeds", "validation_objective", "validation_text",
]

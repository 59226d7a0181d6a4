"""The Lightning wrapper around the pure `SelectorNet`: loss, validation metrics, optimizer.

Validation scores each question by whether its argmax candidate is correct, and logs majority vote's
accuracy on the same questions (``val/majority``), the bar a selector must clear.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning as L
import torch
from torch import Tensor

from trace_selector.config import from_dict
from trace_selector.model import SelectorNet, selection_loss
from trace_selector.train.config import TrainConfig

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


def majority_accuracy(graphs: Sequence[Any]) -> float | None:
    """Share of `graphs` whose most frequent answer is right (None without graphs)."""
    if not graphs:
        return None
    right = sum(float(selected_correct(g["answer"].vote[:, 0], g["answer"].y,
                                       torch.zeros_like(g["answer"].y, dtype=torch.long), 1)[0]) for g in graphs)
    return right / len(graphs)

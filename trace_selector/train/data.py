"""Training data: the graphs of the training and validation questions, as a Lightning DataModule.

Training uses only questions whose candidates mix correct and incorrect answers (the others carry no
selection signal); with ``data.subsets`` each epoch sees a fresh random subset of k of each question's
trajectories (graph/subset.py), so one selector serves every budget. Validation is every held-out
question at its full K (and at ``data.val_budgets``). Without a validation pool the training pool is
split by a hash of the normalised question text, or of the gold answers it shares with other questions
(``data.val_split``), so the split is stable across runs, pools and K.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightning as L
import torch

from trace_selector.errors import InputError
from trace_selector.records import Pool, QuestionGroup
from trace_selector.records.answers import normalize_answer
from trace_selector.train.config import TrainConfig

if TYPE_CHECKING:
    from trace_selector.graph.plan import DropReport

def is_val_question(question: str, fraction: float) -> bool:
    """Stable split: the normalised question's sha1, read as a number in [0, 1), is below `fraction`."""
    digest = hashlib.sha1(normalize_answer(question).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def split_validation(groups: list[QuestionGroup], fraction: float, by: str = "question",
                     ) -> tuple[list[QuestionGroup], list[QuestionGroup]]:
    """Training and validation questions, in pool order. ``by="question"`` hashes each question's text;
    ``by="answer"`` hashes one key per connected set of questions that share a normalised gold answer
    (the set's smallest answer), so no gold answer is on both sides. Questions without gold answers
    fall back to their text."""
    if by == "question":
        keys = [g.question for g in groups]
    elif by == "answer":
        parent: dict[str, str] = {}

        def root(a: str) -> str:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        answers = [sorted({normalize_answer(a) for a in g.golden_answers} - {""}) for g in groups]
        for golds in answers:
            for a in golds:
                parent.setdefault(a, a)
            for a in golds[1:]:
                low, high = sorted((root(golds[0]), root(a)))
                parent[high] = low  # the smaller answer stays the root: the key is the set's smallest answer
        keys = [root(golds[0]) if golds else g.question for g, golds in zip(groups, answers)]
    else:
        raise ValueError(f"unknown validation split {by!r}: 'question' or 'answer'")
    held = [is_val_question(key, fraction) for key in keys]
    return [g for g, h in zip(groups, held) if not h], [g for g, h in zip(groups, held) if h]


def shared_answers(train: list[QuestionGroup], val: list[QuestionGroup]) -> int:
    """Validation questions with a normalised gold answer that some training question also has."""
    seen = {normalize_answer(a) for g in train for a in g.golden_answers} - {""}
    return sum(any(normalize_answer(a) in seen for a in g.golden_answers) for g in val)


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
        self.shared_answers: int | None = None
        """Validation questions sharing a gold answer with a training question (None: not counted)."""
        self.val_k: tuple[int, int] | None = None
        """Fewest and most trajectories of a validation question (None: graphs given, not counted)."""
        self.train_questions_seen = 0
        """Training graphs before the mixed filter (`train_graphs` keeps the mixed ones)."""
        self.train_drops: DropReport | None = None
        """Trajectories of the training pool that the graphs leave out, per reason (None: graphs given)."""
        self.pos_weight = 1.0
        if graphs is not None:
            self._set(*graphs)

    def _set(self, train: list, val: list) -> None:
        from trace_selector.graph.subset import subset_graph

        self.train_questions_seen = len(train)
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
        return split_validation(groups, d.val_fraction, d.val_split)

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
        self.shared_answers = shared_answers(train_groups, val_groups)
        # The card says at which K the checkpoint was chosen: a pool extended later (K=8 to 16) reads otherwise.
        sizes = [len(g.trajectories) for g in val_groups]
        self.val_k = (min(sizes), max(sizes)) if sizes else None
        if self.shared_answers and not d.val_pool and d.val_split == "question":
            warnings.warn(f"{self.shared_answers} of {len(val_groups)} validation questions share a gold answer with a "
                          "training question, so validation accuracy flatters the selector; data.val_split=answer "
                          "keeps them apart", stacklevel=2)
        options = graph_options(m)
        train = load_or_build(Pool(train_groups), self.encoder, options, d.graph_cache)
        val = load_or_build(Pool(val_groups), self.encoder, options, d.graph_cache).graphs
        self._set(train.graphs, val)
        self.train_drops = train.report

    def training_text(self) -> str:
        """The model card's account of the questions the selector learned from: only questions with a
        correct and a wrong candidate teach a ranking, and a pool's own count of mixed questions can be
        higher when the only right (or wrong) trajectory is one the graphs leave out."""
        text = f"{len(self.train_graphs)} of {self.train_questions_seen} questions with a correct and a wrong candidate"
        if self.train_drops is not None:
            why = {"no_answer": "without an answer", "no_search": "without a search that returned anything"}
            left = ", ".join(f"{n} {why.get(reason, reason)}" for reason, n in self.train_drops.dropped.items() if n)
            text += f"; trajectories left out of the graphs: {left or 'none'}"
        return text

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

"""Selector API: load a trained checkpoint, score a pool's candidates, pick one answer per question.

    from trace_selector import Selector
    sel = Selector.from_pretrained("checkpoints/wikileads")      # folder or Hub repo id
    for s in sel.select("pool.jsonl.gz"):                        # Pool or path
        print(s.question_id, s.sample_id, s.answer, s.scores)    # scores: sample_id -> score
    sel.save_pretrained("my-selector")                           # same folder format, card kept
    sel.push_to_hub("user/trace-selector-wikileads")             # save, then upload that folder

    trace-selector select --checkpoint checkpoints/wikileads --pool pool.jsonl.gz --out selections.jsonl

The checkpoint's `ModelConfig` names the text encoder and graph options, so new pools are turned
into graphs exactly as the training pools were. No generation happens: the selected answer is always
one of the pool's existing answers.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from trace_selector.errors import InputError
from trace_selector.graph.encoder import make_encoder
from trace_selector.graph.plan import graph_options
from trace_selector.records import Pool, QuestionGroup
from trace_selector.records.pick import Pick

Selection = Pick
"""The selector's choice for one question is a `records.pick.Pick` (scores of every candidate, `correct`
when the pool has gold); the old name stays for `from trace_selector import Selection`."""


@torch.inference_mode()
def score_plans(net: torch.nn.Module, plans: Sequence[Any], rows: dict[str, int], table: torch.Tensor,
                batch_size: int = 64, device: str = "cpu") -> list[torch.Tensor]:
    """Candidate scores of each plan (eval mode, batched), from graph plans and their embedding table with
    no ``HeteroData`` in between (graph/collate.py): the one scoring path of selection and evaluation.
    Returns one [A_i] tensor per plan. tests/graph/test_collate.py holds it equal to the network on PyG
    batches of the materialised graphs."""
    from trace_selector.graph.collate import collate_plans

    was_training = net.training
    net.eval()
    out: list[torch.Tensor] = []
    try:
        for start in range(0, len(plans), batch_size):
            b = collate_plans(plans[start : start + batch_size], rows, table).to(device)
            scores = net.score(b.x, b.edge_index, b.traj, b.batch, b.vote, b.num_graphs, b.orphan).float().cpu()
            out.extend(scores.split(b.candidates))
    finally:
        net.train(was_training)
    return out


def _selection(question_id: str, sample_ids: Sequence[int], answers: Sequence[str], labels: Sequence[float],
               scores: torch.Tensor) -> Pick:
    """The argmax candidate (the first on ties, as torch.argmax) of one question's scores."""
    values = scores.tolist()
    best = max(range(len(values)), key=values.__getitem__)
    label = float(labels[best])
    return Pick(
        question_id=question_id,
        sample_id=int(sample_ids[best]),
        answer=answers[best],
        scores={int(i): float(v) for i, v in zip(sample_ids, values)},
        correct=None if label != label else label,  # NaN: unknown
    )


def selections_from_plans(plans: Sequence[Any], scores: Sequence[torch.Tensor]) -> dict[str, Pick]:
    """argmax candidate of each plan (first on ties), keyed by question id."""
    return {p.question_id: _selection(p.question_id, p.sample_id, p.answers, p.y, s)
            for p, s in zip(plans, scores) if s.numel()}


NO_GRAPH = "majority vote: no trajectory has both an answer and a search result"
"""`Pick.fallback` of a question the network could not score."""


def vote_fallback(groups: Sequence[QuestionGroup]) -> dict[str, Pick]:
    """Majority-vote picks (`records.answers.vote`), keyed by question id, for questions without a graph.

    Returning nothing there would score such a question as wrong for the selector while every vote
    baseline answers it: at budget k=1 a trajectory that answered without searching would cost the
    selector a point that majority vote, picking the same trajectory, keeps."""
    from trace_selector.records.answers import is_correct, vote

    out = {}
    for g in groups:
        traj, _ = vote(g.trajectories)
        if traj is None:
            out[g.question_id] = Pick(g.question_id, None, "", fallback="no trajectory has an answer")
            continue
        correct = is_correct(traj, g.golden_answers)
        out[g.question_id] = Pick(g.question_id, traj.sample_id, traj.answer, fallback=NO_GRAPH,
                                  correct=None if correct is None else float(correct))
    return out


class Selector:
    """A trained selector network plus the encoder and graph options that feed it.

    Args:
        net: a `SelectorNet`.
        encoder: text encoder (default: the one named in the checkpoint's config).
        cache_dir: on-disk embedding cache root for the default encoder (None: memory only).
        batch_size: graphs per forward pass.
        device: torch device for the network.
        encoder_runtime: runtime of the default encoder (None: the checkpoint's
            `ModelConfig.encoder_runtime`); another one than the checkpoint's works but warns, since
            the network never saw its (slightly different) vectors.
        encoder_threads: CPU threads of the default encoder (None: its default).
    """

    def __init__(self, net: Any, encoder: Any = None, cache_dir: str | Path | None = None,
                 batch_size: int = 64, device: str = "cpu", encoder_runtime: str | None = None,
                 encoder_threads: int | None = None):
        self.net = net.to(device).eval()
        self.config = net.config
        if encoder is None:
            runtime = encoder_runtime or self.config.encoder_runtime
            encoder = make_encoder(self.config.encoder, self.config.embed_dim, cache_dir, runtime, encoder_threads)
        self.encoder = encoder
        used = getattr(self.encoder, "runtime", None)  # model encoders only; hash/bow have no runtime
        if used is not None and used != self.config.encoder_runtime:
            warnings.warn(
                f"selector trained on {self.config.encoder_runtime} embeddings is scoring with {used} "
                f"embeddings; picks may differ slightly (pass encoder_runtime={self.config.encoder_runtime!r} "
                "to reproduce its training inputs)",
                stacklevel=2,
            )
        if self.encoder.dim != self.config.embed_dim:
            raise InputError(
                f"encoder {self.encoder.identity} gives {self.encoder.dim}-d vectors but the checkpoint "
                f"expects {self.config.embed_dim}"
            )
        self.batch_size = batch_size
        self.device = device
        self.source: Path | None = None
        """Folder the selector was loaded from (None when built from a network in memory)."""

    @property
    def method(self) -> str:
        """The method's name ("trace" = the paper's configuration, "trace_grounded" = ours)."""
        return self.config.method

    @classmethod
    def from_pretrained(cls, path_or_repo: str | Path, encoder: Any = None, cache_dir: str | Path | None = None,
                        batch_size: int = 64, device: str = "cpu", encoder_runtime: str | None = None,
                        encoder_threads: int | None = None, **hub_kwargs: Any) -> Selector:
        """Load a checkpoint folder (or Hub repo id) saved by `save_pretrained` / `model.hub.save_selector`.

        `hub_kwargs`: revision, cache_dir (of the Hub download), token, local_files_only.
        """
        from trace_selector.model import SelectorNet
        from trace_selector.model.hub import resolve

        download = {k: hub_kwargs.pop(k, None) for k in ("revision", "hub_cache_dir", "token")}
        folder = resolve(path_or_repo, download["revision"], download["hub_cache_dir"], download["token"],
                         bool(hub_kwargs.pop("local_files_only", False)))
        selector = cls(SelectorNet.load_checkpoint(folder, **hub_kwargs), encoder, cache_dir, batch_size, device,
                       encoder_runtime, encoder_threads)
        selector.source = folder
        return selector

    def save_pretrained(self, out_dir: str | Path, setting: str | None = None,
                        metrics: dict[str, float] | None = None) -> Path:
        """Write the selector as a Hub-format folder that `from_pretrained` loads back exactly.

        The model card (and training_config.yaml) of the folder it was loaded from are kept unless
        `setting` or `metrics` are given, which render a fresh card.
        """
        from trace_selector.model.hub import save_selector

        return save_selector(self.net, out_dir, setting=setting, metrics=metrics,
                             source=None if setting or metrics else self.source)

    def push_to_hub(self, repo_id: str, private: bool = False, token: str | None = None,
                    endpoint: str | None = None) -> str:
        """`save_pretrained` into a temporary folder and upload it to the Hub repo `repo_id` (created if
        needed); returns the repo URL. Failures are one-line `InputError`s (`SelectorNet.publish`)."""
        import tempfile

        from trace_selector.model import SelectorNet

        with tempfile.TemporaryDirectory(prefix="trace-selector-") as tmp:
            folder = self.save_pretrained(Path(tmp) / "selector")
            return SelectorNet.publish(folder, repo_id, endpoint=endpoint, private=private, token=token)

    def graphs(self, pool: Pool):
        """The pool's graphs under this checkpoint's options, and the drop report."""
        from trace_selector.graph import build_graphs

        return build_graphs(pool, self.encoder, graph_options(self.config))

    def select(self, pool: Pool | str | Path) -> list[Pick]:
        """One `Pick` per question of `pool`, in pool order.

        A question without a graph (no trajectory has both an answer and a search result, so none
        is a candidate) gets majority vote over its answers, with `Pick.fallback` saying so; with
        no answer at all its sample_id is None."""
        if not isinstance(pool, Pool):
            from trace_selector.records import read_pool

            pool = read_pool(pool)
        from trace_selector.graph import embed_plans, plan_graphs

        plans, _ = plan_graphs(pool, graph_options(self.config))
        by_q: dict[str, Pick] = {}
        if plans:
            rows, table = embed_plans(plans, self.encoder)
            scores = score_plans(self.net, plans, rows, table, self.batch_size, self.device)
            by_q = selections_from_plans(plans, scores)
        missing = [g for g in pool.groups if g.question_id not in by_q]
        if missing:
            by_q.update(vote_fallback(missing))
        return [by_q[g.question_id] for g in pool.groups]


def write_selections(selections: Sequence[Pick], path: str | Path) -> None:
    """Selections as JSONL, one object per question (atomic)."""
    from trace_selector.atomic import atomic_write

    with atomic_write(path) as fh:
        for s in selections:
            fh.write(json.dumps(s.to_dict(), ensure_ascii=False) + "\n")

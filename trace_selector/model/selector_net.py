"""The selector network: relational GNN over a question's query-evidence graph plus an
answer-conditioned QFormer readout, scoring every candidate answer (docs/design.md §Model).

    net = SelectorNet(ModelConfig(kind="webqa", embed_dim=384))
    scores = net(batch)          # [A] one score per answer node, batch = Batch of HeteroData graphs
    net.save_pretrained("dir")   # Hub format: model.safetensors + config.json (model/hub.py)
    net = SelectorNet.load_checkpoint("dir")   # strict: config and weights must match

The module is pure: no Lightning, no I/O besides the Hub mixin. Graph-building options that inference
must reproduce (text encoder, merged evidence/answers) live in `ModelConfig` too, so a checkpoint alone
says how to turn a new pool into graphs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trace_selector.errors import InputError
from trace_selector.graph.schema import BROWSING_VERSION, SCHEMAS, GraphSchema
from trace_selector.model.hub import StrictHubMixin
from trace_selector.model.layers import RelationalMeanConv, TypeEncoder, scatter_mean
from trace_selector.model.qformer import AnswerQFormer
from trace_selector.types import EdgeType, NodeType

Readout = Literal["answer", "fixed"]


@dataclass
class ModelConfig:
    """Architecture of the selector and the graph options it was trained with.

    New fields must get defaults that reproduce the behaviour of checkpoints saved before they
    existed: old ``config.json`` files are loaded by filling missing keys from these defaults.
    """

    kind: str = "webqa"
    """Graph kind: "webqa" or "browsing" (graph/schema.py)."""
    embed_dim: int = 384
    """Size D of the frozen text embeddings (384 for all-MiniLM-L6-v2)."""
    hidden: int = 256
    """Hidden size H of all node states."""
    layers: int = 4
    """Message-passing layers L; 0 is the no-GNN ablation."""
    dropout: float = 0.1
    """Dropout in message passing and in the QFormer."""
    heads: int = 4
    """Attention heads of the QFormer (must divide `hidden`)."""
    cross_trajectory: bool = True
    """Use the cross-trajectory relations (schema.cross_types); False is the no-cross ablation."""
    readout: str = "answer"
    """QFormer query: "answer" (each candidate's own state), "fixed" (a learned vector; ablation) or
    "mean" (no query: the mean of the trajectory's states, the no-QFormer ablation)."""
    init_scale: float = 10.0
    """Initial score scale exp(eta) applied to the cosine similarity."""
    max_scale: float = 100.0
    """Upper bound of the learnable scale (keeps the logits bounded)."""
    encoder: str = "all-MiniLM-L6-v2"
    """Text encoder of the graphs: "all-MiniLM-L6-v2" (packaged), a local model folder, "bow"
    (synthetic bag-of-words) or "hash" (whole-text hash; tests)."""
    encoder_runtime: str = "onnx"
    """How the text embeddings were computed (graph/encoder.py `ENCODER_RUNTIMES`): "onnx" (fp32 ONNX
    Runtime, the default; the comparison that chose it is in docs/benchmarks.md), "torch" (fp32
    sentence-transformers, what checkpoints saved before this field used), "torch-bf16" or "onnx-int8".
    Selectors score with this runtime unless told otherwise, and warn when told."""
    merge_evidence: bool = False
    """Graphs were built with same-content evidence merged into one node (ablation)."""
    merge_answers: bool = False
    """Graphs were built with same-normalised-answer candidates merged (ablation)."""
    grounding: bool = False
    """Answer nodes also see whether their answer occurs in the evidence their trajectory read and
    in how many trajectories' evidence (graph/schema.py, vote columns 3-4). Ours, not the paper's
    (`trace_grounded`); False reads only TRACE's vote inputs log1p(c), c/R (the paper's
    configuration, and what checkpoints saved before this field get)."""
    vote_prior: bool = False
    """Add a linear score term of the vote features to the cosine score, so "trust the (grounded)
    vote" is one weight away instead of having to pass through the GNN and the QFormer; it starts at
    zero. Ours, not the paper's; False: cosine score only (the paper's configuration, and
    checkpoints saved before this field)."""
    count_input: bool = True
    """Feed the vote count log1p(c) to the answer nodes (TRACE's input). False: only the shares (c/R and,
    with `grounding`, g/R and own), which keep their range when a selector trained at K=8 scores K=16
    pools, where log1p(c) reaches values training never saw. An ablation that lost (docs/history.md
    §The 0.5B dev pool), so every recipe keeps the count. True is the paper's configuration and what
    checkpoints saved before this field get."""
    echo: bool = False
    """Answer nodes also see whether their answer only repeats words of the question (fifth vote column,
    `answers.restates_question`); what it gained is in docs/results.md §How the recipes were chosen.
    Ours; False is the paper's configuration and what checkpoints saved before this field get."""
    last_hop: bool = False
    """Answer nodes also see whether their answer occurs in what their trajectory's last retrieval
    returned (sixth vote column): on multi-hop questions an answer read only in an earlier hop is
    rarely right (`records.evidence.last_read_words`). Ours; False is the paper's configuration and
    what checkpoints saved before this field get."""
    graph_version: int = BROWSING_VERSION
    """Browsing graph layout the selector was trained on (graph/schema.py `BROWSING_VERSION`);
    checkpoints saved before this field read 1, and a browsing selector of another layout is refused
    (its relations no longer exist). WebQA selectors ignore it."""

    def __post_init__(self) -> None:
        if self.kind not in SCHEMAS:
            raise ValueError(f"kind must be one of {sorted(SCHEMAS)}, got {self.kind!r}")
        if self.embed_dim <= 0 or self.hidden <= 0:
            raise ValueError("embed_dim and hidden must be positive")
        if self.layers < 0:
            raise ValueError(f"layers must be >= 0, got {self.layers}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.heads <= 0 or self.hidden % self.heads:
            raise ValueError(f"heads ({self.heads}) must be positive and divide hidden ({self.hidden})")
        if self.readout not in ("answer", "fixed", "mean"):
            raise ValueError(f"readout must be 'answer', 'fixed' or 'mean', got {self.readout!r}")
        from trace_selector.graph.encoder import ENCODER_RUNTIMES

        if self.encoder_runtime not in ENCODER_RUNTIMES:
            raise ValueError(f"encoder_runtime must be one of {', '.join(ENCODER_RUNTIMES)}, got {self.encoder_runtime!r}")
        if self.kind == "browsing" and self.graph_version != BROWSING_VERSION:
            raise ValueError(
                f"browsing selector trained on graph layout {self.graph_version}, but this version builds layout "
                f"{BROWSING_VERSION} (TRACE long-horizon: opens/finds, next/previous, orphan subqueries); retrain it "
                "with trace-selector train --config training/<setting>-browsing.yaml"
            )
        if not 0.0 < self.init_scale <= self.max_scale:
            raise ValueError(f"need 0 < init_scale <= max_scale, got {self.init_scale}, {self.max_scale}")

    @property
    def method(self) -> str:
        """The method's name in tables and cards (docs/design.md §Model): "trace" is the paper's configuration
        (no grounding features, no vote prior), "trace_grounded" has both of our additions, and one
        addition alone is "trace+grounding" or "trace+prior"; the echo input adds "+echo", the last-hop
        input "+lasthop" and dropping the count input "+shares" (except to trace_grounded, which is ours either way). Architecture
        ablations keep these names; the card lists the switches."""
        name = {(False, False): "trace", (True, True): "trace_grounded",
                (True, False): "trace+grounding", (False, True): "trace+prior"}[(self.grounding, self.vote_prior)]
        if name != "trace_grounded":
            name += "+echo" * self.echo + "+shares" * (not self.count_input) + "+lasthop" * self.last_hop
        return name

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "config.json") -> ModelConfig:
        """Strict decoding: unknown keys are an error (a newer checkpoint), missing keys get defaults."""
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise InputError(
                f"{where}: unknown model config key(s) {', '.join(unknown)} "
                "(saved by a newer trace-selector? upgrade the package)"
            )
        # Checkpoints older than these fields were trained without what they switch on.
        data = {"grounding": False, "vote_prior": False, "graph_version": 1, "encoder_runtime": "torch", **data}
        try:
            return cls(**data)
        except (TypeError, ValueError) as err:
            raise InputError(f"{where}: {err}") from err


class SelectorNet(
    nn.Module,
    StrictHubMixin,
    library_name="trace-selector",
    tags=["trace-selector", "graph-neural-network", "answer-selection"],
):
    r"""Scores each candidate answer of a question from its query-evidence graph.

    1. Per-type input encoders map frozen embeddings [N_t, D] to [N_t, H]; answer nodes add a
       zero-initialised projection of their vote features (log1p(c), c/R and, with `grounding`,
       whether the answer occurs in the evidence read), so training starts from the text alone and
       learns how much to trust the vote.
    2. L `RelationalMeanConv` layers update the process nodes (subquery/chunk or evidence/document).
    3. `AnswerQFormer`: each candidate's initial state attends over its own trajectory's final
       readout-node states.
    4. score = min(exp(eta), max_scale) * cos(P_q h_query, P_a z_answer), eta initialised to
       log(init_scale), plus w . vote + b with `vote_prior` (w, b start at zero).

    Args:
        config: a `ModelConfig` or its JSON dict (as stored in ``config.json``).

    Shapes:
        forward(data): a `HeteroData` or a `Batch` of them following graph/schema.py -> [A] scores,
        in the order of ``data["answer"]`` nodes.
    """

    config_class = ModelConfig

    def __init__(self, config: ModelConfig | dict[str, Any] | None = None) -> None:
        super().__init__()
        if config is None:
            config = ModelConfig()
        elif isinstance(config, dict):
            config = ModelConfig.from_json(config)
        self.config = config
        # The mixin captured whatever was passed; store the resolved dataclass so a re-save of an old
        # checkpoint writes the new fields (with their defaults) too.
        self._hub_mixin_config = config
        self.schema: GraphSchema = SCHEMAS[config.kind]
        h = config.hidden
        learned = tuple(t for t in ("document",) if t in self.schema.node_types)
        self.encoder = TypeEncoder(config.embed_dim, h, self.schema.node_types, learned)
        # Orphan subqueries (browsing) have no text: x = 0, so the encoder gives its bias; this state is added.
        self.orphan = nn.ParameterDict({t: nn.Parameter(torch.empty(h)) for t in self.schema.orphan_types})
        # Columns of data["answer"].vote this selector reads (graph/schema.py: log1p(c), c/R, own, g/R, echo, last).
        columns = [0] * config.count_input + [1] + [2, 3] * config.grounding + [4] * config.echo + [5] * config.last_hop
        self.register_buffer("vote_columns", torch.tensor(columns, dtype=torch.long), persistent=False)
        self.vote = nn.Linear(len(columns), h)
        self.prior = nn.Linear(self.vote.in_features, 1) if config.vote_prior else None
        self.convs = nn.ModuleList(
            RelationalMeanConv(h, self.schema.edge_types, self.schema.process_types, config.dropout)
            for _ in range(config.layers)
        )
        self.readout = AnswerQFormer(h, config.heads, config.dropout, fixed_query=config.readout == "fixed",
                                     mean_pool=config.readout == "mean")
        self.q_proj = nn.Linear(h, h)
        self.a_proj = nn.Linear(h, h)
        self.eta = nn.Parameter(torch.empty(()))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.encoder.reset_parameters()
        for p in self.orphan.values():
            nn.init.normal_(p, std=0.02)
        nn.init.zeros_(self.vote.weight)
        nn.init.zeros_(self.vote.bias)
        if self.prior is not None:
            nn.init.zeros_(self.prior.weight)
            nn.init.zeros_(self.prior.bias)
        for conv in self.convs:
            conv.reset_parameters()
        self.readout.reset_parameters()
        self.q_proj.reset_parameters()
        self.a_proj.reset_parameters()
        with torch.no_grad():
            self.eta.fill_(math.log(self.config.init_scale))

    @property
    def scale(self) -> Tensor:
        """The bounded score scale min(exp(eta), max_scale)."""
        return self.eta.exp().clamp(max=self.config.max_scale)

    def forward(self, data: Any) -> Tensor:
        """Scores of all answer nodes of a graph or batch of graphs. Shapes: -> [A]."""
        x_dict, edge_index_dict, traj_dict, batch_dict = {}, {}, {}, {}
        for t in self.schema.node_types:
            store = data[t]
            x_dict[t] = store.x
            traj_dict[t] = store.traj
            batch = getattr(store, "batch", None)
            batch_dict[t] = batch if batch is not None else store.traj.new_zeros(store.x.size(0))
        for et in self.schema.edge_types:
            if et in data.edge_types:
                edge_index_dict[et] = data[et].edge_index
        num_graphs = int(getattr(data, "num_graphs", 1) or 1)
        orphan_dict = {t: data[t].orphan for t in self.schema.orphan_types if "orphan" in data[t]}
        return self.score(x_dict, edge_index_dict, traj_dict, batch_dict, data["answer"].vote, num_graphs, orphan_dict)

    def score(
        self,
        x_dict: dict[NodeType, Tensor],
        edge_index_dict: dict[EdgeType, Tensor],
        traj_dict: dict[NodeType, Tensor],
        batch_dict: dict[NodeType, Tensor],
        vote: Tensor,
        num_graphs: int,
        orphan_dict: dict[NodeType, Tensor] | None = None,
    ) -> Tensor:
        """Tensor-level forward.

        Shapes:
            x_dict[t] [N_t, D], edge_index_dict[r] [2, E_r], traj_dict[t] / batch_dict[t] [N_t] (long),
            vote [A, 5] (graph/schema.py; the config picks the columns read), orphan_dict[t] [N_t]
            (bool, schema.orphan_types) -> [A].
        """
        cand_type = self.schema.candidate_type
        h = self.encoder(x_dict)
        for t, mask in (orphan_dict or {}).items():
            if t in self.orphan and t in h:
                h[t] = h[t] + mask.to(h[t].dtype).unsqueeze(-1) * self.orphan[t]
        vote = vote[:, self.vote_columns]
        answer0 = h[cand_type] + self.vote(vote)
        h[cand_type] = answer0
        if not self.config.cross_trajectory:
            edge_index_dict = {et: e for et, e in edge_index_dict.items() if et not in self.schema.cross_types}
        for conv in self.convs:
            h = conv(h, edge_index_dict)

        readout_types = [t for t in self.schema.readout_types if t in h]
        memory = torch.cat([h[t] for t in readout_types], 0)
        mem_traj = torch.cat([traj_dict[t] for t in readout_types], 0)
        mem_batch = torch.cat([batch_dict[t] for t in readout_types], 0)
        cand_traj, cand_batch = traj_dict[cand_type], batch_dict[cand_type]
        width = int(max(int(mem_traj.max()) if mem_traj.numel() else 0, int(cand_traj.max()) if cand_traj.numel() else 0)) + 1
        mem_group = torch.where(mem_traj >= 0, mem_batch * width + mem_traj, torch.full_like(mem_traj, -1))
        cand_group = torch.where(cand_traj >= 0, cand_batch * width + cand_traj, torch.full_like(cand_traj, -1))
        z = self.readout(answer0, cand_group, memory, mem_group)

        question = scatter_mean(h["query"], batch_dict["query"], num_graphs)[cand_batch]
        score = self.scale * F.cosine_similarity(self.q_proj(question), self.a_proj(z), dim=-1)
        return score if self.prior is None else score + self.prior(vote).squeeze(-1)

    def extra_repr(self) -> str:
        c = self.config
        return f"kind={c.kind}, hidden={c.hidden}, layers={c.layers}, cross={c.cross_trajectory}, readout={c.readout}"

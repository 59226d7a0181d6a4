"""Message-passing layers of the selector: per-type input encoders and relational mean convolution.

`RelationalMeanConv` is the R-GCN idea (Schlichtkrull et al. 2018, https://arxiv.org/abs/1703.06103)
with one weight matrix per relation, mean aggregation per relation and a sum over relations; unlike
R-GCN it updates only the node types it is told to (the query node is a sender only, answers are
read out by the QFormer instead), and it wraps the update in a residual + LayerNorm so that
stacking L layers keeps the frozen-embedding information of every occurrence node.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from trace_selector.types import EdgeType, NodeType


def edge_key(edge_type: EdgeType) -> str:
    """ModuleDict-safe name of a relation ("src__rel__dst")."""
    return "__".join(edge_type)


def scatter_mean(src: Tensor, index: Tensor, dim_size: int) -> Tensor:
    """Mean of the rows of `src` grouped by `index` (rows of empty groups are zero).

    Shapes: src [E, F], index [E] -> [dim_size, F].
    """
    out = src.new_zeros(dim_size, src.size(-1))
    out.index_add_(0, index, src)
    count = src.new_zeros(dim_size).index_add_(0, index, src.new_ones(index.numel()))
    return out / count.clamp(min=1).unsqueeze(-1)


class TypeEncoder(nn.Module):
    r"""Projects each node type's frozen text embedding to the hidden size.

    Node types in `learned_types` carry no text (browsing `document` nodes): every node of such a type
    starts from one shared learned vector, so what distinguishes documents is only their edges.

    Args:
        in_channels: size D of the frozen embeddings.
        out_channels: hidden size H.
        node_types: all node types of the graph kind.
        learned_types: node types that get the shared learned initial state.
        **kwargs: unused, accepted for PyG-style construction.

    Shapes:
        x_dict[t]: [N_t, D] -> out[t]: [N_t, H] for every t in `node_types` present in `x_dict`.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        node_types: tuple[NodeType, ...] | list[NodeType],
        learned_types: tuple[NodeType, ...] | list[NodeType] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.learned_types = tuple(learned_types)
        self.lins = nn.ModuleDict(
            {t: nn.Linear(in_channels, out_channels) for t in node_types if t not in self.learned_types}
        )
        self.learned = nn.ParameterDict({t: nn.Parameter(torch.empty(out_channels)) for t in self.learned_types})
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.lins.values():
            lin.reset_parameters()
        for p in self.learned.values():
            nn.init.normal_(p, std=0.02)

    def forward(self, x_dict: dict[NodeType, Tensor]) -> dict[NodeType, Tensor]:
        out: dict[NodeType, Tensor] = {}
        for t, x in x_dict.items():
            if t in self.learned:
                out[t] = self.learned[t].expand(x.size(0), -1)
            elif t in self.lins:
                out[t] = self.lins[t](x)
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, types={list(self.lins)})"


class RelationalMeanConv(nn.Module):
    r"""One layer of relation-specific mean aggregation, summed over relations, with a residual +
    LayerNorm update of the destination node types only.

    .. math::
        h_i' = \mathrm{LN}\Big(h_i + \mathrm{Dropout}\big(\mathrm{ReLU}\big(W_0 h_i + b +
               \sum_{r} W_r \tfrac{1}{|N_r(i)|}\textstyle\sum_{j \in N_r(i)} h_j\big)\big)\Big)

    Mean aggregation (not sum) keeps a chunk retrieved by 2 or by 12 trajectories on the same scale;
    whether a relation has any neighbour at all is still visible, because an empty mean is zero.

    Args:
        channels: hidden size H (input and output).
        edge_types: all relations of the graph kind; only those whose destination is in
            `process_types` get a weight.
        process_types: node types that are updated; other types are passed through unchanged.
        dropout: dropout on the update before the residual.
        **kwargs: unused, accepted for PyG-style construction.

    Shapes:
        x_dict[t]: [N_t, H]; edge_index_dict[r]: [2, E_r] (row 0 source, row 1 destination)
        -> dict with the same keys and shapes as `x_dict`.
    """

    def __init__(
        self,
        channels: int,
        edge_types: tuple[EdgeType, ...] | list[EdgeType],
        process_types: tuple[NodeType, ...] | list[NodeType],
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.channels = channels
        self.process_types = tuple(process_types)
        self.edge_types = tuple(et for et in edge_types if et[2] in self.process_types)
        # No bias per relation: W_r(mean h) == mean(W_r h) exactly, so the linear map can be applied
        # after aggregation on the smaller side, and an empty relation contributes exactly zero.
        self.rel = nn.ModuleDict({edge_key(et): nn.Linear(channels, channels, bias=False) for et in self.edge_types})
        self.root = nn.ModuleDict({t: nn.Linear(channels, channels) for t in self.process_types})
        self.norm = nn.ModuleDict({t: nn.LayerNorm(channels) for t in self.process_types})
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in (*self.rel.values(), *self.root.values(), *self.norm.values()):
            module.reset_parameters()

    def forward(
        self, x_dict: dict[NodeType, Tensor], edge_index_dict: dict[EdgeType, Tensor]
    ) -> dict[NodeType, Tensor]:
        agg = {t: self.root[t](x_dict[t]) for t in self.process_types if t in x_dict}
        for et in self.edge_types:
            edge_index = edge_index_dict.get(et)
            src, _, dst = et
            if edge_index is None or edge_index.numel() == 0 or dst not in agg or src not in x_dict:
                continue
            mean = scatter_mean(x_dict[src][edge_index[0]], edge_index[1], agg[dst].size(0))
            # W_r only on the rows that have an r-neighbour (an empty mean maps to exactly zero):
            # every chunk has one incoming rank_r edge among five rank relations, so applying W_r to
            # all rows did about 3x the needed matmul work at K=16.
            rows = torch.unique(edge_index[1])
            agg[dst] = agg[dst].index_add(0, rows, self.rel[edge_key(et)](mean.index_select(0, rows)))
        out = dict(x_dict)
        for t, a in agg.items():
            out[t] = self.norm[t](x_dict[t] + self.dropout(torch.relu(a)))
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.channels}, relations={len(self.edge_types)}, update={list(self.process_types)})"

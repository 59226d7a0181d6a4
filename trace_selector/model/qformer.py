"""Answer-conditioned QFormer readout: each candidate attends over its own trajectory's final states.

One block, as in BLIP-2's Q-Former (Li et al. 2023, https://arxiv.org/abs/2301.12597) but with the
query taken from the candidate itself: cross-attention (multi-head), residual + LayerNorm, then a
feed-forward block, residual + LayerNorm. Attention is restricted to pairs (candidate, memory node)
of the same graph and trajectory, and computed sparsely over those pairs (a grouped softmax), so a
batch of many questions never builds a dense candidates x nodes attention matrix.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from trace_selector.model.layers import scatter_mean


def group_softmax(logits: Tensor, index: Tensor, num_groups: int) -> Tensor:
    """Softmax of `logits` over the rows that share `index` (per column).

    Shapes: logits [P, Hd], index [P] -> [P, Hd].
    """
    heads = logits.size(1)
    top = torch.full((num_groups, heads), float("-inf"), dtype=logits.dtype, device=logits.device)
    top = top.scatter_reduce(0, index.unsqueeze(1).expand_as(logits), logits, "amax", include_self=True)
    e = torch.exp(logits - top[index])
    den = logits.new_zeros(num_groups, heads).index_add_(0, index, e)
    return e / den[index]


def match_pairs(cand_group: Tensor, mem_group: Tensor) -> tuple[Tensor, Tensor]:
    """All (candidate, memory) index pairs with equal non-negative group ids.

    Group ids are (graph, trajectory) keys; -1 never matches. Pairs come sorted by candidate.

    Shapes: cand_group [A], mem_group [M] -> two index tensors [P].
    """
    if cand_group.numel() == 0 or mem_group.numel() == 0:
        empty = cand_group.new_zeros(0)
        return empty, empty
    # Sort the memory by group and look up each candidate's slice: O((A + M) log M), where a dense
    # A x M comparison would be 10^8 booleans for a 64-question batch at K=16.
    order = torch.argsort(mem_group, stable=True)
    sorted_groups = mem_group[order]
    lo = torch.searchsorted(sorted_groups, cand_group, side="left")
    hi = torch.searchsorted(sorted_groups, cand_group, side="right")
    counts = torch.where(cand_group >= 0, hi - lo, torch.zeros_like(lo))
    cand_idx = torch.repeat_interleave(torch.arange(cand_group.numel(), device=cand_group.device), counts)
    starts = torch.repeat_interleave(lo, counts)
    offsets = torch.arange(cand_idx.numel(), device=cand_group.device) - torch.repeat_interleave(
        torch.cumsum(counts, 0) - counts, counts
    )
    return cand_idx, order[starts + offsets]


class AnswerQFormer(nn.Module):
    r"""One cross-attention + feed-forward block where candidate i attends over the memory nodes of
    its own trajectory.

    .. math::
        z_i = \mathrm{LN}(a_i + \mathrm{MHA}(q_i, \{m_j : g(j) = g(i)\}))\qquad
        \mathrm{out}_i = \mathrm{LN}(z_i + \mathrm{FFN}(z_i))

    with :math:`q_i = a_i` (answer-conditioned) or a learned vector shared by all candidates
    (``fixed_query=True``, the fixed-query ablation). ``mean_pool=True`` (the no-QFormer ablation)
    replaces the attention weights by uniform ones: the candidate reads the mean of its trajectory's
    value vectors, through the same residual and feed-forward block. A candidate whose trajectory
    has no memory nodes gets a zero attention output, so its result depends on its own state only.

    Args:
        channels: hidden size H.
        heads: attention heads (H must be divisible by it).
        dropout: dropout on attention weights and on both residual branches.
        ffn_mult: FFN inner size as a multiple of H.
        fixed_query: use a learned query vector instead of each candidate's state.
        mean_pool: average the trajectory's values instead of attending (no query at all).
        **kwargs: unused, accepted for PyG-style construction.

    Shapes:
        cand [A, H], cand_group [A], memory [M, H], mem_group [M] -> [A, H].
    """

    def __init__(
        self,
        channels: int,
        heads: int = 4,
        dropout: float = 0.0,
        ffn_mult: int = 2,
        fixed_query: bool = False,
        mean_pool: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        if channels % heads:
            raise ValueError(f"channels ({channels}) must be divisible by heads ({heads})")
        if fixed_query and mean_pool:
            raise ValueError("fixed_query and mean_pool exclude each other (mean pooling has no query)")
        self.mean_pool = mean_pool
        self.channels = channels
        self.heads = heads
        self.fixed_query = fixed_query
        self.q = nn.Linear(channels, channels)
        self.k = nn.Linear(channels, channels)
        self.v = nn.Linear(channels, channels)
        self.o = nn.Linear(channels, channels)
        self.norm1 = nn.LayerNorm(channels)
        self.ffn = nn.Sequential(
            nn.Linear(channels, ffn_mult * channels), nn.GELU(), nn.Linear(ffn_mult * channels, channels)
        )
        self.norm2 = nn.LayerNorm(channels)
        self.query = nn.Parameter(torch.empty(channels)) if fixed_query else None
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.q, self.k, self.v, self.o, self.ffn[0], self.ffn[2]):
            lin.reset_parameters()
        self.norm1.reset_parameters()
        self.norm2.reset_parameters()
        if self.query is not None:
            nn.init.normal_(self.query, std=0.02)

    def forward(self, cand: Tensor, cand_group: Tensor, memory: Tensor, mem_group: Tensor) -> Tensor:
        num, dh = cand.size(0), self.channels // self.heads
        ci, mi = match_pairs(cand_group, mem_group)
        source = self.query.expand(num, -1) if self.query is not None else cand
        q = self.q(source).view(num, self.heads, dh)[ci]
        k = self.k(memory).view(-1, self.heads, dh)[mi]
        v = self.v(memory).view(-1, self.heads, dh)[mi]
        if self.mean_pool:
            counts = cand.new_zeros(num).index_add_(0, ci, cand.new_ones(ci.numel()))
            alpha = (1.0 / counts[ci]).unsqueeze(-1).expand(-1, self.heads)
        else:
            alpha = group_softmax((q * k).sum(-1) / math.sqrt(dh), ci, num)
        alpha = self.dropout(alpha)
        attended = cand.new_zeros(num, self.heads, dh).index_add_(0, ci, alpha.unsqueeze(-1) * v)
        has_memory = cand.new_zeros(num).index_add_(0, ci, cand.new_ones(ci.numel())) > 0
        # No bias either for candidates that have nothing to read: their update is exactly zero.
        attn = self.o(attended.reshape(num, self.channels)) * has_memory.unsqueeze(-1)
        z = self.norm1(cand + self.dropout(attn))
        return self.norm2(z + self.dropout(self.ffn(z)))

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.channels}, heads={self.heads}, fixed_query={self.fixed_query}, "
                f"mean_pool={self.mean_pool})")


__all__ = ["AnswerQFormer", "group_softmax", "match_pairs", "scatter_mean"]

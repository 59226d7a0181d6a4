"""Selector model: relational GNN + answer-conditioned QFormer over query-evidence graphs (pure nn.Modules).

    from trace_selector.model import ModelConfig, SelectorNet, selection_loss
"""

from trace_selector.model.layers import RelationalMeanConv, TypeEncoder
from trace_selector.model.loss import LossConfig, LossTerms, pos_weight_of, selection_loss
from trace_selector.model.qformer import AnswerQFormer
from trace_selector.model.selector_net import ModelConfig, SelectorNet

__all__ = [
    "AnswerQFormer",
    "LossConfig",
    "LossTerms",
    "ModelConfig",
    "RelationalMeanConv",
    "SelectorNet",
    "TypeEncoder",
    "pos_weight_of",
    "selection_loss",
]

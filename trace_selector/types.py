"""Shared names for choices and graph types, defined once and used everywhere."""

from __future__ import annotations

from typing import Literal

Action = Literal["search", "open", "find", "invalid"]
"""Tool actions a step can record."""

PoolStyle = Literal["webqa", "browsing"]
"""The two public pool formats (and graph kinds)."""

Strategy = Literal["standard", "divinit", "partial", "replicas"]
"""Rollout strategies."""

Region = Literal["reasoning", "exploration", "mixed", "homogeneous"]
"""ParallelMuse step-selection regions."""

NodeType = str
EdgeType = tuple[str, str, str]

ConfidenceKind = Literal["probability", "margin"]
"""How a selector's candidate scores become one confidence per question (calibration.py): the softmax
mass of the chosen answer, or that mass minus the best other answer's."""

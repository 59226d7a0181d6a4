"""Method names -> method objects, the one table `evaluate` and the benchmarks build from.

Fast methods need nothing; LLM methods need a `Chat` over an engine (built once, lazily, by the
caller); `trace` is provided by `trace_selector.evaluate` because it needs a checkpoint, and the
adaptive rows by `trace_selector.adaptive` because they wrap another method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from trace_selector.baselines.confidence import CONF_SCORES, ConfidenceConfig
from trace_selector.baselines.heuristics import Oracle, ToolCount
from trace_selector.baselines.llm import Chat
from trace_selector.baselines.pick import Method
from trace_selector.baselines.voting import (
    Majority,
    Single,
    grounded_vote,
    stated_confidence_vote,
    token_confidence_vote,
)

FAST_METHODS: tuple[str, ...] = (
    "single", "majority", "weighted_stated", "weighted_token",
    *(f"weighted_token_{s}" for s in CONF_SCORES), "deepconf_low", "deepconf_high",
    "grounded_vote", "fewest_tools", "most_tools", "oracle",
)
"""Methods without a model. ``weighted_token`` uses `ConfidenceConfig.score`; ``weighted_token_<score>``
fixes the score (mean, tail, bottom10, lowest) for the DeepConf variants side by side; ``deepconf_low`` /
``deepconf_high`` filter to the top 10% / 90% by that score before the weighted vote (the paper's eta)."""

LLM_METHODS: tuple[str, ...] = (
    "solagg", "summagg", "solagg_choice", "summagg_choice", "aggagent", "judge_gs", "judge_fves", "judge_tks",
)
"""Methods that call an LLM on the rollout engine. ``solagg`` / ``summagg`` answer freely, as the papers
do; the ``_choice`` variants must pick one of the candidates' answers (baselines/aggregators.py)."""

MODEL_METHODS: tuple[str, ...] = ("trace",)
"""Methods that need a trained selector checkpoint."""

ADAPTIVE_VOTE_METHODS: tuple[str, ...] = ("majority_adaptive_ac", "majority_adaptive_esc")
"""Majority vote that stops sampling early: Adaptive-Consistency's Beta rule, Early-Stopping
Self-Consistency's window rule (trace_selector/adaptive.py)."""

ADAPTIVE_METHODS: tuple[str, ...] = (*ADAPTIVE_VOTE_METHODS, "trace_adaptive")
"""Methods replayed wave by wave on a pool, stopping when sure; ``trace_adaptive`` stands for the
``<name>_adaptive`` row of every selector checkpoint, as ``trace`` does for their fixed-K rows."""

ALL_METHODS: tuple[str, ...] = FAST_METHODS + LLM_METHODS + MODEL_METHODS + ADAPTIVE_METHODS


def build_fast(name: str, conf: ConfidenceConfig | None = None) -> Method:
    """A method of `FAST_METHODS` by name."""
    conf = conf or ConfidenceConfig()
    simple: dict[str, Callable[[], Method]] = {
        "single": Single,
        "majority": Majority,
        "weighted_stated": stated_confidence_vote,
        "weighted_token": lambda: token_confidence_vote(conf),
        "deepconf_low": lambda: token_confidence_vote(dataclasses.replace(conf, keep_top=0.1), "deepconf_low"),
        "deepconf_high": lambda: token_confidence_vote(dataclasses.replace(conf, keep_top=0.9), "deepconf_high"),
        "grounded_vote": grounded_vote,
        "fewest_tools": lambda: ToolCount(fewest=True),
        "most_tools": lambda: ToolCount(fewest=False),
        "oracle": Oracle,
    }
    if name in simple:
        return simple[name]()
    if name.startswith("weighted_token_") and name.removeprefix("weighted_token_") in CONF_SCORES:
        score = name.removeprefix("weighted_token_")
        variant = dataclasses.replace(conf, score=score)
        return token_confidence_vote(variant, name=name)
    raise ValueError(f"unknown fast method {name!r}")


def build_llm(name: str, chat: Chat) -> Method:
    """A method of `LLM_METHODS` by name, on `chat`."""
    from trace_selector.baselines.aggagent import AggAgent
    from trace_selector.baselines.aggregators import SolAgg, SummAgg
    from trace_selector.baselines.judge import Judge

    builders: dict[str, Callable[[], Method]] = {
        "solagg": lambda: SolAgg(chat),
        "summagg": lambda: SummAgg(chat),
        "solagg_choice": lambda: SolAgg(chat, choice=True),
        "summagg_choice": lambda: SummAgg(chat, choice=True),
        "aggagent": lambda: AggAgent(chat),
        "judge_gs": lambda: Judge(chat, "global"),
        "judge_fves": lambda: Judge(chat, "first_valid"),
        "judge_tks": lambda: Judge(chat, "top_k"),
    }
    if name not in builders:
        raise ValueError(f"unknown LLM method {name!r}")
    return builders[name]()

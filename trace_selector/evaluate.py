"""Evaluate answer-selection methods on one rollout pool: EM / F1 / throughput / tokens per method,
a budget curve over subset sizes, a Markdown table, results.json, an optional plot and per-question
JSONL. This module holds the run: its config, building and running the methods, the paired
statistics and the adaptive rows; a pick is scored in `scoring`, the budget curve drawn in `budget`,
and the files and the table written by `report`.

    trace-selector evaluate --pool pool.jsonl.gz --methods single,majority,weighted_token,solagg \\
        --checkpoint checkpoints/wikileads --out runs/eval/results.json --plot runs/eval/budget.png
    trace-selector evaluate --pool pool.jsonl.gz --checkpoint trace=checkpoints/wikileads \\
        --checkpoint trace_grounded=checkpoints/wikileads-grounded      # one row per selector

Selectors: each ``--checkpoint NAME=PATH`` is a row named NAME (a bare PATH is named ``trace``); the
method ``trace`` in the method list stands for every checkpoint, in the order given.

Scoring: every method is scored on the same questions with the same `answers.normalize_answer`. EM
and F1 are percentages over *all* questions of the pool; a question with no trajectory, or a method
that picks nothing, scores 0. Without gold aliases (browsing pools that carry only `correct`), a
selected trajectory scores its stored `correct` for both EM and F1. `single` is the expectation over
a uniformly drawn trajectory. With ``k`` set, each question keeps its first k trajectories by
sample_id (all of them if it has fewer).

Budget curve: EM over random size-k subsets of each question's trajectories, k = 1, 2, 4, ... up to
K, next to the oracle pass@k (`budget`; `budget_subsets`, `seed` and `budget_llm` set it).

Paired statistics: every scored method is compared question by question with majority vote (and,
with `reference`, with that method too): the mean EM difference, its 95% percentile-bootstrap
interval over questions (`bootstrap` resamples, seeded by `seed`) and the questions won and lost
(`paired.py`). Majority vote is computed for this even when it is not in the method list.

On a pool of a bundled setting whose questions come from two or more families (wikihops: bridge,
compositional, comparison), results.json gets ``families`` and every row ``em_by_family``, and the
table a second part with EM per family.

A method that cannot run (no log-probs, no stated confidence, no checkpoint, no LLM engine) appears
in results.json as ``{"skipped": reason}``; it is never scored as wrong.

Adaptive rows (``majority_adaptive_ac``, ``majority_adaptive_esc``, ``<selector>_adaptive``;
`trace_selector.adaptive`) see each question's trajectories in waves and stop when sure. Every row gets
``mean_trajectories`` (and ``mean_generated_tokens`` when the pool records them); fixed-K rows use
every trajectory, `single` one. Adaptive rows also get their threshold sweep (``adaptive_curve``, drawn
in the budget plot against trajectories used), and ``trajectories_vs_<row>``: trajectories used per
question paired with every row whose EM is within `AdaptiveConfig.match_points`. Their EM is one draw:
trajectories arrive in the pool's sample order; ``adaptive.orders=R`` replays each on R random orders
too (``over_orders``: mean and spread, the expectation for a new rollout, and the curve drawn from them). Selector rows get a
``calibration`` entry (calibration.py; ``--calibration`` draws the reliability diagram).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# draw_subsets, format_table, plot_budget and score_pick are not used here: they are imported for the
# callers (CLI, quickstart, experiments, benchmarks, the notebook, tests) that import them from here.
from trace_selector.adaptive import (
    ADAPTIVE_SUFFIX,
    AdaptiveConfig,
    AdaptiveMethod,
    ConfidenceRule,
    WaveTable,
    arrival_orders,
    build_adaptive,
    usage,
    wave_items,
)
from trace_selector.baselines.confidence import ConfidenceConfig
from trace_selector.baselines.llm import LLMConfig
from trace_selector.baselines.pick import Method
from trace_selector.baselines.registry import (
    ADAPTIVE_METHODS,
    ADAPTIVE_VOTE_METHODS,
    ALL_METHODS,
    FAST_METHODS,
    LLM_METHODS,
    MODEL_METHODS,
)
from trace_selector.budget import budget_curve, draw_subsets, oracle_at, subset_sizes
from trace_selector.calibration import Calibration, calibrate, plot_reliability, scored_pick
from trace_selector.config import load_config, to_dict
from trace_selector.errors import InputError
from trace_selector.paired import BOOTSTRAP_RESAMPLES, paired_difference
from trace_selector.records import Pool, QuestionGroup
from trace_selector.records.pick import Pick
from trace_selector.report import format_table, plot_budget, summarize, write_outputs
from trace_selector.scoring import MethodRun, em_of, score_pick


def named_checkpoints(checkpoint: str | Sequence[str] | None) -> dict[str, str]:
    """Checkpoint paths by row name from ``NAME=PATH`` items (a bare PATH is named ``trace``), in the
    order given; a name that repeats or shadows a baseline is a ValueError."""
    items = [checkpoint] if isinstance(checkpoint, str) else list(checkpoint or [])
    out: dict[str, str] = {}
    for item in items:
        name, sep, path = str(item).partition("=")
        if not sep:
            name, path = "trace", str(item)
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_+.-]*", name) or not path:
            raise ValueError(f"checkpoint {item!r}: expected NAME=PATH (NAME: letters, digits, _ + . -) or PATH")
        if name in out:
            raise ValueError(f"checkpoint name {name!r} is given twice")
        if name in ALL_METHODS and name not in MODEL_METHODS:
            raise ValueError(f"checkpoint name {name!r} is a baseline method's name; pick another")
        if name.endswith(ADAPTIVE_SUFFIX):  # NAME_adaptive is the adaptive row of checkpoint NAME
            raise ValueError(f"checkpoint name {name!r} ends in {ADAPTIVE_SUFFIX!r}, which names adaptive rows; pick another")
        out[name] = path
    return out


DEFAULT_METHODS: tuple[str, ...] = (
    "single", "majority", "weighted_stated", "weighted_token", "fewest_tools", "most_tools", "trace",
)


@dataclass(slots=True)
class EvalConfig:
    """One evaluation run (defaults < YAML < command line; saved next to results.json)."""

    pool: str = ""
    """Rollout pool file (.jsonl, .jsonl.gz, .parquet)."""
    labels: str | None = None
    """Labels file with the pool's correctness and gold answers (`records.labels`); None: the pool's
    ``<pool>.labels.jsonl`` when it exists."""
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    """Methods to run, in table order (see `baselines.registry.ALL_METHODS`)."""
    out: str = "results.json"
    """results.json path (the resolved config goes beside it as ``<stem>.config.yaml``)."""
    checkpoint: str | list[str] | None = None
    """Selector checkpoints, each ``NAME=PATH`` (a row named NAME) or a bare PATH (named ``trace``);
    PATH is a folder or Hub id. ``trace`` in `methods` expands to all of them, in this order."""
    questions: int | None = None
    """Score the pool's first N questions only (pool order); None = all."""
    k: int | None = None
    """Trajectories per question to use (first k by sample_id); None = all."""
    engine: str = "vllm"
    """Engine spec for LLM methods (`engines.make_engine`): ``vllm``, ``vllm:<model>``, ``http://...``."""
    plot: str | None = None
    """Budget-curve PNG path (None: no plot); adaptive rows are drawn on it against trajectories used."""
    calibration: str | None = None
    """Reliability-diagram PNG of the selector rows' confidences (None: not drawn)."""
    per_question: str | None = None
    """Per-question JSONL path (None: not written)."""
    budget: bool = True
    """Compute the budget curve."""
    budget_subsets: int = 16
    """Random subsets per question and subset size in the budget curve."""
    budget_llm: bool = False
    """Include LLM methods in the budget curve (one full rerun per subset and size)."""
    seed: int = 0
    """Seed of the budget-curve subsets."""
    threads: int | None = None
    """torch CPU threads for the selector (None: torch's default). One thread is often faster for these
    small graphs when other work shares the cores."""
    encoder_runtime: str | None = None
    """Text-encoder runtime of ``trace`` (graph/encoder.py `ENCODER_RUNTIMES`, e.g. ``onnx-int8``); None:
    the one the checkpoint was trained with."""
    encoder_threads: int | None = None
    """CPU threads of ``trace``'s text encoder (None: `threads` for the torch runtimes, every core for
    onnx). Encoding a cold pool is the one step that gains from both cores of a 2-core machine."""
    reference: str | None = None
    """A method every other method is also paired against (besides majority), e.g. ``trace``; it must be
    in `methods`."""
    bootstrap: int = BOOTSTRAP_RESAMPLES
    """Resamples of the questions behind each paired interval."""
    confidence: ConfidenceConfig = field(default_factory=ConfidenceConfig)
    """DeepConf token-confidence settings (``weighted_token``)."""
    llm: LLMConfig = field(default_factory=LLMConfig)
    """LLM aggregator and judge settings."""
    adaptive: AdaptiveConfig = field(default_factory=AdaptiveConfig)
    """Adaptive rows: wave size, stopping thresholds, selector temperatures."""

    def __post_init__(self) -> None:
        if isinstance(self.methods, str):
            self.methods = [m.strip() for m in self.methods.split(",") if m.strip()]
        selectors = self.selectors()
        if selectors and "trace" in self.methods:
            # "trace" stands for every checkpoint not listed by name (a bare PATH is named trace).
            at = self.methods.index("trace")
            rest = [n for n in selectors if n not in self.methods or n == "trace"]
            self.methods = self.methods[:at] + rest + [m for m in self.methods[at + 1:] if m not in rest]
        if selectors and "trace_adaptive" in self.methods:  # the same for the adaptive rows
            at = self.methods.index("trace_adaptive")
            rows = [n + ADAPTIVE_SUFFIX for n in selectors]
            rest = [r for r in rows if r not in self.methods or r == "trace_adaptive"]
            self.methods = self.methods[:at] + rest + [m for m in self.methods[at + 1:] if m not in rest]
        known = set(ALL_METHODS) | set(selectors) | {n + ADAPTIVE_SUFFIX for n in selectors}
        unknown = [m for m in self.methods if m not in known]
        if unknown:
            raise ValueError(f"unknown method(s) {', '.join(unknown)}; known: {', '.join(ALL_METHODS)}"
                             + "".join(f", {n}, {n}{ADAPTIVE_SUFFIX}" for n in selectors if n != "trace"))
        adaptive_rows = [m for m in self.methods if m.endswith(ADAPTIVE_SUFFIX) or m in ADAPTIVE_METHODS]
        for key in ("thresholds", "temperature"):
            stray = [r for r in getattr(self.adaptive, key) if r not in adaptive_rows]
            if stray:
                raise ValueError(f"adaptive.{key}: {', '.join(map(repr, stray))} is not an adaptive row of this run "
                                 f"({', '.join(adaptive_rows) or 'none'})")
        if any(r in ADAPTIVE_VOTE_METHODS for r in self.adaptive.temperature):
            raise ValueError("adaptive.temperature applies to selector rows only, not to majority_adaptive_*")
        if not self.methods:
            raise ValueError("no methods given")
        if len(set(self.methods)) != len(self.methods):
            raise ValueError("a method is listed twice")
        if self.questions is not None and self.questions < 1:
            raise ValueError(f"questions must be >= 1, got {self.questions}")
        if self.k is not None and self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.encoder_threads is not None and self.encoder_threads < 1:
            raise ValueError(f"encoder_threads must be >= 1, got {self.encoder_threads}")
        if self.encoder_runtime is not None:
            from trace_selector.graph.encoder import ENCODER_RUNTIMES

            if self.encoder_runtime not in ENCODER_RUNTIMES:
                raise ValueError(f"encoder_runtime must be one of {', '.join(ENCODER_RUNTIMES)}, got {self.encoder_runtime!r}")
        if self.reference is not None and self.reference not in self.methods:
            raise ValueError(f"reference {self.reference!r} is not among the methods ({', '.join(self.methods)})")
        if self.bootstrap < 1:
            raise ValueError(f"bootstrap must be >= 1, got {self.bootstrap}")
        if self.budget_subsets < 1:
            raise ValueError(f"budget_subsets must be >= 1, got {self.budget_subsets}")


    def selectors(self) -> dict[str, str]:
        """Checkpoints by row name, in the order given (see `checkpoint`)."""
        return named_checkpoints(self.checkpoint)


def load_eval_config(path: str | Path | None, flags: dict[str, Any], overrides: Sequence[str] = ()) -> EvalConfig:
    """Defaults < YAML at `path` < explicit command-line `flags` (None = not given) < ``key=value`` overrides."""
    return load_config(EvalConfig, path, list(overrides), flags)


def restrict(groups: Sequence[QuestionGroup], k: int | None) -> list[QuestionGroup]:
    """Each group with its trajectories sorted by sample_id, cut to the first k."""
    out = []
    for g in groups:
        trajs = sorted(g.trajectories, key=lambda t: t.sample_id)
        out.append(QuestionGroup(g.question_id, g.question, g.golden_answers, trajs[:k] if k else trajs))
    return out


class TraceMethod:
    """A trained selector as a method: `Selector.from_pretrained(checkpoint).select(pool)`; `name` is
    its row (``trace``, ``trace_grounded``, ...)."""

    def __init__(self, checkpoint: str | None, pool: Pool, name: str = "trace", encoder_runtime: str | None = None,
                 encoder_threads: int | None = None):
        self.name = name
        self.checkpoint = checkpoint
        self.meta = pool.meta
        self.selector: Any = None
        self.reason: str | None = None
        self.load_seconds = 0.0
        if checkpoint is None:
            self.reason = "no --checkpoint given"
            return
        try:
            from trace_selector.selector import Selector
        except ImportError as err:
            self.reason = f"selector unavailable ({err})"
            return
        t0 = time.perf_counter()
        from trace_selector import paths

        # The on-disk embedding cache: a pool evaluated twice (or scored by `select`) is encoded once.
        encoder = {k: v for k, v in (("encoder_runtime", encoder_runtime), ("encoder_threads", encoder_threads))
                   if v is not None}
        self.selector = Selector.from_pretrained(checkpoint, cache_dir=paths.embeddings_dir(), **encoder)
        self.load_seconds = time.perf_counter() - t0

    def check(self, groups: Sequence[QuestionGroup]) -> str | None:
        return self.reason

    def select(self, groups: Sequence[QuestionGroup]) -> list[Pick]:
        selections = self.selector.select(Pool(groups=list(groups), meta=self.meta))
        by_q = {s.question_id: s for s in selections}
        picks = []
        for g in groups:
            s = by_q.get(g.question_id)
            if s is None or s.sample_id is None:
                reason = s.fallback if s is not None and s.fallback else "selector returned no selection"
                picks.append(Pick(g.question_id, None, "", fallback=reason))
            else:
                scores = {int(k): float(v) for k, v in dict(s.scores or {}).items()}
                picks.append(Pick(g.question_id, int(s.sample_id), s.answer, scores=scores, fallback=s.fallback))
        return picks


def build_methods(cfg: EvalConfig, pool: Pool) -> tuple[dict[str, Method], dict[str, str], Any]:
    """Methods by name, skip reasons of those that cannot even be built, and the engine (or None)."""
    from trace_selector.baselines.registry import build_fast, build_llm

    methods: dict[str, Method] = {}
    skipped: dict[str, str] = {}
    engine = None
    wanted_llm = [m for m in cfg.methods if m in LLM_METHODS]
    if wanted_llm:
        from trace_selector.baselines.llm import Chat

        try:
            from trace_selector.engines import make_engine

            engine = make_engine(cfg.engine)
        except (ImportError, InputError) as err:
            for m in wanted_llm:
                skipped[m] = f"no LLM engine ({err})"
        else:
            chat = Chat(engine, cfg.llm)
            methods.update({m: build_llm(m, chat) for m in wanted_llm})
    selectors = cfg.selectors()
    for m in cfg.methods:
        if m in FAST_METHODS:
            methods[m] = build_fast(m, cfg.confidence)
        elif m in selectors or m == "trace":
            methods[m] = TraceMethod(selectors.get(m), pool, name=m, encoder_runtime=cfg.encoder_runtime,
                                     encoder_threads=cfg.encoder_threads)
    for m in cfg.methods:
        if m in ADAPTIVE_VOTE_METHODS:
            methods[m] = build_adaptive(m, cfg.adaptive)
        elif m.endswith(ADAPTIVE_SUFFIX):
            base = m.removesuffix(ADAPTIVE_SUFFIX)
            # The fixed-K row's selector when it runs too: one checkpoint load, one embedding cache.
            trace = methods.get(base)
            if not isinstance(trace, TraceMethod):
                trace = TraceMethod(selectors.get(base), pool, name=base, encoder_runtime=cfg.encoder_runtime,
                                    encoder_threads=cfg.encoder_threads)
            methods[m] = build_adaptive(m, cfg.adaptive, trace)
    return methods, skipped, engine


def set_temperatures(cfg: EvalConfig, methods: dict[str, Method]) -> dict[str, str]:
    """Each selector adaptive row's temperature: `AdaptiveConfig.temperature`, else fitted on
    `AdaptiveConfig.calibration_pool` (every wave of its questions), else the checkpoint's
    ``calibration.json`` (`trace-selector calibrate`), else 1. Returns where each came from."""
    from trace_selector.calibration import fit_temperature
    from trace_selector.records import read_pool

    sources: dict[str, str] = {}
    calibration_groups: list[QuestionGroup] | None = None
    for name, method in methods.items():
        if not (isinstance(method, AdaptiveMethod) and isinstance(method.rule, ConfidenceRule)):
            continue
        if name in cfg.adaptive.temperature:
            sources[name] = "given"
        elif cfg.adaptive.calibration_pool and method.check([]) is None:
            if calibration_groups is None:
                calibration_groups = restrict(read_pool(cfg.adaptive.calibration_pool).groups, cfg.k)
            history = method.waves(calibration_groups)
            method.rule.temperature = fit_temperature(wave_items(history, calibration_groups, em_of))
            sources[name] = f"fitted on {cfg.adaptive.calibration_pool}"
        elif (saved := _saved_temperature(method)) is not None:
            method.rule.temperature = saved
            sources[name] = f"{method.base.checkpoint}/calibration.json"  # type: ignore[attr-defined]
        else:
            sources[name] = ("none (T = 1: set adaptive.temperature or adaptive.calibration_pool, "
                             "or run trace-selector calibrate)")
    return sources


def _saved_temperature(method: AdaptiveMethod) -> float | None:
    """The temperature saved with a selector checkpoint (`trace-selector calibrate`), if any."""
    from trace_selector.model.hub import read_temperature

    checkpoint = getattr(method.base, "checkpoint", None)
    return read_temperature(checkpoint) if isinstance(checkpoint, str) and method.check([]) is None else None


def evaluate(cfg: EvalConfig, pool: Pool | None = None) -> dict[str, Any]:
    """Run every method of `cfg` on the pool and write the outputs; returns the results dict."""
    from trace_selector.records import read_pool

    if pool is None:
        if not cfg.pool:
            raise InputError("evaluate: no pool given")
        pool = read_pool(cfg.pool, cfg.labels)
    if cfg.threads is not None:
        import torch

        torch.set_num_threads(cfg.threads)
    groups = restrict(pool.groups[:cfg.questions], cfg.k)
    # `--k` above the pool's K uses what is there, and the table says so (results.json: k_requested).
    k = max((len(g.trajectories) for g in groups), default=0)
    methods, skipped, engine = build_methods(cfg, pool)
    runs: dict[str, MethodRun] = {}
    try:
        temperature_sources = set_temperatures(cfg, methods)
        for name in cfg.methods:
            if name in skipped:
                continue
            reason = methods[name].check(groups)
            if reason:
                skipped[name] = reason
                continue
            t0 = time.perf_counter()
            picks = methods[name].select(groups)
            runs[name] = MethodRun(picks, time.perf_counter() - t0).score(groups)
        curve: dict[str, dict[str, float]] = {}
        if cfg.budget and groups:
            # Adaptive rows choose their own subset size; they are drawn against trajectories used instead.
            curve_methods = {n: methods[n] for n in runs if (cfg.budget_llm or n not in LLM_METHODS)
                             and not isinstance(methods[n], AdaptiveMethod)}
            curve = budget_curve(curve_methods, groups, cfg.budget_subsets, cfg.seed)
    finally:
        if engine is not None:
            engine.close()

    results: dict[str, Any] = {
        "pool": str(pool.path or cfg.pool),
        "n_questions": len(groups),
        "k": k,
        **({"k_requested": cfg.k} if cfg.k is not None and cfg.k > k else {}),
        "oracle_pass_at_k": round(oracle_at(groups, k), 4) if k else 0.0,
        "methods": {},
        "budget_curve": curve,
        "budget": {"sizes": subset_sizes(k), "subsets": cfg.budget_subsets, "seed": cfg.seed, "llm": cfg.budget_llm},
        "settings": to_dict(cfg),
    }
    for name in cfg.methods:
        results["methods"][name] = {"skipped": skipped[name]} if name in skipped else summarize(name, runs[name], groups)
        describe = getattr(methods.get(name), "describe", None)
        if callable(describe) and name in runs:  # settings a reader needs next to the number (window, caps)
            results["methods"][name]["settings"] = describe()
    for name, method in methods.items():
        trace = method.base if isinstance(method, AdaptiveMethod) else method
        if isinstance(trace, TraceMethod) and name in runs:
            results["methods"][name]["load_seconds"] = round(trace.load_seconds, 3)
            # What the checkpoint is (trace = the paper's configuration), whatever the row is called.
            results["methods"][name]["checkpoint"] = trace.checkpoint
            results["methods"][name]["selector_method"] = trace.selector.method
    calibrations = add_adaptive(cfg, results, groups, methods, runs, temperature_sources)
    if engine is not None and hasattr(engine, "info"):
        results["engine"] = engine.info()
    add_paired(cfg, results, groups, runs)
    add_families(results, groups, runs, pool.meta.setting or "")

    write_outputs(cfg, results, groups, runs)
    if cfg.calibration and calibrations:
        plot_reliability(calibrations, cfg.calibration, title=Path(results["pool"]).name)
    return results


def add_adaptive(cfg: EvalConfig, results: dict[str, Any], groups: Sequence[QuestionGroup], methods: dict[str, Method],
                 runs: dict[str, MethodRun], temperature_sources: dict[str, str]) -> dict[str, Calibration]:
    """Adaptive rows' cost, fixed-K reference and threshold sweep (``adaptive_curve``), and every
    selector row's ``calibration``; returns the calibrations for the reliability diagram."""
    calibrations: dict[str, Calibration] = {}
    results["adaptive_curve"] = {}
    for name, method in methods.items():
        if name not in runs:
            continue
        entry = results["methods"][name]
        if isinstance(method, AdaptiveMethod):
            table = WaveTable.build(method.history, groups, em_of)
            entry["fixed_k_em"] = round(table.point(math.inf).em, 4)  # the same method never stopping early
            entry["stopped_early"] = sum(1 for g, p in zip(groups, runs[name].picks)
                                         if p.extra.get("trajectories_used", 0) < len(g.trajectories))
            if cfg.adaptive.orders:
                table = over_orders(entry, method, groups, cfg.adaptive.orders, cfg.seed)
            results["adaptive_curve"][name] = [pt.to_dict() for pt in table.sweep(cfg.adaptive.curve_points)]
            if isinstance(method.rule, ConfidenceRule):
                cal = calibrate(wave_items(method.history, groups, em_of), method.rule.temperature,
                                temperature_sources.get(name, ""))
                calibrations[name] = cal
                entry["calibration"] = {**cal.to_dict(), "picks": "every wave of every question"}
        elif isinstance(method, TraceMethod):
            # At the temperature the row's adaptive sibling reads (given or fitted elsewhere); else fitted
            # here, in-sample, which says how far temperature scaling can go but is optimistic.
            sibling = methods.get(name + ADAPTIVE_SUFFIX)
            given = (isinstance(sibling, AdaptiveMethod) and isinstance(sibling.rule, ConfidenceRule)
                     and not temperature_sources.get(sibling.name, "").startswith("none"))
            items = [scored_pick(g, p, em_of(g, p) == 1.0) for g, p in zip(groups, runs[name].picks)]
            cal = calibrate(items, sibling.rule.temperature if given else None,  # type: ignore[union-attr]
                            temperature_sources[sibling.name] if given else "fitted on this pool (in-sample)")  # type: ignore[union-attr]
            calibrations[name] = cal
            entry["calibration"] = {**cal.to_dict(), "picks": "every question at full K"}
    return calibrations


def over_orders(entry: dict[str, Any], method: AdaptiveMethod, groups: Sequence[QuestionGroup], orders: int,
                seed: int) -> WaveTable:
    """Replay an adaptive row on `orders` random orders of arrival (seeds seed, seed + 1, ...) and record
    the means and spreads in ``entry["over_orders"]``; the stacked table, for the curve."""
    tables = [WaveTable.build(method.waves(groups, arrival_orders(groups, seed + r)), groups, em_of)
              for r in range(orders)]
    points = [t.point(method.rule.threshold) for t in tables]
    ems = np.array([pt.em for pt in points])
    used = np.array([pt.mean_trajectories for pt in points])
    tokens = [pt.mean_generated_tokens for pt in points]
    entry["over_orders"] = {"orders": orders, "seed": seed, "em": round(float(ems.mean()), 4),
                            "em_sd": round(float(ems.std()), 4), "em_min": round(float(ems.min()), 4),
                            "em_max": round(float(ems.max()), 4), "mean_trajectories": round(float(used.mean()), 4),
                            "mean_trajectories_sd": round(float(used.std()), 4),
                            "mean_generated_tokens": None if None in tokens else round(float(np.mean(tokens)), 2)}
    return WaveTable.stack(tables)


def add_families(results: dict[str, Any], groups: Sequence[QuestionGroup], runs: dict[str, MethodRun],
                 setting: str) -> None:
    """``families`` (questions per family) and each scored row's ``em_by_family``, when the pool's
    question ids name two or more families of its bundled setting (records/summary.py): a method can
    win on one family and lose on another, and wikihops' comparison questions have a 50% chance level."""
    from trace_selector.records.summary import family_of

    names = [family_of(g.question_id, setting) for g in groups]
    if None in names or len(set(names)) < 2:
        return
    members: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        members.setdefault(name, []).append(i)  # type: ignore[arg-type]
    results["families"] = {name: len(rows) for name, rows in members.items()}
    for name, run in runs.items():
        results["methods"][name]["em_by_family"] = {
            fam: round(100.0 * sum(run.scores[i][0] for i in rows) / len(rows), 4) for fam, rows in members.items()}


def add_paired(cfg: EvalConfig, results: dict[str, Any], groups: Sequence[QuestionGroup],
               runs: dict[str, MethodRun]) -> None:
    """``vs_majority`` (and ``vs_<reference>``) paired differences on every scored method's entry."""
    def em(run: MethodRun) -> list[float]:
        return [s[0] for s in run.scores]

    if not groups:
        return
    majority = runs.get("majority")
    if majority is None:  # cheap and deterministic, so pairing never depends on the method list
        from trace_selector.baselines.registry import build_fast

        majority = MethodRun(build_fast("majority").select(groups), 0.0).score(groups)
    against = {"majority": em(majority)}
    if cfg.reference is not None and cfg.reference in runs:
        against[cfg.reference] = em(runs[cfg.reference])
    results["paired"] = {"against": list(against), "bootstrap": cfg.bootstrap, "seed": cfg.seed, "interval": 0.95}
    for name, run in runs.items():
        mine = em(run)
        for other, theirs in against.items():
            if other != name:
                pair = paired_difference(mine, theirs, resamples=cfg.bootstrap, seed=cfg.seed)
                results["methods"][name][f"vs_{other}"] = pair.to_dict()
    # Cost at (near-)equal accuracy: each adaptive row's trajectories per question against every row
    # within match_points of its EM, paired by question (scale 1: in trajectories, not points).
    used = {name: [usage(g, p)[0] for g, p in zip(groups, run.picks)] for name, run in runs.items()}
    for name in runs:
        if not (name.endswith(ADAPTIVE_SUFFIX) or name in ADAPTIVE_METHODS):
            continue
        for other in runs:
            gap = abs(results["methods"][name]["em"] - results["methods"][other]["em"])
            if other != name and gap <= cfg.adaptive.match_points + 1e-9:
                pair = paired_difference(used[name], used[other], resamples=cfg.bootstrap, seed=cfg.seed, scale=1.0)
                results["methods"][name][f"trajectories_vs_{other}"] = pair.to_dict()

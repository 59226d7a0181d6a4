"""Evaluate answer-selection methods on one rollout pool: EM / F1 / throughput / tokens per method,
a budget curve over subset sizes, a Markdown table, results.json, an optional plot and per-question
JSONL.

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

Budget curve: for k = 1, 2, 4, ... up to K (and K itself), EM is averaged over `budget_subsets`
random size-k subsets of each question's trajectories, drawn once with `seed` and shared by all
methods (k >= K has a single subset). The oracle line is the unbiased pass@k. LLM methods join the
curve only with `budget_llm` (each subset is a full rerun).

Paired statistics: every scored method is compared question by question with majority vote (and,
with `reference`, with that method too): the mean EM difference, its 95% percentile-bootstrap
interval over questions (`bootstrap` resamples, seeded by `seed`) and the questions won and lost
(`paired.py`). Majority vote is computed for this even when it is not in the method list.

A method that cannot run (no log-probs, no stated confidence, no checkpoint, no LLM engine) appears
in results.json as ``{"skipped": reason}``; it is never scored as wrong.

Adaptive rows (``majority_adaptive_ac``, ``majority_adaptive_esc``, ``<selector>_adaptive``;
`trace_selector.adaptive`) see each question's trajectories in waves and stop when sure. Every row gets
``mean_trajectories`` (and ``mean_generated_tokens`` when the pool records them); fixed-K rows use
every trajectory, `single` one. Adaptive rows also get their threshold sweep (``adaptive_curve``, drawn
in the budget plot against trajectories used), and ``trajectories_vs_<row>``: trajectories used per
question paired with every row whose EM is within `AdaptiveConfig.match_points`. Selector rows get a
``calibration`` entry (calibration.py; ``--calibration`` draws the reliability diagram).
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_selector.adaptive import (
    ADAPTIVE_SUFFIX,
    AdaptiveConfig,
    AdaptiveMethod,
    ConfidenceRule,
    WaveTable,
    build_adaptive,
    usage,
    wave_items,
)
from trace_selector.atomic import atomic_write
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
from trace_selector.calibration import Calibration, calibrate, plot_reliability, scored_pick
from trace_selector.config import dump_config, load_config, to_dict
from trace_selector.errors import InputError
from trace_selector.paired import BOOTSTRAP_RESAMPLES, Paired, paired_difference
from trace_selector.records import Pool, QuestionGroup
from trace_selector.records.answers import exact_match, f1_score, is_correct, pass_at_k
from trace_selector.records.pick import Pick


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


def score_pick(group: QuestionGroup, pick: Pick) -> tuple[float, float]:
    """(EM, F1) in [0, 1] of one pick (expectations for `Pick.weights`)."""
    by_id = {t.sample_id: t for t in group.trajectories}
    if pick.weights is not None:
        em = f1 = 0.0
        for sid, w in pick.weights.items():
            e, f = score_pick(group, Pick(group.question_id, sid, by_id[sid].answer))
            em += w * e
            f1 += w * f
        return em, f1
    if pick.sample_id is None and not pick.answer:
        return 0.0, 0.0
    if group.golden_answers:
        return exact_match(pick.answer, group.golden_answers), f1_score(pick.answer, group.golden_answers)
    traj = by_id.get(pick.sample_id) if pick.sample_id is not None else None
    ok = float(traj is not None and bool(is_correct(traj, group.golden_answers)))
    return ok, ok


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


@dataclass(slots=True)
class MethodRun:
    """A method's picks on the full pool and what they took."""

    picks: list[Pick]
    seconds: float
    scores: list[tuple[float, float]] = field(default_factory=list)
    """(EM, F1) of each pick, filled once by `MethodRun.score` for the summary, pairing and JSONL."""

    def score(self, groups: Sequence[QuestionGroup]) -> "MethodRun":
        self.scores = [score_pick(g, p) for g, p in zip(groups, self.picks)]
        return self


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


def em_of(group: QuestionGroup, pick: Pick) -> float:
    """EM in [0, 1] of a pick (what adaptive tables and calibration labels read)."""
    return score_pick(group, pick)[0]


def set_temperatures(cfg: EvalConfig, methods: dict[str, Method]) -> dict[str, str]:
    """Each selector adaptive row's temperature: `AdaptiveConfig.temperature`, else fitted on
    `AdaptiveConfig.calibration_pool` (every wave of its questions), else 1. Returns where each came from."""
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
        else:
            sources[name] = "none (T = 1: set adaptive.temperature or adaptive.calibration_pool)"
    return sources


def subset_sizes(max_k: int) -> list[int]:
    """1, 2, 4, ... below max_k, then max_k."""
    ks, k = [], 1
    while k < max_k:
        ks.append(k)
        k *= 2
    return ks + [max_k] if max_k >= 1 else []


def draw_subsets(groups: Sequence[QuestionGroup], k: int, n: int, rng: random.Random) -> list[list[QuestionGroup]]:
    """`n` sets of size-k subsets (one per question, sample_id order kept); one set when k >= K."""
    if k >= max((len(g.trajectories) for g in groups), default=0):
        n = 1
    sets = []
    for _ in range(n):
        sets.append([
            QuestionGroup(g.question_id, g.question, g.golden_answers,
                          sorted(rng.sample(g.trajectories, min(k, len(g.trajectories))), key=lambda t: t.sample_id))
            for g in groups
        ])
    return sets


def oracle_at(groups: Sequence[QuestionGroup], k: int) -> float:
    """Mean unbiased pass@k over questions, in percent (an empty question scores 0)."""
    total = 0.0
    for g in groups:
        n = len(g.trajectories)
        if n:
            c = sum(1 for t in g.trajectories if is_correct(t, g.golden_answers))
            total += pass_at_k(n, c, min(k, n))
    return 100.0 * total / max(1, len(groups))


def budget_curve(methods: dict[str, Method], groups: Sequence[QuestionGroup], n_subsets: int, seed: int) -> dict[str, dict[str, float]]:
    """EM (percent) per method and subset size, plus ``oracle_pass_at_k``."""
    from tqdm import tqdm

    max_k = max((len(g.trajectories) for g in groups), default=0)
    rng = random.Random(seed)
    curve: dict[str, dict[str, float]] = {name: {} for name in methods}
    curve["oracle_pass_at_k"] = {}
    for k in tqdm(subset_sizes(max_k), desc="budget curve", unit="k", leave=False):
        sets = draw_subsets(groups, k, n_subsets, rng)
        for name, method in methods.items():
            ems = []
            for subset in sets:
                picks = method.select(subset)
                ems.append(sum(score_pick(g, p)[0] for g, p in zip(subset, picks)) / max(1, len(subset)))
            curve[name][str(k)] = round(100.0 * sum(ems) / len(ems), 4)
        curve["oracle_pass_at_k"][str(k)] = round(oracle_at(groups, k), 4)
    return curve


def summarize(name: str, run: MethodRun, groups: Sequence[QuestionGroup]) -> dict[str, Any]:
    """The results.json entry of one method."""
    scores = run.scores
    n = max(1, len(groups))
    entry: dict[str, Any] = {
        "em": round(100.0 * sum(s[0] for s in scores) / n, 4),
        "f1": round(100.0 * sum(s[1] for s in scores) / n, 4),
        "seconds": round(run.seconds, 4),
        "questions_per_s": round(len(groups) / run.seconds, 3) if run.seconds > 0 else None,
        "tokens_in": sum(p.tokens_in for p in run.picks),
        "tokens_out": sum(p.tokens_out for p in run.picks),
        "parse_failures": sum(p.parse_failures for p in run.picks),
        "fallbacks": sum(1 for p in run.picks if p.fallback),
    }
    used = [usage(g, p) for g, p in zip(groups, run.picks)]
    entry["mean_trajectories"] = round(sum(u[0] for u in used) / n, 4)
    if groups and all(u[1] is not None for u in used):
        entry["mean_generated_tokens"] = round(sum(u[1] for u in used) / n, 2)  # type: ignore[misc]
    report = sum(p.extra.get("report_tokens", 0) for p in run.picks)
    traj = sum(p.extra.get("trajectory_tokens", 0) for p in run.picks)
    if traj:
        entry["report_tokens"] = report
        entry["trajectory_tokens"] = traj
        entry["compression_ratio"] = round(report / traj, 4)
    cut = sum(p.extra.get("cut_tokens", 0) for p in run.picks)  # trajectory text LLM methods could not fit
    if cut:
        entry["cut_tokens"] = cut
    forced = sum(1 for p in run.picks if p.extra.get("forced_answer"))
    if forced:
        entry["forced_answers"] = forced
    signals: dict[str, int] = {}
    for p in run.picks:  # DeepConf: token confidences or the sampled-log-prob fallback, per question
        if "signal" in p.extra:
            signals[p.extra["signal"]] = signals.get(p.extra["signal"], 0) + 1
    if signals:
        entry["signal"] = signals
    return entry


def evaluate(cfg: EvalConfig, pool: Pool | None = None) -> dict[str, Any]:
    """Run every method of `cfg` on the pool and write the outputs; returns the results dict."""
    from trace_selector.records import read_pool

    if pool is None:
        if not cfg.pool:
            raise InputError("evaluate: no pool given")
        pool = read_pool(cfg.pool)
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


def write_outputs(cfg: EvalConfig, results: dict[str, Any], groups: Sequence[QuestionGroup], runs: dict[str, MethodRun]) -> None:
    """results.json, its resolved config, and the optional per-question JSONL and plot (all atomic)."""
    out = Path(cfg.out)
    with atomic_write(out) as fh:
        json.dump(results, fh, indent=2, default=str)
        fh.write("\n")
    dump_config(cfg, out.with_name(out.stem + ".config.yaml"))
    if cfg.per_question:
        with atomic_write(cfg.per_question) as fh:
            for gi, g in enumerate(groups):
                row: dict[str, Any] = {"question_id": g.question_id, "question": g.question, "gold": g.golden_answers,
                                       "k": len(g.trajectories), "methods": {}}
                for name, run in runs.items():
                    p = run.picks[gi]
                    em, f1 = run.scores[gi]
                    row["methods"][name] = {"sample_id": p.sample_id, "answer": p.answer, "em": em, "f1": f1,
                                            "correct": em == 1.0, "fallback": p.fallback}
                    if p.scores:
                        row["methods"][name]["scores"] = {str(k): round(v, 6) for k, v in p.scores.items()}
                    if p.extra:  # model output, agent actions, rubric scores: what to read when a method errs
                        row["methods"][name]["details"] = p.extra
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    if cfg.plot and (results["budget_curve"] or results.get("adaptive_curve")):
        chosen = {n: (r["mean_trajectories"], r["em"]) for n, r in results["methods"].items()
                  if n in results.get("adaptive_curve", {})}
        plot_budget(results["budget_curve"], cfg.plot, title=Path(results["pool"]).name,
                    adaptive=results.get("adaptive_curve", {}), chosen=chosen)


def plot_budget(curve: dict[str, dict[str, float]], path: str | Path, title: str = "",
                adaptive: dict[str, list[dict[str, Any]]] | None = None,
                chosen: dict[str, tuple[float, float]] | None = None) -> None:
    """One line per method (EM vs k, log2 x axis) and a dashed oracle pass@k line, as a PNG; each
    adaptive row's threshold sweep (EM vs mean trajectories used) dotted on the same axes, its chosen
    threshold starred."""
    # A bare Figure renders with Agg without touching pyplot's global backend (a notebook keeps its own).
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for name, points in curve.items():
        ks = sorted(points, key=int)
        oracle = name == "oracle_pass_at_k"
        ax.plot([int(k) for k in ks], [points[k] for k in ks], marker="o", ms=3,
                ls="--" if oracle else "-", color="black" if oracle else None, label="oracle pass@k" if oracle else name)
    for name, sweep in (adaptive or {}).items():
        pts = sorted((p["mean_trajectories"], p["em"]) for p in sweep if p["mean_trajectories"] > 0)
        line = ax.plot([p[0] for p in pts], [p[1] for p in pts], ls=":", marker=".", ms=3, label=f"{name} (sweep)")
        if chosen and name in chosen and chosen[name][0] > 0:
            ax.plot(*chosen[name], marker="*", ms=10, color=line[0].get_color(), ls="none")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("trajectories per question (k; adaptive: mean used)")
    ax.set_ylabel("EM (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)


def format_table(results: dict[str, Any]) -> str:
    """Markdown table: method, EM, F1, paired differences, questions/s, tokens in/out, notes."""
    against = results.get("paired", {}).get("against", [])
    pair_heads = "".join(f" vs {a} [95% CI] won/lost |" for a in against)
    # Trajectories used per question, only next to adaptive rows (fixed-K tables stay as they were).
    cost = bool(results.get("adaptive_curve"))
    lines = [
        f"pool {results['pool']}: {results['n_questions']} questions, k={results['k']}"
        + (f" (asked for {results['k_requested']}; the pool has at most {results['k']} per question, so it "
           f"uses {results['k']})" if "k_requested" in results else "")
        + f", oracle pass@k {results['oracle_pass_at_k']:.1f}%",
        "",
        f"| method | EM | F1 |{pair_heads}{' trajectories | gen. tokens |' if cost else ''} questions/s | tokens in | tokens out | notes |",
        "|---|---:|---:|" + "---:|" * len(against) + ("---:|---:|" if cost else "") + "---:|---:|---:|---|",
    ]
    for name, r in results["methods"].items():
        if "skipped" in r:
            lines.append(f"| {name} | - | - |" + " - |" * (len(against) + 2 * cost) + f" - | - | - | skipped: {r['skipped']} |")
            continue
        pairs = "".join(f" {Paired(**r[f'vs_{a}']).to_text() if f'vs_{a}' in r else '-'} |" for a in against)
        notes = []
        if r["parse_failures"]:
            notes.append(f"{r['parse_failures']} parse failures")
        if r["fallbacks"]:
            notes.append(f"{r['fallbacks']} fallbacks")
        if r.get("cut_tokens"):
            notes.append(f"{r['cut_tokens']} tokens cut to fit")
        if r.get("forced_answers"):
            notes.append(f"{r['forced_answers']} forced answers")
        if "shown_trajectories" in r.get("settings", {}):  # LLM aggregators: what the prompt budget cut
            s = r["settings"]
            notes.append(f"{s['clipped_trajectories']} of {s['shown_trajectories']} trajectories clipped")
        if r.get("signal", {}).get("sampled_logprob"):
            notes.append(f"sampled-token log-probs, no token_conf on {r['signal']['sampled_logprob']} questions")
        if "compression_ratio" in r:
            notes.append(f"compression {r['compression_ratio']:.3f}")
        if r.get("selector_method", name) not in (name, name.removesuffix(ADAPTIVE_SUFFIX)):
            notes.append(f"checkpoint is a {r['selector_method']} selector")
        if "fixed_k_em" in r:
            s = r.get("settings", {})
            at = f"threshold {s['threshold']:g}" if "threshold" in s else ""
            if "temperature" in s:
                at += f", T={s['temperature']:g}"
            notes.append(f"adaptive ({at}): stopped early on {r['stopped_early']}; EM {r['fixed_k_em']:.1f} at full K")
        if cost and "calibration" in r:
            notes.append(f"ECE {r['calibration']['ece']:.3f} (T={r['calibration']['temperature']:g})")
        mine = ""
        if cost:
            tokens = r.get("mean_generated_tokens")
            mine = f" {r['mean_trajectories']:.2f} | {'-' if tokens is None else f'{tokens:.0f}'} |"
        qps = "-" if r["questions_per_s"] is None else f"{r['questions_per_s']:.3g}"
        lines.append(f"| {name} | {r['em']:.1f} | {r['f1']:.1f} |{pairs}{mine} {qps} | {r['tokens_in']} | {r['tokens_out']} | {'; '.join(notes)} |")
    return "\n".join(lines)

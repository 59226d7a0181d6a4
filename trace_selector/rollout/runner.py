"""`trace-selector rollout`: run a strategy over a split of a search setting and write a pool.

    trace-selector rollout --config rollout/wikileads-standard.yaml --split dev --limit 20 --k 4 \\
        --out pools/dev.jsonl.gz agent.temperature=0.8

Config layers: `RolloutConfig` defaults < the YAML recipe < ``--split/--limit/--k/--model`` <
``key=value`` overrides. The run is resumable: finished question groups go to an fsynced shard
(`writer.py`), and rerunning the same command after a kill skips them. The final pool, its
``.meta.json`` sidecar (setting, model, sampling, strategy, seeds, vLLM version, logprob mode,
accounting) and the resolved config (``<pool>.config.yaml``) are written atomically at the end.

With ``adaptive.checkpoint=<selector> adaptive.threshold=t`` each question is sampled in waves until the
selector is sure of its pick or k is reached (rollout/waves.py schedules the waves around a stop hook;
trace_selector/adaptive_rollout.py builds the hook from the selector); the sidecar's ``adaptive`` entry
says per question how many trajectories it got and why it stopped.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trace_selector.errors import InputError
from trace_selector.records import PoolMeta, Trajectory
from trace_selector.rollout.agent import Accounting, Agent, AgentConfig
from trace_selector.rollout.strategies.divinit import DivInitConfig, diversity, n_candidates
from trace_selector.rollout.strategies.partial import PartialConfig
from trace_selector.rollout.strategies.replicas import ReplicasConfig
from trace_selector.rollout.waves import AdaptiveRolloutConfig, StopHook, WaveScheduler, adaptive_meta, is_closed
from trace_selector.types import Strategy


@dataclass
class RolloutConfig:
    """One rollout run (a YAML recipe in rollout/ fills it)."""

    setting: str = "wikileads"
    """Search setting name or prepared folder (see `search.setting.load_setting`)."""
    split: str = "dev"
    """Question split."""
    limit: int | None = None
    """Use only the first `limit` questions of the split after `offset` (None: all)."""
    offset: int = 0
    """Skip the first `offset` questions of the split: a sealed pool starts after every question an
    earlier pool of the same split used."""
    order: Literal["split", "mixed"] = "split"
    """The order `offset` and `limit` count in: "split" (the question file's) or "mixed" (interleaved
    by question family, so that every first N questions hold each family in its share of the split,
    each family in its own order; for splits written family by family, as wikihops puts its comparison
    questions last). Seeds follow the split order either way, and a pool grown in one order may be
    extended in the other: it keeps every question it has."""
    k: int = 4
    """Trajectories per question (the budget N for partial rollout)."""
    strategy: Strategy = "standard"
    """standard | divinit | partial | replicas."""
    agent_kind: Literal["webqa", "browsing"] = "webqa"
    """ReAct search agent over passages, or browsing agent over pages."""
    model: str = "qwen2.5-coder-1.5b"
    """Policy model: packaged name, HF folder or hub id. The default is the default policy setup's
    model (rollout/wikileads-standard.yaml), chosen by the policy study (docs/results.md §The default
    policy)."""
    engine: str = "vllm"
    """Engine spec for `engine.make_engine`: "vllm" (in-process) or "http://host:port[,...]"."""
    engine_options: dict[str, Any] = field(default_factory=dict)
    """Extra engine options (e.g. max_num_seqs, kv_cache_gib); max_model_len comes from agent.max_context."""
    seed: int = 0
    """Base seed (engine seed; per-trajectory seeds derive from it, applied only where the engine can)."""
    chunk_questions: int = 8
    """Questions advanced together (chunk_questions x k trajectories per engine batch)."""
    snapshot_minutes: float | None = 15.0
    """Rewrite the pool file with every finished question at most this often (checked after each
    chunk; 0: after every chunk; None: only at the end). The shard already survives a kill, but not
    a lost machine: a snapshot is an ordinary pool that can be copied and committed, and a later run
    of the same command extends it. Its sidecar says ``snapshot: true`` until the run finishes."""
    stop_file: str | None = None
    """Stop between chunks when this file exists: every finished question is written as a snapshot,
    the shard is kept, and the run ends without error; the same command continues it. A run that
    finds the file before it starts generates nothing. Background pool jobs use it to end a session
    without losing the chunk in flight (a signal stops at once and loses it)."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """How each trajectory is sampled."""
    divinit: DivInitConfig = field(default_factory=DivInitConfig)
    """DivInit parameters (strategy=divinit)."""
    partial: PartialConfig = field(default_factory=PartialConfig)
    """ParallelMuse parameters (strategy=partial)."""
    replicas: ReplicasConfig = field(default_factory=ReplicasConfig)
    """TIPEX replica parameters (strategy=replicas)."""
    adaptive: AdaptiveRolloutConfig = field(default_factory=AdaptiveRolloutConfig)
    """Online adaptive sampling: waves per question until a selector is sure (adaptive.checkpoint);
    chunk_questions x k trajectories stay in flight over the open questions (rollout/waves.py)."""

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1 or null, got {self.limit}")
        if self.offset < 0:
            raise ValueError(f"offset must be >= 0, got {self.offset}")
        if self.strategy not in ("standard", "divinit", "partial", "replicas"):
            raise ValueError(f"strategy must be standard|divinit|partial|replicas, got {self.strategy!r}")
        if self.order not in ("split", "mixed"):
            raise ValueError(f"order must be split or mixed, got {self.order!r}")
        if self.agent_kind not in ("webqa", "browsing"):
            raise ValueError(f"agent_kind must be webqa or browsing, got {self.agent_kind!r}")
        if self.chunk_questions < 1:
            raise ValueError(f"chunk_questions must be >= 1, got {self.chunk_questions}")
        if self.snapshot_minutes is not None and self.snapshot_minutes < 0:
            raise ValueError(f"snapshot_minutes must be >= 0 or null, got {self.snapshot_minutes}")
        if self.strategy == "partial" and self.partial.initial > self.k:
            raise ValueError(f"partial.initial ({self.partial.initial}) exceeds the budget k ({self.k})")
        if self.strategy == "divinit":
            n_candidates(self.divinit, self.k)
        if self.adaptive.checkpoint is not None and self.strategy != "standard":
            raise ValueError(f"adaptive sampling draws independent waves: it needs strategy=standard, got "
                             f"{self.strategy!r} (whose trajectories of a question depend on each other)")

    def strategy_options(self) -> Any:
        return {"divinit": self.divinit, "partial": self.partial, "replicas": self.replicas}.get(self.strategy)


@dataclass
class RolloutReport:
    """What a run did."""

    out: Path
    questions: int
    trajectories: int
    generated_now: int
    resumed: int
    accounting: dict[str, Any]
    stopped: bool = False
    """The run ended early at `RolloutConfig.stop_file`; `out` is a snapshot, or absent if nothing is done."""
    adaptive: dict[str, Any] | None = None
    """The sidecar's ``adaptive`` entry of an adaptive run (`waves.adaptive_meta`)."""

    def to_text(self) -> str:
        a = self.accounting
        if self.stopped and not self.trajectories:
            return f"stopped before starting: the stop file exists; {self.out} is unchanged"
        if self.stopped:
            return (f"stopped at the stop file with {self.questions} questions ({self.trajectories} trajectories, "
                    f"{self.generated_now} generated now) in {self.out}: a snapshot; rerun the same command "
                    f"to continue once the stop file is gone")
        text = (f"wrote {self.out}: {self.questions} questions, {self.trajectories} trajectories "
                f"({self.generated_now} generated now, {self.resumed} resumed from the shard); "
                f"{a.get('generated_tokens', 0)} generated / {a.get('prompt_tokens', 0)} prompt / "
                f"{a.get('cached_tokens', 0)} cached tokens, {a.get('tool_calls', 0)} tool calls, "
                f"{a.get('wall_seconds', 0):.1f} s")
        if self.adaptive:
            from trace_selector.records.summary import describe_adaptive

            text += "\nadaptive: " + describe_adaptive(self.adaptive)
        return text


def action_stats(trajectories: list[Trajectory]) -> dict[str, Any]:
    """Valid-action rate and finish reasons: a turn is invalid when it produced no parsable action
    (an "invalid" step, or a forced turn without an answer)."""
    turns = sum(int(t.extra.get("turns", len(t.steps) + 1)) for t in trajectories)
    invalid = sum(s.action == "invalid" for t in trajectories for s in t.steps)
    invalid += sum(t.finish_reason in ("no_answer", "length") for t in trajectories)
    truncated = sum(int(t.extra.get("truncated_turns", 0)) for t in trajectories)
    reasons = Counter(t.finish_reason or "none" for t in trajectories)
    return {
        "turns": turns,
        "invalid_turns": invalid,
        "truncated_turns": truncated,
        "valid_action_rate": round(1 - invalid / turns, 4) if turns else None,
        # Among turns that ended on their own (not cut by max_tokens): with structured outputs this
        # is 1.0 by construction, so anything lower points at the grammar or the parser.
        "complete_turn_valid_rate": round(1 - max(invalid - truncated, 0) / (turns - truncated), 4)
        if turns > truncated else None,
        "answered": sum(bool(t.answer) for t in trajectories),
        "finish_reasons": dict(sorted(reasons.items())),
    }


def _toolbox(cfg: RolloutConfig, setting: Any) -> Any:
    if cfg.agent_kind == "browsing":
        from trace_selector.rollout.browser_agent import BrowserTools

        return BrowserTools(setting.page_store())
    from trace_selector.rollout.tools import SearchTools

    return SearchTools(setting.index(), cfg.agent.top_k, cfg.agent.doc_chars)


def run_rollout(cfg: RolloutConfig, out: str | Path, *, engine: Any = None, toolbox: Any = None,
                questions: list[Any] | None = None, progress: bool = True,
                stop_hook: StopHook | None = None) -> RolloutReport:
    """Generate (or finish) the pool `out`. `engine`, `toolbox` and `questions` replace the ones the
    config names (tests pass fakes); an engine built here is closed here. A second rollout on the same
    `out` while this one runs is refused (`PoolLock`). With `stop_hook`, questions are sampled in waves
    of `cfg.adaptive.wave` until the hook stops them (rollout/waves.py); `adaptive.checkpoint` needs
    one (trace_selector/adaptive_rollout.py builds it from the selector)."""
    from trace_selector.rollout.writer import PoolLock

    if cfg.adaptive.checkpoint is not None and stop_hook is None:
        raise InputError("adaptive.checkpoint is set but no stop hook was given: run it through "
                         "`trace-selector rollout` (trace_selector.adaptive_rollout.run_adaptive_rollout), "
                         "which builds the hook from the selector")
    with PoolLock(out):
        return _run_locked(cfg, Path(out), engine, toolbox, questions, progress, stop_hook)


@dataclass
class _Work:
    """The questions a run covers and what is left to generate for them."""

    order: list[str]
    """Question ids of the pool, in `RolloutConfig.order` (after offset and limit)."""
    todo: list[tuple[Any, list[int]]]
    """(question, sample ids still missing) for every question with something left."""
    positions: dict[str, int]
    """Each question's position in the whole split: seeds derive from it, so an offset pool never
    reuses the seeds of the pool that took the questions before it."""


@dataclass
class _Totals:
    """Accounting of this run on top of what earlier runs recorded in the shard (cumulative over resumes)."""

    t_start: float
    base: dict[str, Any]
    base_stats: Counter
    base_wall: float
    accounting: Accounting = field(default_factory=Accounting)

    @classmethod
    def resume(cls, checkpoint: dict[str, Any], t_start: float) -> _Totals:
        return cls(t_start, checkpoint.get("accounting", {}), Counter(checkpoint.get("stats", {})),
                   float(checkpoint.get("wall_seconds", 0.0)))

    def checkpoint(self, stats: Counter, engine_info: dict[str, Any] | None = None) -> dict[str, Any]:
        return _checkpoint(self.base, self.accounting, self.base_stats + stats,
                           self.base_wall + time.perf_counter() - self.t_start, engine_info)


def _run_locked(cfg: RolloutConfig, out: Path, engine: Any, toolbox: Any, questions: list[Any] | None,
                progress: bool, stop_hook: StopHook | None = None) -> RolloutReport:
    from trace_selector.rollout.strategies import COUPLED
    from trace_selector.rollout.writer import ShardWriter

    t_start = time.perf_counter()
    stop = Path(cfg.stop_file) if cfg.stop_file else None
    if stop is not None and stop.exists():  # before anything is read or written
        return RolloutReport(out, 0, 0, 0, 0, {}, stopped=True)
    writer = ShardWriter(out, cfg.k, coupled=cfg.strategy in COUPLED)
    if out.exists() and not writer.path.exists():
        writer.seed_from_pool(_extendable(out, cfg))
    done = writer.resume()
    resumed = len(writer.rows)
    setting = None
    if questions is None or toolbox is None:
        from trace_selector.search.setting import load_setting

        setting = load_setting(cfg.setting)
    work = _plan_work(cfg, setting.questions(cfg.split) if questions is None else questions, done)
    seen: dict[str, list[Trajectory]] = {}
    if stop_hook is not None:  # adaptive: a question whose recorded last wave stopped is closed
        for t in writer.trajectories():
            seen.setdefault(str(t.question_id), []).append(t)
        work.todo = [(q, ids) for q, ids in work.todo if not is_closed(seen.get(str(q.id), []), cfg.k)]

    # Nothing left to generate (a rerun that only finalizes a shard): no engine, no index.
    own_engine = engine is None and bool(work.todo)
    if own_engine:  # before the index: vLLM must start before bm25s/numba are imported
        engine = start_engine(cfg)
    try:
        if toolbox is None and work.todo:
            toolbox = _toolbox(cfg, setting)
        totals = _Totals.resume(writer.checkpoint, t_start)
        generated_now, stats = 0, Counter()
        if work.todo:
            generated_now, stats, stopped = _generate(cfg, out, writer, engine, toolbox, work, totals, stop, progress,
                                                      stop_hook, seen)
            if stopped:
                return _stopped_report(out, writer, generated_now, resumed)
        return _finalize(cfg, out, writer, engine, work, totals.checkpoint(stats), generated_now, resumed)
    finally:
        if own_engine:
            engine.close()


def _plan_work(cfg: RolloutConfig, questions: list[Any], done: dict[str, set[int]]) -> _Work:
    """The split's questions (in `order`) after `offset` and `limit`, and the sample ids the shard does not
    hold yet."""
    positions = {str(q.id): i for i, q in enumerate(questions)}
    if cfg.order == "mixed":
        from trace_selector.search.setting import mixed_order

        questions = mixed_order(questions)
    questions = questions[cfg.offset:]
    questions = questions[: cfg.limit] if cfg.limit else questions
    order = [str(q.id) for q in questions]
    todo = [(q, [s for s in range(cfg.k) if s not in done.get(str(q.id), set())]) for q in questions]
    return _Work(order, [(q, ids) for q, ids in todo if ids], {qid: positions[qid] for qid in order})


def start_engine(cfg: RolloutConfig) -> Any:
    """The engine the config names; an in-process vLLM gets the agent's context length and the run's seed."""
    from trace_selector.engines import make_engine

    options = dict(cfg.engine_options)
    if cfg.engine.startswith("vllm"):
        options.setdefault("max_model_len", cfg.agent.max_context)
        options.setdefault("seed", cfg.seed)
    return make_engine(cfg.engine, model=cfg.model, **options)


def _generate(cfg: RolloutConfig, out: Path, writer: Any, engine: Any, toolbox: Any, work: _Work, totals: _Totals,
              stop: Path | None, progress: bool, stop_hook: StopHook | None = None,
              seen: dict[str, list[Trajectory]] | None = None) -> tuple[int, Counter, bool]:
    """Run the strategy chunk by chunk over `work.todo`, appending every finished question group to the
    shard and writing snapshots (every `snapshot_minutes`, or at the stop file). Returns the trajectories
    generated, the strategy's stats and whether the stop file ended the run. With `stop_hook`, waves
    instead (`_generate_waves`)."""
    from tqdm import tqdm

    from trace_selector.rollout.strategies import STRATEGIES
    from trace_selector.rollout.strategies.context import StrategyContext

    agent = Agent(engine, toolbox, cfg.agent, totals.accounting)
    ctx = StrategyContext(agent, cfg.k, seed=cfg.seed, options=cfg.strategy_options(), positions=work.positions)
    run = STRATEGIES[cfg.strategy]
    # Trajectories arrive a chunk at a time, minutes apart: tqdm's default moving average then swings
    # between bursts and pauses (a 9 s/traj run showed 21 s/traj and an ETA twice too long), while the
    # mean rate since the start is a steady estimate.
    # The bar counts the pool, not this run: a resumed run starts at what the shard holds (tqdm's rate
    # leaves `initial` out, so s/traj stays this run's).
    resumed = len(writer.rows)
    bar = tqdm(initial=resumed, total=resumed + sum(len(ids) for _, ids in work.todo), unit="traj",
               disable=not progress, desc=f"rollout {cfg.strategy}", dynamic_ncols=True, smoothing=0)

    def on_batch(results: list[Any]) -> None:
        secs = time.perf_counter() - totals.t_start
        bar.set_postfix(tok_s=f"{totals.accounting.engine.generated_tokens / max(secs, 1e-9):.1f}",
                        cached=totals.accounting.engine.cached_tokens, refresh=False)
        bar.refresh()

    ctx.on_batch = on_batch
    engine_info = engine.info() if hasattr(engine, "info") else {}
    engine_info.pop("stats", None)
    kind = "browsing" if toolbox.kind == "browsing" else "webqa"
    last_snapshot = time.perf_counter()
    generated_now, stopped = 0, False
    if stop_hook is not None:
        generated_now, stopped = _generate_waves(cfg, out, writer, ctx, work, totals, stop, stop_hook, seen or {},
                                                 engine_info, kind, bar)
        bar.close()
        agent.close()
        return generated_now, ctx.stats, stopped
    for lo in range(0, len(work.todo), cfg.chunk_questions):
        chunk = work.todo[lo: lo + cfg.chunk_questions]
        for group in run(ctx, [q for q, _ in chunk], [ids for _, ids in chunk]):
            trajectories = [r.to_trajectory(kind) for r in sorted(group, key=lambda r: r.sample_id)]
            writer.append_group(trajectories, totals.checkpoint(ctx.stats, engine_info))
            generated_now += len(trajectories)
            bar.update(len(trajectories))
        more = lo + cfg.chunk_questions < len(work.todo)
        stopped = more and stop is not None and stop.exists()
        if stopped or more and cfg.snapshot_minutes is not None and \
                time.perf_counter() - last_snapshot >= 60 * cfg.snapshot_minutes:
            _snapshot(cfg, out, writer, work, engine_info)
            last_snapshot = time.perf_counter()
        if stopped:
            break
    bar.close()
    agent.close()
    return generated_now, ctx.stats, stopped


def _snapshot(cfg: RolloutConfig, out: Path, writer: Any, work: _Work, engine_info: dict[str, Any]) -> None:
    """Write the pool of every finished trajectory so far (and the resolved config); the shard stays."""
    from trace_selector.config import dump_config

    done_now = writer.trajectories()
    writer.snapshot(work.order, _pool_meta(cfg, writer.checkpoint, done_now, engine_info,
                                           writer.dropped, snapshot=True), done_now)
    dump_config(cfg, out.with_name(out.name + ".config.yaml"))


def _generate_waves(cfg: RolloutConfig, out: Path, writer: Any, ctx: Any, work: _Work, totals: _Totals,
                    stop: Path | None, hook: StopHook, seen: dict[str, list[Trajectory]],
                    engine_info: dict[str, Any], kind: str, bar: Any) -> tuple[int, bool]:
    """Adaptive sampling (`waves.WaveScheduler`): every decided wave is appended to the shard at once,
    snapshots as in `_generate` (checked after each wave); at the stop file no new wave starts, the
    ones in flight finish, and a snapshot is written. Returns the trajectories generated and whether
    the stop file ended the run."""
    generated = 0
    last_snapshot = time.perf_counter()

    def on_wave(trajectories: list[Trajectory]) -> None:
        nonlocal generated, last_snapshot
        writer.append_group(trajectories, totals.checkpoint(ctx.stats, engine_info))
        generated += len(trajectories)
        bar.update(len(trajectories))
        if cfg.snapshot_minutes is not None and time.perf_counter() - last_snapshot >= 60 * cfg.snapshot_minutes:
            _snapshot(cfg, out, writer, work, engine_info)
            last_snapshot = time.perf_counter()

    scheduler = WaveScheduler(ctx, work.todo, seen, hook, cfg.adaptive.wave, cfg.chunk_questions * cfg.k, on_wave,
                              stopping=lambda: stop is not None and stop.exists(), style=kind)
    scheduler.run()
    if scheduler.stopped:
        _snapshot(cfg, out, writer, work, engine_info)
    return generated, scheduler.stopped


def _finalize(cfg: RolloutConfig, out: Path, writer: Any, engine: Any, work: _Work, final: dict[str, Any],
              generated_now: int, resumed: int) -> RolloutReport:
    """Write the finished pool, its sidecar and its resolved config (atomically), and report."""
    from trace_selector.config import dump_config

    trajectories = writer.trajectories()
    # A finalize-only rerun has no engine: the engine that generated the shard describes the pool.
    info = engine.info() if hasattr(engine, "info") else dict(writer.checkpoint.get("engine", {}))
    info.pop("stats", None)
    meta = _pool_meta(cfg, final, trajectories, info, writer.dropped, snapshot=False)
    acct = meta.accounting
    writer.finalize(work.order, meta, trajectories)
    dump_config(cfg, out.with_name(out.name + ".config.yaml"))
    return RolloutReport(out, acct["questions"], len(trajectories), generated_now, resumed, acct,
                         adaptive=meta.extra.get("adaptive"))


def _stopped_report(out: Path, writer: Any, generated_now: int, resumed: int) -> RolloutReport:
    acct = dict(writer.checkpoint.get("accounting", {}))
    return RolloutReport(out, writer.questions(), len(writer.rows), generated_now, resumed, acct, stopped=True)


def _pool_meta(cfg: RolloutConfig, checkpoint: dict[str, Any], trajectories: list[Trajectory],
               info: dict[str, Any], dropped: int, snapshot: bool) -> PoolMeta:
    """The sidecar of a pool holding `trajectories`, with the cumulative `checkpoint` accounting."""
    from trace_selector.config import to_dict
    from trace_selector.rollout import prompts

    groups_by_q: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        groups_by_q.setdefault(str(t.question_id), []).append(t)
    acct = dict(checkpoint.get("accounting", {}))
    acct.update(wall_seconds=round(float(checkpoint.get("wall_seconds", 0.0)), 3), trajectories=len(trajectories),
                questions=len(groups_by_q), **diversity(list(groups_by_q.values())),
                **action_stats(trajectories))
    info = {k: v for k, v in info.items() if k != "stats"}
    adaptive = adaptive_meta(cfg.adaptive, groups_by_q, cfg.k)
    return PoolMeta(
        setting=cfg.setting, split=cfg.split, policy_model=str(info.get("model", cfg.model)),
        strategy=cfg.strategy,
        sampling={"temperature": cfg.agent.temperature, "top_p": cfg.agent.top_p,
                  "max_tokens": cfg.agent.max_tokens, "max_turns": cfg.agent.max_turns,
                  "top_k": cfg.agent.top_k, "structured": cfg.agent.structured, "think": cfg.agent.think,
                  "max_parallel": cfg.agent.max_parallel, "ask_confidence": cfg.agent.ask_confidence,
                  "prompt": cfg.agent.prompt, "top_logprobs": cfg.agent.top_logprobs},
        logprob_mode=info.get("logprobs_mode"), vllm_version=info.get("vllm_version"), seed=cfg.seed,
        accounting=acct,
        extra={"strategy_options": to_dict(cfg.strategy_options()) if cfg.strategy_options() else {},
               "strategy_stats": dict(checkpoint.get("stats", {})), "prompt_version": prompts.prompt_version(),
               "engine": info, "agent_kind": cfg.agent_kind, "offset": cfg.offset,
               "order": cfg.order,
               "per_trajectory_seeds_applied": bool(info.get("per_request_seeds", False)),
               "resume_dropped_lines": dropped, "snapshot": snapshot, **({"adaptive": adaptive} if adaptive else {})},
    )


def _extendable(out: Path, cfg: RolloutConfig) -> Any:
    """The finished pool at `out`, if this run may extend it: same setting, split, strategy, policy and
    agent; anything else would mix two experiments in one file, so it is refused."""
    from trace_selector.records import read_pool

    pool = read_pool(out)
    meta = pool.meta
    if meta is None:
        raise InputError(f"{out}: exists without a .meta.json sidecar; refusing to extend it "
                         f"(choose another --out or delete it)")
    want = {"setting": cfg.setting, "split": cfg.split, "strategy": cfg.strategy,
            "agent_kind": cfg.agent_kind}
    have = {"setting": meta.setting, "split": meta.split, "strategy": meta.strategy,
            "agent_kind": meta.extra.get("agent_kind", cfg.agent_kind)}
    want["offset"], have["offset"] = cfg.offset, meta.extra.get("offset", 0)
    # Pools written before prompt variants existed used the plain prompt.
    want["prompt"], have["prompt"] = cfg.agent.prompt, meta.sampling.get("prompt", "plain")
    model = meta.extra.get("engine", {}).get("model", meta.policy_model)
    if model is not None:
        want["model"], have["model"] = cfg.model, model
    for key in want:
        if str(want[key]) != str(have[key]):
            raise InputError(f"{out}: exists with {key}={have[key]!r}, this run has {key}={want[key]!r}; "
                             f"refusing to mix them in one pool (choose another --out or delete it)")
    return pool


def _checkpoint(base: dict[str, Any], acct: Accounting, stats: Counter, wall: float,
                engine_info: dict[str, Any] | None = None) -> dict[str, Any]:
    # Cumulative over resumed runs: totals of earlier runs (from the shard) plus this run's.
    now = acct.to_dict()
    total = {k: round(base.get(k, 0) + v, 6) if isinstance(v, float) else base.get(k, 0) + v
             for k, v in now.items()}
    out = {"accounting": total, "stats": dict(stats), "wall_seconds": wall}
    if engine_info:
        out["engine"] = engine_info
    return out


def load_rollout_config(path: str | Path | None, overrides: list[str] | None = None,
                        **flags: Any) -> RolloutConfig:
    """Defaults < YAML at `path` < explicit CLI `flags` (split, limit, k, model; None = not given) <
    ``key=value`` `overrides`."""
    from trace_selector.config import load_config

    given = [f"{name}={value}" for name, value in flags.items() if value is not None]
    return load_config(RolloutConfig, path, given + list(overrides or []))

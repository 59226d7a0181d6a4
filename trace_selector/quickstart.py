"""The main job: the whole path on the bundled default, in a few minutes on a 2-core machine.

    trace-selector quickstart                      # live rollout + selection + dev-pool evaluation
    trace-selector quickstart --live-questions 0   # evaluation of the shipped dev pool only

Stages, each timed and shown as one progress bar with an ETA (the last run's time; the rest of the
output goes to ``out_dir/quickstart.log`` unless ``--verbose``):

1. prepare the bundled setting (a check after `make setup`, which also assembles the policy model;
   without it, both happen here on first use);
2. a short live rollout with vLLM on the first test questions (the shipped rollout recipe, fewer
   questions and trajectories), so engine, agent, search and pool writer all run for real;
3. the shipped selectors (`trace`, the paper's configuration, and `trace_grounded`, ours) score those
   fresh trajectories (graph building, encoder, GNN + QFormer), printed next to majority vote and the
   gold answers;
4. the shipped dev pool is evaluated with the fast methods and both selectors: the results table with
   paired differences, a budget-curve PNG, results.json and per-question picks in `out_dir`.

Each output file is written atomically. The live pool is the exception to keeping earlier outputs: it
is deleted and drawn anew on every run, since exercising generation is its point.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_selector.errors import InputError

REPO_ROOT = Path(__file__).resolve().parents[1]
"""Source checkout the shipped pools and checkpoints live in (relative defaults resolve against it
when they are not found from the working directory)."""


@dataclass
class QuickstartConfig:
    """What the main job runs on; every path may be absolute or relative to the checkout."""

    setting: str = "wikileads"
    """Bundled search setting."""
    recipe: str = "rollout/wikileads-standard.yaml"
    """Rollout recipe of the live stage: the default policy setup (Qwen2.5-Coder-1.5B, standard), the
    one the shipped pools and selectors come from."""
    model: str | None = None
    """Policy model of the live stage (None: the recipe's)."""
    live_questions: int = 3
    """Test questions in the live rollout (0 skips stages 2 and 3)."""
    live_k: int = 4
    """Trajectories per question in the live rollout."""
    checkpoint: list[str] = field(default_factory=lambda: [
        "trace=checkpoints/wikileads", "trace_grounded=checkpoints/wikileads-grounded"])
    """Shipped selectors, each ``NAME=PATH`` (a row named NAME) or a bare PATH (named ``trace``); PATH is
    a Hub-format folder."""
    eval_pool: str = "data/pools/wikileads-dev.jsonl.gz"
    """Shipped pool evaluated in stage 4: the default policy's dev pool (200 dev-split questions x 16; the
    sealed test pool is for final numbers only and never run here)."""
    methods: list[str] = field(default_factory=lambda: [
        "single", "majority", "weighted_token", "grounded_vote", "fewest_tools", "most_tools", "trace"])
    """Methods of stage 4 (fast ones: no LLM calls; ``trace`` stands for every checkpoint)."""
    encoder_threads: int | None = None
    """CPU threads of the text encoder when the dev pool is encoded (None: every core; the rollout
    engine is gone by then, and a cold pool's encoding is most of stage 4)."""
    budget_subsets: int = 4
    """Random subsets per k in the budget curve (each is one selector pass over the pool)."""
    out_dir: str = "runs/quickstart"
    """Where the live pool, selections, results.json and the budget plot go."""

    def __post_init__(self) -> None:
        from trace_selector.evaluate import named_checkpoints

        if isinstance(self.methods, str):
            self.methods = [m.strip() for m in self.methods.split(",") if m.strip()]
        if isinstance(self.checkpoint, str):
            self.checkpoint = [self.checkpoint]
        if not named_checkpoints(self.checkpoint):
            raise ValueError("checkpoint: give at least one selector")
        if self.live_questions < 0 or self.live_k < 1:
            raise ValueError("live_questions must be >= 0 and live_k >= 1")


def locate(path: str, what: str) -> Path:
    """`path` as given if it exists, else relative to the source checkout; a clear error otherwise."""
    p = Path(path)
    for candidate in (p, REPO_ROOT / p):
        if candidate.exists():
            return candidate
    raise InputError(f"{path}: {what} not found (looked in {Path.cwd()} and {REPO_ROOT})")


STAGE_SECONDS = {"prepare the setting": 7.0, "live rollout (vLLM)": 120.0, "select on the live pool": 5.0,
                 "evaluate the dev pool": 30.0}
"""Expected stage times on 2 cores after `make setup` (the ETA of a first run; later runs use their
previous run's `timings.json`)."""


class _Stages:
    """Runs the job's stages: quiet (one bar per stage on the terminal, all other output in `log`) or
    verbose (every line shown, one timing line per stage)."""

    def __init__(self, names: list[str], out_dir: Path, quiet: bool):
        self.names = names
        self.quiet = quiet
        self.log = out_dir / "quickstart.log"
        self.timings: dict[str, float] = {}
        self.expected = dict(STAGE_SECONDS)
        try:
            self.expected.update(json.loads((out_dir / "timings.json").read_text()))
        except (OSError, ValueError):
            pass
        if quiet:
            self.log.write_text("")

    @contextmanager
    def __call__(self, name: str) -> Iterator[Any]:
        start = time.perf_counter()
        if not self.quiet:
            yield _Note()
            self.timings[name] = round(time.perf_counter() - start, 1)
            print(f"[quickstart] {name}: {self.timings[name]:.1f} s", flush=True)
            return
        from trace_selector.progress import Stage, output_to

        label = f"{self.names.index(name) + 1}/{len(self.names)}"
        try:
            with output_to(self.log) as term, Stage(name, self.expected.get(name, 30.0), term, label) as stage:
                yield stage
        except BaseException:
            print(f"[quickstart] {name} failed; its output is in {self.log}", file=sys.stderr, flush=True)
            raise
        self.timings[name] = round(stage.seconds, 1)


class _Note:
    """Where a verbose stage's note goes: nowhere (its lines are on screen already)."""

    note = ""


def live_rollout(cfg: QuickstartConfig, out: Path) -> Any:
    """Stage 2: a fresh pool of `live_questions` x `live_k` from the test split with a real engine;
    returns the rollout's report."""
    from trace_selector.rollout.runner import load_rollout_config, run_rollout
    from trace_selector.rollout.writer import shard_path

    rollout_cfg = load_rollout_config(locate(cfg.recipe, "rollout recipe"), [f"setting={cfg.setting}"],
                                      split="test", limit=cfg.live_questions, k=cfg.live_k, model=cfg.model)
    # A new draw each run (the point is to exercise generation), so an older live pool is not resumed.
    for stale in (out, shard_path(out)):
        stale.unlink(missing_ok=True)
    report = run_rollout(rollout_cfg, out, progress=True)
    print(report.to_text())
    return report


def live_picks(selectors: dict[str, Any], pool_path: Path, out_dir: Path) -> list[dict[str, Any]]:
    """Stage 3: each selector's pick and majority vote side by side for each live question (the picks
    of selector NAME go to ``out_dir/live-NAME.jsonl``); one row per question."""
    from trace_selector.baselines.registry import build_fast
    from trace_selector.evaluate import score_pick
    from trace_selector.records import read_pool
    from trace_selector.selector import write_selections

    pool = read_pool(pool_path)
    picks = {"majority": build_fast("majority").select(pool.groups)}
    for name, selector in selectors.items():
        picks[name] = selector.select(pool)
        write_selections(picks[name], out_dir / f"live-{name}.jsonl")
    rows = []
    for i, group in enumerate(pool.groups):
        row: dict[str, Any] = {"question": group.question,
                               "gold": group.golden_answers[0] if group.golden_answers else "",
                               "answers": [t.answer for t in group.trajectories]}
        for name, chosen in picks.items():
            # scored as `evaluate` scores every method (exact match, else the pool's stored correctness)
            row[name] = chosen[i].answer
            row[f"{name}_ok"] = score_pick(group, chosen[i])[0]
        rows.append(row)
    return rows


def live_table(rows: list[dict[str, Any]], names: list[str]) -> str:
    """Markdown table of `live_picks` rows: question, gold, the K answers, then each method's pick."""
    mark = {1.0: "ok", 0.0: "x"}
    lines = ["| question | gold | K answers | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    for r in rows:
        cells = " | ".join(f"{r[name] or '-'} ({mark[r[f'{name}_ok']]})" for name in names)
        lines.append(f"| {r['question'][:60]} | {r['gold']} | {' / '.join(a or '-' for a in r['answers'])} | {cells} |")
    return "\n".join(lines)


def compare_live(selectors: dict[str, Any], pool_path: Path, out_dir: Path) -> list[dict[str, Any]]:
    """`live_picks`, with their table printed."""
    rows = live_picks(selectors, pool_path, out_dir)
    print("\n" + live_table(rows, ["majority", *selectors]))
    return rows


def quickstart(cfg: QuickstartConfig, quiet: bool = False) -> dict[str, Any]:
    """Run the main job; returns the stage timings and the evaluation results.

    With `quiet`, each stage shows one progress bar with an ETA on the terminal and everything it
    prints (vLLM, transformers, the rollout's own bar) goes to ``out_dir/quickstart.log``; the
    tables are printed between the stages."""
    from trace_selector import paths
    from trace_selector.evaluate import EvalConfig, evaluate, format_table, named_checkpoints

    t0 = time.perf_counter()
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoints = {name: str(locate(path, "selector checkpoint"))
                   for name, path in named_checkpoints(cfg.checkpoint).items()}
    eval_pool = locate(cfg.eval_pool, "evaluation pool")
    names = (["prepare the setting", "live rollout (vLLM)", "select on the live pool"] if cfg.live_questions else [])
    stage = _Stages([*names, "evaluate the dev pool"], out_dir, quiet)

    if cfg.live_questions:
        from trace_selector.search import setting

        with stage("prepare the setting"):
            print(setting.prepare(cfg.setting), flush=True)
        live = out_dir / "live.jsonl.gz"
        with stage("live rollout (vLLM)") as s:
            report = live_rollout(cfg, live)
            s.note = f"{report.trajectories} trajectories, {report.accounting.get('generated_tokens', 0)} tokens"
        from trace_selector.selector import Selector

        with stage("select on the live pool"):
            selectors = {name: Selector.from_pretrained(path, cache_dir=paths.embeddings_dir())
                         for name, path in checkpoints.items()}
            rows = live_picks(selectors, live, out_dir)
        print("\n" + live_table(rows, ["majority", *selectors]) + "\n", flush=True)

    with stage("evaluate the dev pool"):
        # One torch thread: the graphs are small, and OpenMP threads contending for 2 cores were 10x slower.
        results = evaluate(EvalConfig(pool=str(eval_pool), methods=list(cfg.methods),
                                      checkpoint=[f"{name}={path}" for name, path in checkpoints.items()],
                                      out=str(out_dir / "results.json"), plot=str(out_dir / "budget.png"),
                                      per_question=str(out_dir / "per_question.jsonl"),
                                      budget_subsets=cfg.budget_subsets, threads=1,
                                      encoder_threads=cfg.encoder_threads or os.cpu_count() or 1))
    print()
    print(format_table(results))
    timings = {**stage.timings, "total": round(time.perf_counter() - t0, 1)}
    from trace_selector.atomic import atomic_write

    with atomic_write(out_dir / "timings.json") as fh:
        json.dump(timings, fh, indent=1)
    print(f"\n[quickstart] done in {timings['total']:.1f} s; results.json, budget.png and per_question.jsonl "
          f"in {out_dir}/" + (f" (log: {stage.log.name})" if quiet else ""))
    return {"timings": timings, "results": results}

"""Rollout strategies side by side on the same dev questions, one engine per policy model.

Three comparisons (each a table):
1. policy models: valid-action rate (turns with a parsable action), answered rate, EM and tokens/s of
   `standard` rollouts, with and without the structured-output grammar; picks the default model;
2. partial (ParallelMuse) vs standard at equal budget N = k: tokens computed by the model (uncached
   prompt + generated) vs served from the prefix cache, LLM calls, wall time, EM, pass@k;
3. divinit vs standard: turn-1 query pairwise diversity (QPD), ATD, document overlap, pass@k, LLM calls.
The prefix cache is reset between runs so no run profits from another's prompts.

Add ``--agent-kind browsing`` for the browsing agent (search / open / find, longer trajectories), where
partial rollout has more prefix to share. ``--recipe`` starts every run from a rollout recipe (the
multi-hop setting's prompt, turns and engine options) instead of the defaults; partial rollout runs
with ParallelMuse's settings (the `PartialConfig` defaults: M=1, k=2, b=3 at N=8, step 0 may branch)
unless ``partial.*`` overrides say otherwise.

Run (2 cores: about 10-20 minutes for 10 questions with both models):
    VLLM_CPU_OMP_THREADS_BIND=0-1 VLLM_CPU_NUM_OF_RESERVED_CPU=0 VLLM_CPU_KVCACHE_SPACE=2 HF_HUB_OFFLINE=1 \\
    python benchmarks/rollout_strategies.py --setting wikileads --limit 10 --k 4 \\
        --models smollm2-135m,qwen2.5-coder-0.5b --json benchmarks/rollout_strategies.json

    # partial rollout against standard at N = 8 on 40 multi-hop dev questions no pool uses: positions
    # 350-389 of the mixed order (the dev pools take its first 350; in split order 350-389 would be
    # comparison questions that they use)
    python benchmarks/rollout_strategies.py --recipe rollout/wikihops-standard.yaml --setting wikihops \
        --offset 350 --limit 40 --k 8 --models qwen2.5-coder-1.5b --parts partial \
        --json benchmarks/rollout_strategies-wikihops.json --pools runs/partial-pools order=mixed

    # then pass@N and every selection method paired by question (evaluate --per-question on both pools,
    # then experiments/strategy_comparison.py); experiments/ship_wikihops.sh dev does this
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

from trace_selector.records import read_meta, read_pool
from trace_selector.records.answers import exact_match, pass_at_k
from trace_selector.rollout.runner import RolloutConfig, load_rollout_config, run_rollout, start_engine


def _reset_cache(engine) -> None:
    llm = getattr(engine, "llm", None)
    if llm is not None and hasattr(llm, "reset_prefix_cache"):
        llm.reset_prefix_cache()


def run_one(engine, toolbox, questions, cfg: RolloutConfig, workdir: Path, name: str) -> dict:
    """One rollout into a fresh pool; returns its accounting plus answer metrics."""
    _reset_cache(engine)
    out = workdir / f"{name}.jsonl.gz"
    t0 = time.perf_counter()
    run_rollout(cfg, out, engine=engine, toolbox=toolbox, questions=questions, progress=False)
    wall = time.perf_counter() - t0
    pool = read_pool(out)
    acct = dict(read_meta(out).accounting)
    em, passk = [], []
    for g in pool.groups:
        hits = [exact_match(t.answer, g.golden_answers) for t in g.trajectories]
        em.extend(hits)
        passk.append(pass_at_k(len(hits), int(sum(hits)), len(hits)))
    acct.update(wall=round(wall, 1), em=round(sum(em) / len(em), 3), pass_at_k=round(sum(passk) / len(passk), 3),
                tok_s=round(acct["generated_tokens"] / max(acct["generate_seconds"], 1e-9), 1))
    return acct


def table(title: str, rows: dict[str, dict], keys: list[str]) -> str:
    width = max(len(k) for k in keys) + 2
    names = list(rows)
    col = max(14, *(len(n) + 2 for n in names))
    lines = [title, " " * width + "".join(f"{n:>{col}}" for n in names)]
    for k in keys:
        cells = "".join(f"{str(rows[n].get(k)):>{col}}" for n in names)
        lines.append(f"{k:<{width}}{cells}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setting", default="wikileads")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--offset", type=int, default=0, help="skip the split's first N questions (ones other pools use)")
    ap.add_argument("--recipe", type=Path, default=None, help="rollout YAML every run starts from (default: the defaults)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    ap.add_argument("--k-models", type=int, default=2, help="samples per question in the model comparison")
    ap.add_argument("--regions", default="exploration", help="partial-rollout regions to run (comma-separated)")
    ap.add_argument("--strategy-model", default=None, help="model for tables 2-3 (default: best valid-action rate)")
    ap.add_argument("--parts", default="models,partial,divinit")
    ap.add_argument("--max-context", type=int, default=None, help="agent.max_context (default: the recipe's, else 2048)")
    ap.add_argument("--agent-kind", default="webqa", choices=["webqa", "browsing"],
                    help="browsing: the search/open/find agent (up to agent.max_turns tool turns), where trajectories are long")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--pools", type=Path, default=None,
                    help="folder for the runs' pools, kept for paired per-question analysis (default: a temporary "
                         "folder); a folder that already holds pools is refused, since the runs would resume them")
    ap.add_argument("overrides", nargs="*", help="key=value RolloutConfig overrides for every run")
    a = ap.parse_args()
    from trace_selector import shutdown

    # A `timeout` or `kill` unwinds through the `finally` below, so vLLM's engine-core process goes too.
    shutdown.install()

    parts = set(a.parts.split(","))
    models = a.models.split(",")
    results: dict[str, dict] = {}
    if a.pools is not None and a.pools.exists() and any(a.pools.glob("*.jsonl*")):
        ap.error(f"--pools {a.pools}: already holds pools; give an empty or new folder")
    work = a.pools or Path(tempfile.mkdtemp(prefix="rollout_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    if a.max_context is None and a.recipe is None:
        a.max_context = 2048
    context = [] if a.max_context is None else [f"agent.max_context={a.max_context}"]
    a.overrides = [f"agent_kind={a.agent_kind}", *context, f"offset={a.offset}", *a.overrides]

    def config(*extra: str, **flags):
        """The recipe (or the defaults) < this run's flags < the command's overrides < `extra`."""
        return load_rollout_config(a.recipe, [*a.overrides, *extra], setting=a.setting, split=a.split,
                                   limit=a.limit, **flags)

    base = config(k=a.k)
    strategy_model = a.strategy_model
    toolbox = questions = None
    for model in models:
        needed = "models" in parts or model == (strategy_model or models[-1])
        if not needed:
            continue
        t0 = time.perf_counter()
        # The runner's own engine (the recipe's engine options, its context length, seed 0).
        engine = start_engine(dataclasses.replace(base, model=model, seed=0))
        start = round(time.perf_counter() - t0, 1)
        if toolbox is None:  # after the first engine: bm25s/numba must load after vLLM
            from trace_selector.search.setting import load_setting

            setting = load_setting(a.setting)
            if a.agent_kind == "browsing":
                from trace_selector.rollout.browser_agent import BrowserTools

                toolbox = BrowserTools(setting.page_store())
            else:
                from trace_selector.rollout.tools import SearchTools

                toolbox = SearchTools(setting.index(), base.agent.top_k, base.agent.doc_chars)
            questions = setting.questions(a.split)  # every run's offset and limit choose from these
        try:
            if "models" in parts:
                for structured in (True, False):
                    cfg = config(f"agent.structured={structured}", k=a.k_models, model=model)
                    key = f"{model}{'' if structured else ' (free)'}"
                    results.setdefault("models", {})[key] = run_one(engine, toolbox, questions, cfg, work, f"m-{model}-{structured}")
                    results["models"][key]["engine_start_s"] = start
            if strategy_model is None and "models" in parts and model == models[-1]:
                rates = {m: results["models"][m]["valid_action_rate"] or 0 for m in models if m in results["models"]}
                strategy_model = max(rates, key=rates.get)
            if model != (strategy_model or models[-1]):
                continue
            if "partial" in parts:
                rows = results.setdefault("partial_vs_standard", {})
                std = config("strategy=standard", k=a.k, model=model)
                rows["standard"] = run_one(engine, toolbox, questions, std, work, "standard")
                for region in a.regions.split(","):
                    par = config("strategy=partial", f"partial.region={region}", k=a.k, model=model)
                    rows[f"partial/{region}"] = run_one(engine, toolbox, questions, par, work, f"partial-{region}")
                    rows[f"partial/{region}"]["partial"] = dataclasses.asdict(par.partial)
            if "divinit" in parts:
                rows = results.setdefault("divinit_vs_standard", {})
                if "partial_vs_standard" in results:
                    rows["standard"] = results["partial_vs_standard"]["standard"]
                else:
                    std = config("strategy=standard", k=a.k, model=model)
                    rows["standard"] = run_one(engine, toolbox, questions, std, work, "standard")
                div = config("strategy=divinit", k=a.k, model=model)
                rows["divinit"] = run_one(engine, toolbox, questions, div, work, "divinit")
        finally:
            engine.close()
    # Without a model comparison the strategies ran on the last (or only) model given.
    strategy_model = strategy_model or models[-1]

    out = []
    if "models" in results:
        out.append(table(f"1. policy models, standard k={a.k_models}, {a.limit} {a.split} questions", results["models"],
                         ["valid_action_rate", "turns", "invalid_turns", "answered", "em", "pass_at_k",
                          "generated_tokens", "tok_s", "wall", "engine_start_s"]))
        out.append(f"default policy model by valid-action rate: {strategy_model}")
    if "partial_vs_standard" in results:
        out.append(table(f"2. partial vs standard, N=k={a.k}, model {strategy_model}", results["partial_vs_standard"],
                         ["computed_tokens", "generated_tokens", "prompt_tokens", "cached_tokens", "llm_calls",
                          "wall", "em", "pass_at_k", "valid_action_rate"]))
        std = results["partial_vs_standard"]["standard"]["computed_tokens"]
        for name, row in results["partial_vs_standard"].items():
            if name != "standard":
                out.append(f"{name}: {100 * (1 - row['computed_tokens'] / std):.1f}% fewer computed tokens than standard")
    if "divinit_vs_standard" in results:
        out.append(table(f"3. divinit vs standard, k={a.k}, model {strategy_model}", results["divinit_vs_standard"],
                         ["qpd_turn1", "atd", "doc_overlap", "pass_at_k", "em", "llm_calls", "computed_tokens", "wall"]))
    print("\n\n".join(out))
    if a.json:
        a.json.write_text(json.dumps({"args": vars(a) | {"json": str(a.json)}, "default_model": strategy_model,
                                      "results": results}, indent=2, default=str))


if __name__ == "__main__":
    main()

"""Online adaptive rollout against a fixed-K rollout of the same questions, side by side: wall time,
generated tokens, EM and trajectories per question (issue 34's online target: 40 dev questions, K=16).

    # settings chosen on the dev pool first: experiments/adaptive_selection.py prints, for
    # trace_grounded_adaptive, its temperature and the threshold / first wave reaching its own fixed-K EM
    .venv/bin/python experiments/adaptive_rollout.py --checkpoint checkpoints/wikileads-grounded \\
        --threshold <t> --temperature <T> --min-waves <first wave> --limit 40 --k 16 \\
        --out-dir runs/adaptive-rollout agent.continuous=true

    # smoke check (tiny model, one question)
    .venv/bin/python experiments/adaptive_rollout.py --checkpoint checkpoints/wikileads-grounded \\
        --model smollm2-135m --limit 1 --k 4 --out-dir /tmp/adaptive-smoke

Both rollouts use the recipe (`--config`, default the default policy's) and one engine, built once and
warmed up on a throwaway question; its prefix cache is emptied before each run, so neither reuses the
other's prompts. The fixed run goes
first and writes `<out-dir>/fixed.jsonl.gz`, the adaptive one `<out-dir>/adaptive.jsonl.gz`: the same
questions, seeds and sampling, the second stopping each question once the selector is sure
(trace_selector/adaptive_rollout.py). Both are ordinary resumable pools: rerunning the command after a
kill continues them (wall times then add up over the runs). Where per-request seeds apply (GPU) the
adaptive run's trajectories are the first ones of the fixed run, so EM differs only by where it stopped.

Rows: the fixed pool with majority vote and the selector over all K; the adaptive pool with the
selector's pick at each question's stopping wave (and majority vote over what it sampled); and, as a
check, the offline replay of the same rule on the fixed pool (`evaluate`'s ``trace_adaptive`` row),
which on GPU stops where the online run did. Wall time and generated tokens come from each pool's
sidecar accounting (the adaptive run's include the selector's time). Results: `<out-dir>/comparison.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "rollout/wikileads-standard.yaml"


def empty_prefix_cache(engine: Any) -> None:
    """Forget cached prompts (in-process vLLM), so the second run starts as cold as the first."""
    reset = getattr(getattr(engine, "llm", None), "reset_prefix_cache", None)
    if reset is not None:
        reset()


def warm_up(cfg: Any, engine: Any, folder: Path) -> None:
    """Two trajectories of one question, thrown away: an engine's first requests pay one-off costs (the
    structured-output grammar's compilation, first kernels) that would otherwise land on the first run
    (a one-question smoke run on 2 CPU cores: 36 s fixed against 8 s adaptive without this)."""
    import dataclasses
    import tempfile

    from trace_selector.rollout.runner import run_rollout

    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        run_rollout(dataclasses.replace(cfg, limit=1, k=2, snapshot_minutes=None), Path(tmp) / "warmup.jsonl",
                    engine=engine, progress=False)


def scores(pool: Any, checkpoint: str, threshold: float, temperature: float, wave: int, min_waves: int) -> dict[str, Any]:
    """EM (percent) of majority vote, the selector, and the selector's offline adaptive replay on `pool`."""
    from trace_selector.adaptive import AdaptiveConfig, build_adaptive, usage
    from trace_selector.baselines.voting import Majority
    from trace_selector.evaluate import TraceMethod, em_of

    groups = pool.groups
    trace = TraceMethod(checkpoint, pool)
    row = "trace_adaptive"
    adaptive = build_adaptive(row, AdaptiveConfig(wave=wave, min_waves=min_waves, thresholds={row: threshold},
                                                  temperature={row: temperature}), trace)
    out: dict[str, Any] = {}
    for name, method in (("majority", Majority()), ("selector", trace), ("selector_offline_adaptive", adaptive)):
        picks = method.select(groups)
        used = [usage(g, p)[0] for g, p in zip(groups, picks)]
        out[name] = {"em": round(100.0 * sum(em_of(g, p) for g, p in zip(groups, picks)) / max(1, len(groups)), 2),
                     "mean_trajectories": round(sum(used) / max(1, len(used)), 3)}
    return out


def summary(path: Path) -> dict[str, Any]:
    from trace_selector.records import read_meta, read_pool

    pool, meta = read_pool(path), read_meta(path)
    acct = meta.accounting
    n = max(1, len(pool.groups))
    return {"pool": str(path), "questions": len(pool.groups),
            "mean_trajectories": round(sum(len(g.trajectories) for g in pool.groups) / n, 3),
            "generated_tokens": acct.get("generated_tokens"), "wall_seconds": acct.get("wall_seconds"),
            "stopped": meta.extra.get("adaptive", {}).get("stopped")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="selector folder that decides when a question is done")
    p.add_argument("--threshold", type=float, default=None, help="stop at this confidence (default: the rollout default)")
    p.add_argument("--temperature", type=float, default=None, help="confidence temperature (default: the checkpoint's "
                                                                      "calibration.json, else 1)")
    p.add_argument("--wave", type=int, default=2, help="trajectories per wave")
    p.add_argument("--min-waves", type=int, default=2, help="first wave allowed to stop")
    p.add_argument("--config", type=Path, default=RECIPE, help="rollout recipe of both runs")
    p.add_argument("--split", default="dev")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--limit", type=int, default=40, help="questions")
    p.add_argument("--k", type=int, default=16, help="trajectories per question (the fixed run's, the adaptive cap)")
    p.add_argument("--model", default=None, help="policy model (default: the recipe's)")
    p.add_argument("--out-dir", type=Path, default=ROOT / "runs/adaptive-rollout")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="rollout config overrides for both runs")
    a = p.parse_args(argv)

    from trace_selector.adaptive_rollout import resolve_temperature, run_adaptive_rollout
    from trace_selector.errors import InputError
    from trace_selector.rollout import runner
    from trace_selector.rollout.runner import load_rollout_config, run_rollout

    adaptive = [f"adaptive.checkpoint={a.checkpoint}", f"adaptive.wave={a.wave}", f"adaptive.min_waves={a.min_waves}"]
    adaptive += [f"adaptive.threshold={a.threshold}"] if a.threshold is not None else []
    adaptive += [f"adaptive.temperature={a.temperature}"] if a.temperature is not None else []
    try:
        flags = dict(split=a.split, offset=a.offset, limit=a.limit, k=a.k, model=a.model)
        fixed_cfg = load_rollout_config(a.config, a.overrides, **flags)
        adaptive_cfg = load_rollout_config(a.config, a.overrides + adaptive, **flags)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    a.out_dir.mkdir(parents=True, exist_ok=True)
    fixed_out, adaptive_out = a.out_dir / "fixed.jsonl.gz", a.out_dir / "adaptive.jsonl.gz"

    engine = runner.start_engine(fixed_cfg)  # the engine both runs share, as `trace-selector rollout` builds it
    try:
        warm_up(fixed_cfg, engine, a.out_dir)
        empty_prefix_cache(engine)
        print(run_rollout(fixed_cfg, fixed_out, engine=engine).to_text(), file=sys.stderr)
        empty_prefix_cache(engine)
        report, hook, source = run_adaptive_rollout(adaptive_cfg, adaptive_out, engine=engine)
        print(report.to_text() + f"\nadaptive: {hook.describe()}; temperature from {source}", file=sys.stderr)
    finally:
        engine.close()

    from trace_selector.records import read_pool

    t0 = time.perf_counter()
    temperature = resolve_temperature(adaptive_cfg.adaptive)[0]
    settings = (a.checkpoint, adaptive_cfg.adaptive.threshold, temperature, a.wave, a.min_waves)
    rows = {"fixed": {**summary(fixed_out), **scores(read_pool(fixed_out), *settings)},
            "adaptive": {**summary(adaptive_out), **scores(read_pool(adaptive_out), *settings)}}
    print(f"scored both pools in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    print(f"| run | questions | trajectories / question | generated tokens | wall s | EM majority | EM selector |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        label = f"fixed K={a.k}" if name == "fixed" else f"adaptive (t={settings[1]:g}, T={temperature:g})"
        print(f"| {label} | {r['questions']} | {r['mean_trajectories']:.2f} | {r['generated_tokens']} | "
              f"{r['wall_seconds']:.1f} | {r['majority']['em']:.1f} | {r['selector']['em']:.1f} |")
    replay = rows["fixed"]["selector_offline_adaptive"]
    print(f"\noffline replay of the same rule on the fixed pool: EM {replay['em']:.1f} with "
          f"{replay['mean_trajectories']:.2f} trajectories per question (online: {rows['adaptive']['selector']['em']:.1f} "
          f"with {rows['adaptive']['mean_trajectories']:.2f})")
    results = {"settings": {"checkpoint": a.checkpoint, "threshold": settings[1], "temperature": temperature,
                            "wave": a.wave, "min_waves": a.min_waves, "k": a.k, "split": a.split, "offset": a.offset,
                            "limit": a.limit, "model": fixed_cfg.model, "overrides": a.overrides},
               "selector_seconds": round(hook.seconds, 2), **rows}
    (a.out_dir / "comparison.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

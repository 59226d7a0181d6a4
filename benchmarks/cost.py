"""Cost as the work grows: seconds and peak memory of `evaluate` and `train` on synthetic pools of 1x,
10x and 100x the shipped dev pool's trajectories (200 questions x 16 = 3,200) at K = 8, 16 and 64,
printed per 1,000 trajectories, so a user planning a 100k-question pool can read off what it costs.

    .venv/bin/python benchmarks/cost.py                                   # 1x, 10x, 100x (if it fits)
    .venv/bin/python benchmarks/cost.py --scales 1 --ks 16 --train-steps 5    # one quick cell
    .venv/bin/python benchmarks/cost.py --json benchmarks/cost.json       # also keep the table

What each cell measures, each in a fresh process (peak memory is that process's maximum RSS):

- `evaluate`: `trace_selector.evaluate.evaluate` with the non-LLM methods and the shipped selector
  `checkpoints/wikileads-grounded` (its weights and graph options), fixed-K table only (the budget
  curve reruns every method once per subset and size: multiply by sizes x `budget_subsets`). The
  selector's text encoder is swapped for the whole-text hash encoder of the same width, so the cell
  times reading, graphs, scoring and the baselines; cold encoding with the real encoder is measured
  once on a sample (texts/s) and added per 1,000 trajectories from the pool's distinct texts.
- `train`: `trace_selector.train.train` with the `trace_grounded` recipe (training/wikileads-grounded.yaml)
  on the same pool: building the graphs of every question (hash encoder), then `--train-steps` steps
  and the one validation pass over the held-out tenth of the questions that ends such a short run.

A cell's size is 100x only when the 10x cells project it under `--max-minutes` in all (they grow
linearly); otherwise the 100x row says how long it would take.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEV_TRAJECTORIES = 200 * 16
"""Trajectories of the shipped dev pool (data/pools/wikileads-dev.jsonl.gz): the 1x size."""
CHECKPOINT = ROOT / "checkpoints" / "wikileads-grounded"
RECIPE = ROOT / "training" / "wikileads-grounded.yaml"
METHODS = ["single", "majority", "weighted_token", "grounded_vote", "fewest_tools", "most_tools", "trace_grounded"]


def _rss_mib() -> float:
    """Resident memory of this process now (MiB)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def hashed_checkpoint(dest: Path) -> Path:
    """The shipped selector with the hash encoder of its width in its config (weights unchanged)."""
    shutil.copytree(CHECKPOINT, dest)
    config = json.loads((dest / "config.json").read_text())
    config["encoder"] = "hash"
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    return dest


def cell_evaluate(pool: str, checkpoint: str, threads: int) -> dict:
    import torch
    import torch_geometric.data  # noqa: F401  (imported lazily below; loaded first so `base` holds it)

    import trace_selector.graph.collate  # noqa: F401
    import trace_selector.selector  # noqa: F401
    from trace_selector.evaluate import EvalConfig, evaluate

    torch.set_num_threads(threads)
    base = _rss_mib()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        results = evaluate(EvalConfig(pool=pool, methods=METHODS, checkpoint=[f"trace_grounded={checkpoint}"],
                                      out=f"{tmp}/results.json", budget=False, threads=threads))
    seconds = time.perf_counter() - t0
    selector = results["methods"]["trace_grounded"]
    return {"seconds": seconds, "selector_seconds": selector["seconds"] + selector.get("load_seconds", 0.0),
            "peak_mib": _peak_mib(), "base_mib": base}


def cell_train(pool: str, steps: int, threads: int) -> dict:
    import torch_geometric.loader  # noqa: F401  (imported lazily below; loaded first so `base` holds it)

    import trace_selector.graph.dataset  # noqa: F401
    from trace_selector.config import load_config
    from trace_selector.train import PoolDataModule, TrainConfig, train

    base = _rss_mib()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(TrainConfig, RECIPE, [
            f"data.train_pool={pool}", "data.val_pool=null", "data.val_fraction=0.1", "data.min_val_questions=0",
            "model.encoder=hash", f"optim.max_steps={steps}", "optim.epochs=1000", "optim.early_stopping=0",
            f"out_dir={tmp}", "name=cost", "trainer.progress_bar=false", f"trainer.threads={threads}",
            "trainer.accelerator=cpu"])
        t0 = time.perf_counter()
        dm = PoolDataModule(cfg)
        dm.setup("fit")
        graphs_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        result = train(cfg, datamodule=dm)
        steps_s = time.perf_counter() - t1
    return {"seconds": graphs_s + steps_s, "graphs_seconds": graphs_s, "steps_seconds": steps_s,
            "steps": result.global_step, "peak_mib": _peak_mib(), "base_mib": base}


def encode_rate(pool: str, sample: int, threads: int) -> dict:
    """Cold texts/s of the shipped selector's own encoder on `sample` distinct texts of `pool`, and the
    pool's distinct texts per 1,000 trajectories (what cold encoding has to do)."""
    from trace_selector.graph import graph_options, plan_graphs
    from trace_selector.graph.encoder import make_encoder
    from trace_selector.model import SelectorNet
    from trace_selector.records import read_pool

    net = SelectorNet.load_checkpoint(CHECKPOINT)
    loaded = read_pool(pool)
    plans, _ = plan_graphs(loaded, graph_options(net.config))
    texts = list(dict.fromkeys(t for p in plans for t in p.all_texts()))
    trajectories = sum(len(g.trajectories) for g in loaded.groups)
    with tempfile.TemporaryDirectory() as cache:
        enc = make_encoder(net.config.encoder, net.config.embed_dim, cache, net.config.encoder_runtime, threads)
        enc.encode(["warm-up: load (and export) the model before the clock starts"])
        t0 = time.perf_counter()
        enc.encode(texts[:sample])
        seconds = time.perf_counter() - t0
    return {"runtime": net.config.encoder_runtime, "texts_per_s": min(sample, len(texts)) / seconds,
            "texts_per_1k_trajectories": 1000 * len(texts) / trajectories}


def write_pool(path: Path, trajectories: int, k: int) -> int:
    from trace_selector.records import write_pool as write
    from trace_selector.records.synthetic import SyntheticConfig, make_pool

    questions = max(1, trajectories // k)
    write(make_pool(SyntheticConfig(questions=questions, k=k, k_min=k, seed=0)), path)
    return questions * k


def run_cell(kind: str, pool: Path, args: argparse.Namespace, checkpoint: Path) -> dict:
    cmd = [sys.executable, __file__, "--cell", kind, "--pool", str(pool), "--checkpoint", str(checkpoint),
           "--train-steps", str(args.train_steps), "--threads", str(args.threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"{kind} on {pool.name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="1,10,100", help="pool sizes in multiples of the dev pool's 3,200 trajectories")
    ap.add_argument("--ks", default="8,16,64", help="trajectories per question")
    ap.add_argument("--train-steps", type=int, default=20, help="optimizer steps of each train cell")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of each cell")
    ap.add_argument("--encode-sample", type=int, default=2000, help="texts in the cold-encoding measurement")
    ap.add_argument("--max-minutes", type=float, default=10.0, help="skip a scale projected to end past this")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument("--cell", choices=["evaluate", "train", "encode"], help=argparse.SUPPRESS)
    ap.add_argument("--pool", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:  # one measurement, in this fresh process
        out = {"evaluate": lambda: cell_evaluate(args.pool, args.checkpoint, args.threads),
               "train": lambda: cell_train(args.pool, args.train_steps, args.threads),
               "encode": lambda: encode_rate(args.pool, args.encode_sample, args.threads)}[args.cell]()
        print(json.dumps(out))
        return

    t_start = time.perf_counter()
    scales = [int(s) for s in args.scales.split(",")]
    ks = [int(k) for k in args.ks.split(",")]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="cost-") as tmp:
        checkpoint = hashed_checkpoint(Path(tmp) / "selector")
        encode = None
        for scale in scales:
            spent = (time.perf_counter() - t_start) / 60
            done_here = [r for r in rows if r["scale"] == max((r["scale"] for r in rows), default=0)]
            if done_here:  # cells grow linearly with trajectories: project this scale from the last one
                per = sum(r["evaluate_s"] + r["train_s"] for r in done_here) / done_here[0]["scale"]
                projected = per * scale / 60
                if spent + projected > args.max_minutes:
                    print(f"{scale}x skipped: about {projected:.0f} min projected, {spent:.1f} min spent, limit "
                          f"{args.max_minutes:g} (--max-minutes)", flush=True)
                    rows.append({"scale": scale, "skipped": f"about {projected:.0f} min projected"})
                    continue
            for k in ks:
                pool = Path(tmp) / f"pool-{scale}x-k{k}.jsonl.gz"
                n = write_pool(pool, scale * DEV_TRAJECTORIES, k)
                if encode is None:
                    encode = run_cell("encode", pool, args, checkpoint)
                ev = run_cell("evaluate", pool, args, checkpoint)
                tr = run_cell("train", pool, args, checkpoint)
                row = {"scale": scale, "k": k, "trajectories": n, "questions": n // k,
                       "evaluate_s": ev["seconds"], "selector_s": ev["selector_seconds"], "evaluate_peak_mib": ev["peak_mib"],
                       "evaluate_base_mib": ev["base_mib"], "train_s": tr["seconds"], "graphs_s": tr["graphs_seconds"],
                       "steps_s": tr["steps_seconds"], "steps": tr["steps"], "train_peak_mib": tr["peak_mib"],
                       "train_base_mib": tr["base_mib"]}
                rows.append(row)
                print(f"{scale}x K={k}: {n} trajectories, evaluate {ev['seconds']:.1f} s ({ev['peak_mib']:.0f} MiB peak), "
                      f"train {tr['seconds']:.1f} s ({tr['peak_mib']:.0f} MiB peak)", flush=True)
                for done in (pool, pool.with_name(pool.name + ".meta.json")):
                    done.unlink(missing_ok=True)

    print(f"\ncold encoding ({encode['runtime']}, {args.threads} thread(s)): {encode['texts_per_s']:.0f} texts/s; "
          f"{encode['texts_per_1k_trajectories']:.0f} distinct texts per 1,000 trajectories, so about "
          f"{encode['texts_per_1k_trajectories'] / encode['texts_per_s']:.1f} s per 1,000 trajectories on top of "
          "`evaluate` (once per pool: the embedding cache keeps them)\n")
    print("| pool | K | trajectories | evaluate s / 1k | of it selector | evaluate MiB / 1k (peak) | "
          f"train s / 1k: graphs + {args.train_steps} steps | train MiB / 1k (peak) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['scale']}x | | | skipped: {r['skipped']} | | | | |")
            continue
        per = 1000 / r["trajectories"]
        print(f"| {r['scale']}x | {r['k']} | {r['trajectories']:,} | {r['evaluate_s'] * per:.2f} | {r['selector_s'] * per:.2f} | "
              f"{(r['evaluate_peak_mib'] - r['evaluate_base_mib']) * per:.1f} ({r['evaluate_peak_mib']:.0f}) | "
              f"{r['graphs_s'] * per:.2f} + {r['steps_s']:.1f} s | "
              f"{(r['train_peak_mib'] - r['train_base_mib']) * per:.1f} ({r['train_peak_mib']:.0f}) |")
    print(f"\nMiB / 1k: peak minus the process's memory after imports, per 1,000 trajectories; in brackets the "
          f"peak itself. Total {(time.perf_counter() - t_start) / 60:.1f} min.")
    if args.json:
        Path(args.json).write_text(json.dumps({"encode": encode, "rows": rows, "train_steps": args.train_steps,
                                               "threads": args.threads}, indent=1) + "\n")


if __name__ == "__main__":
    main()

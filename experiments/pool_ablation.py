"""TRACE vs majority vote and the ablations on real rollout pools (train on one pool, test on another).

Every variant is trained with `trace-selector train`'s code path on the same training pool (question-
hash validation split, best-validation checkpoint) for each seed, then scored on the test pool at its
full K and at a smaller K (the first k trajectories per question). Baselines are the `evaluate`
methods on the same questions, so the numbers line up with `trace-selector evaluate`.

    .venv/bin/python experiments/pool_ablation.py --train-pool data/pools/wikileads-0.5b-train.jsonl.gz \\
        --test-pool data/pools/wikileads-0.5b-dev.jsonl.gz --seeds 3 --small-k 8
    .venv/bin/python experiments/pool_ablation.py ... --variants full --keep runs/ablation   # keep the runs
    .venv/bin/python experiments/pool_ablation.py ... --jobs 2    # two trainings at once (one thread each)
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from trace_selector import paths
from trace_selector.atomic import atomic_write
from trace_selector.baselines.registry import build_fast
from trace_selector.config import load_config
from trace_selector.evaluate import restrict, score_pick
from trace_selector.paired import Paired, paired_difference
from trace_selector.records import Pool, read_pool
from trace_selector.selector import Selector
from trace_selector.train import ABLATIONS, TrainConfig, train


def em_of(groups, picks) -> float:
    """EM in percent over all questions (a question without a pick counts as wrong)."""
    return 100.0 * sum(score_pick(g, p)[0] for g, p in zip(groups, picks)) / max(len(groups), 1)


def variant_config(name: str, seed: int, args: argparse.Namespace, out: str) -> TrainConfig:
    """The training config of one variant and seed, its run folder in `out`."""
    return load_config(TrainConfig, args.config, [
        f"out_dir={out}", f"name={name}-{seed}", f"seed={seed}", f"data.train_pool={args.train_pool}",
        "trainer.progress_bar=false", f"trainer.threads={args.threads}", *ABLATIONS[name], *args.overrides,
    ])


def train_variant(name: str, seed: int, args: argparse.Namespace, out: str) -> tuple[Path, float, float]:
    """(selector folder, best validation accuracy in percent, train seconds); a finished run in `out`
    (its selector/ exists) is reused, so an interrupted benchmark resumes."""
    cfg = variant_config(name, seed, args, out)
    done = cfg.run_dir / "ablation.json"
    if done.is_file():
        saved = json.loads(done.read_text())
        return cfg.run_dir / "selector", saved["val"], saved["seconds"]
    t0 = time.perf_counter()
    result = train(cfg)
    secs = time.perf_counter() - t0
    val = 100.0 * (result.best_val_acc or 0.0)
    done.write_text(json.dumps({"val": val, "seconds": secs}))
    return result.selector_dir, val, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-pool", required=True)
    ap.add_argument("--test-pool", default=None, help="pool to score on (without it: train only, e.g. while it is generated)")
    ap.add_argument("--config", default="training/wikileads.yaml", help="training YAML the variants start from")
    ap.add_argument("--variants", default="full,no_gnn,no_cross")
    ap.add_argument("--seeds", type=int, default=3, help="how many training seeds per variant: seeds 0..N-1 (mean and spread reported)")
    ap.add_argument("--small-k", type=int, default=8, help="also score with the first k trajectories per question")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per training")
    ap.add_argument("--jobs", type=int, default=1, help="trainings at once, one process each (default 1)")
    ap.add_argument("--keep", default=None, help="folder for the run folders, reused on a rerun (default: a temp folder)")
    ap.add_argument("--out", default=None, help="also write the table and the paired differences as JSON (experiments/targets.py reads it)")
    ap.add_argument("overrides", nargs="*", help="extra training overrides for every variant (key=value)")
    args = ap.parse_args()
    if args.jobs < 1 or args.threads < 1:
        ap.error("--jobs and --threads must be >= 1")
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or tmp
        pairs = [(name, seed) for name in args.variants.split(",") for seed in range(args.seeds)]
        trained = train_all(pairs, args, out)
        runs: dict[str, list[tuple[Path, float, float]]] = {}
        for (name, seed), run in zip(pairs, trained):
            runs.setdefault(name, []).append(run)
        if args.test_pool:
            report(args, runs)


def train_all(pairs: list[tuple[str, int]], args: argparse.Namespace, out: str) -> list[tuple[Path, float, float]]:
    """`train_variant` of every (variant, seed), in `args.jobs` worker processes when more than one."""
    def done(pair: tuple[str, int], run: tuple[Path, float, float]) -> tuple[Path, float, float]:
        print(f"[{pair[0]} seed {pair[1]}] val {run[1]:.1f} ({run[2]:.0f} s)", flush=True)
        return run

    pending = [p for p in pairs if not (variant_config(*p, args, out).run_dir / "ablation.json").is_file()]
    if args.jobs == 1 or len(pending) < 2:
        return [done(p, train_variant(*p, args, out)) for p in pairs]
    from trace_selector.train.seeds import in_processes

    runs = in_processes(variant_config(*pending[0], args, out), train_variant, [(*p, args, out) for p in pairs], args.jobs)
    return [done(p, run) for p, run in zip(pairs, runs)]


def report(args: argparse.Namespace, runs: dict[str, list[tuple[Path, float, float]]]) -> None:
    test = read_pool(args.test_pool)
    full_k = max(len(g.trajectories) for g in test.groups)
    sizes = [full_k] + ([args.small_k] if args.small_k < full_k else [])
    views = {k: restrict(test.groups, k) for k in sizes}
    rows: list[tuple[str, dict[int, list[float]], list[float], float]] = []
    for name in ("single", "majority", "oracle"):
        method = build_fast(name)
        rows.append((name, {k: [em_of(v, method.select(v))] for k, v in views.items()}, [], 0.0))
    # per variant: each test question's correctness at full K, averaged over seeds (for the paired test)
    per_question: dict[str, np.ndarray] = {}
    for name, trained in runs.items():
        ems: dict[int, list[float]] = {k: [] for k in sizes}
        hits = np.zeros(len(test.groups))
        for seed, (selector_dir, _, _) in enumerate(trained):
            selector = Selector.from_pretrained(selector_dir, cache_dir=paths.embeddings_dir())
            for k, v in views.items():
                by_q = {s.question_id: s for s in selector.select(Pool(groups=v, meta=test.meta))}
                correct = np.array([float(by_q[g.question_id].correct or 0.0) for g in v])
                ems[k].append(100.0 * correct.mean())
                if k == full_k:
                    hits += correct / len(trained)
            print(f"[{name} seed {seed}] " + ", ".join(f"EM@{k} {ems[k][-1]:.1f}" for k in sizes), flush=True)
        per_question[name] = hits
        rows.append((name, ems, [r[1] for r in trained], statistics.mean(r[2] for r in trained)))

    n_train = len(read_pool(args.train_pool).groups)
    print(f"\ntrain pool {args.train_pool} ({n_train} questions); test pool {args.test_pool} "
          f"({len(test.groups)} questions, K={full_k}); {args.seeds} seed(s) per variant; EM in percent")
    head = " | ".join(f"EM@K={k}" for k in sizes)
    print(f"| method | {head} | val acc | train s |\n|---|" + "---:|" * (len(sizes) + 2))
    for name, ems, vals, sec in rows:
        cells = []
        for k in sizes:
            xs = ems[k]
            cells.append(f"{statistics.mean(xs):.1f}" + (f" ± {statistics.stdev(xs):.1f}" if len(xs) > 1 else ""))
        val = f"{statistics.mean(vals):.1f}" if vals else "-"
        print(f"| {name} | " + " | ".join(cells) + f" | {val} | {sec:.0f} |")
    paired = {}
    if "full" in per_question and len(per_question) > 1:
        print(f"\npaired against full TRACE at K={full_k} (per question, correctness averaged over seeds; "
              f"difference [95% bootstrap interval over questions] won/lost):")
        for name, hits in per_question.items():
            if name != "full":
                paired[name] = paired_difference(per_question["full"], hits)
                print(f"  full - {name}: " + paired[name].to_text())
    if args.out:
        with atomic_write(args.out) as fh:
            json.dump(record(args, n_train, len(test.groups), full_k, sizes, rows, paired), fh, indent=2)
            fh.write("\n")


def record(args: argparse.Namespace, n_train: int, n_test: int, full_k: int, sizes: list[int],
           rows: list[tuple[str, dict[int, list[float]], list[float], float]], paired: dict[str, Paired]) -> dict:
    """What `--out` writes: per row the EM of every seed at each k, and full minus each variant."""
    return {"train_pool": args.train_pool, "n_train": n_train, "test_pool": args.test_pool, "n_test": n_test,
            "k": full_k, "sizes": sizes, "seeds": args.seeds,
            "rows": {name: {"em": {str(k): xs for k, xs in ems.items()}, "val": vals, "train_seconds": sec}
                     for name, ems, vals, sec in rows},
            "paired_vs_full": {name: pair.to_dict() for name, pair in paired.items()}}


if __name__ == "__main__":
    main()

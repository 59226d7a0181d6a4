"""Does subset training close the gap between training at K=8 and scoring at K=16?

Trains the same recipe twice on one pool, once on every question's full K trajectories
(``data.subsets=false``) and once on a fresh random subset of k in 2..K per question and epoch
(``data.subsets=true``), then scores both next to majority vote on a larger-K dev pool, with the
budget curve (k = 1, 2, 4, ..., K). Any other override applies to both runs.

    .venv/bin/python experiments/subset_training.py --train-pool data/pools/wikileads-0.5b-train.jsonl.gz \\
        --dev-pool data/pools/wikileads-0.5b-dev.jsonl.gz --out runs/subset-training optim.epochs=20

Writes ``<out>/<variant>/`` run folders, ``<out>/results.json`` (`trace-selector evaluate` format),
``<out>/budget.png``, and prints the budget curve with each selector's lead over majority vote.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from trace_selector.config import load_config
from trace_selector.evaluate import EvalConfig, evaluate, format_table
from trace_selector.train import TrainConfig, train

VARIANTS = {"full_k": ["data.subsets=false"], "subsets": ["data.subsets=true"]}
"""Row name -> training overrides."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="training/wikileads.yaml", help="training recipe both runs start from")
    ap.add_argument("--train-pool", required=True)
    ap.add_argument("--dev-pool", required=True, help="pool to score on (larger K than the training pool)")
    ap.add_argument("--out", default="runs/subset-training")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget-subsets", type=int, default=8, help="random subsets per question and k in the curve")
    ap.add_argument("overrides", nargs="*", help="training overrides for both runs (key=value)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)

    checkpoints = []
    for name, extra in VARIANTS.items():
        cfg = load_config(TrainConfig, args.config, [
            f"out_dir={out}", f"name={name}", f"seed={args.seed}", f"data.train_pool={args.train_pool}",
            "trainer.progress_bar=false", f"trainer.threads={args.threads}", *extra, *args.overrides,
        ])
        t0 = time.perf_counter()
        result = train(cfg)
        print(f"[{name}] val acc {100 * (result.best_val_acc or 0):.1f} after {result.global_step} steps "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        checkpoints.append(f"{name}={result.selector_dir}")

    res = evaluate(EvalConfig(pool=args.dev_pool, methods=["majority", "trace"], checkpoint=checkpoints,
                              out=str(out / "results.json"), plot=str(out / "budget.png"),
                              per_question=str(out / "per_question.jsonl"), budget_subsets=args.budget_subsets,
                              seed=args.seed, threads=args.threads, reference="full_k"))
    print(format_table(res))
    curve = res["budget_curve"]
    ks = sorted(curve["majority"], key=int)
    print("\n| k | majority | " + " | ".join(f"{n} (lead)" for n in VARIANTS) + " | oracle |")
    print("|---:|---:|" + "---:|" * len(VARIANTS) + "---:|")
    for k in ks:
        m = curve["majority"][k]
        cells = " | ".join(f"{curve[n][k]:.1f} ({curve[n][k] - m:+.1f})" for n in VARIANTS)
        print(f"| {k} | {m:.1f} | {cells} | {curve['oracle_pass_at_k'][k]:.1f} |")
    (out / "curve.json").write_text(json.dumps(curve, indent=2))


if __name__ == "__main__":
    main()

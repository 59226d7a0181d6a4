"""Ablation table on the synthetic pool family: TRACE selector vs majority vote and its ablations.

Trains every variant on the same synthetic questions (split by question hash into train/val), picks
its best-validation checkpoint, and scores held-out test questions generated with a disjoint
question range. Prints one row per method: test selection accuracy, validation accuracy, train time.

    .venv/bin/python experiments/synthetic_ablation.py                       # ~3-5 min on 2 cores
    .venv/bin/python experiments/synthetic_ablation.py --variants full,no_gnn --epochs 10
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter

import torch

from trace_selector.config import load_config
from trace_selector.graph import build_graphs
from trace_selector.graph.encoder import BagOfWordsEncoder
from trace_selector.records.answers import normalize_answer
from trace_selector.records.synthetic import SyntheticConfig, make_pool
from trace_selector.graph import graph_options
from trace_selector.selector import Selector
from trace_selector.train import ABLATIONS, PoolDataModule, TrainConfig, is_val_question, train


def majority(group) -> str:
    votes = Counter(normalize_answer(t.answer) for t in group.trajectories if normalize_answer(t.answer))
    return votes.most_common(1)[0][0] if votes else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=300, help="questions for train+val (val share 0.2 by hash)")
    ap.add_argument("--test", type=int, default=150, help="held-out test questions")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--seeds", type=int, default=1, help="training seeds per variant (mean reported)")
    ap.add_argument("--variants", default=",".join(ABLATIONS))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    enc = BagOfWordsEncoder(128)
    k_min = max(4, args.k - 2)
    train_pool = make_pool(SyntheticConfig(questions=args.train, k=args.k, k_min=k_min, seed=0))
    test_pool = make_pool(SyntheticConfig(questions=args.test, k=args.k, k_min=k_min, seed=0, offset=100_000))
    gold = {g.question_id: g.golden_answers for g in test_pool.groups}
    maj = sum(majority(g) == normalize_answer(gold[g.question_id][0]) for g in test_pool.groups) / args.test
    oracle = sum(any(normalize_answer(t.answer) == normalize_answer(gold[g.question_id][0]) for t in g.trajectories)
                 for g in test_pool.groups) / args.test

    rows = [("majority vote", maj, float("nan"), 0.0), ("oracle (pass@K)", oracle, float("nan"), 0.0)]
    with tempfile.TemporaryDirectory() as out:
        for name in args.variants.split(","):
            tests, vals, secs = [], [], []
            for seed in range(args.seeds):
                cfg = load_config(TrainConfig, "training/synthetic.yaml", [
                    f"out_dir={out}", f"name={name}-{seed}", f"seed={seed}", f"model.hidden={args.hidden}",
                    f"model.layers={args.layers}", f"optim.epochs={args.epochs}", "trainer.progress_bar=false",
                    f"trainer.threads={args.threads}", *ABLATIONS[name],
                ])
                opts = graph_options(cfg.model)
                split = [g for g in train_pool.groups if not is_val_question(g.question, 0.2)]
                held = [g for g in train_pool.groups if is_val_question(g.question, 0.2)]
                tr, _ = build_graphs(split, enc, opts)
                va, _ = build_graphs(held, enc, opts)
                t0 = time.perf_counter()
                result = train(cfg, datamodule=PoolDataModule(cfg, enc, graphs=(tr, va)))
                secs.append(time.perf_counter() - t0)
                picks = Selector.from_pretrained(result.selector_dir, encoder=enc).select(test_pool)
                tests.append(sum(bool(s.correct) for s in picks) / args.test)
                vals.append(result.best_val_acc)
            rows.append((name, sum(tests) / len(tests), sum(vals) / len(vals), sum(secs) / len(secs)))
            print(f"[{name}] test {rows[-1][1]:.3f} val {rows[-1][2]:.3f} ({rows[-1][3]:.0f} s)", flush=True)

    print(f"\nsynthetic family: train+val {args.train} questions, test {args.test}, K={k_min}..{args.k}, "
          f"hidden {args.hidden}, L={args.layers}, {args.epochs} epochs, {args.seeds} seed(s)")
    print(f"{'method':<18} {'test acc':>9} {'val acc':>8} {'vs majority':>12} {'train s':>8}")
    for name, test, val, sec in rows:
        gain = test - maj
        print(f"{name:<18} {test:>9.3f} {val:>8.3f} {gain:>+12.3f} {sec:>8.0f}")


if __name__ == "__main__":
    main()

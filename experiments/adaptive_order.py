"""How much a selector's adaptive stopping depends on which trajectories happen to come first.

The offline adaptive replay reads each question's trajectories in sample order; a new rollout of the
same questions draws other trajectories first. This replays the same stopping rule (a selector row's
threshold and temperature, waves of `--wave`) on `--permutations` random orders of every question's
trajectories in one finished pool, and prints the spread of EM and trajectories used over the orders,
next to the selector's fixed-K EM (which no order changes). It answers, for example, whether a
10-point gap between an online adaptive run and the offline replay on another rollout of 40 questions
is within what the order of arrival alone produces.

    .venv/bin/python experiments/adaptive_order.py --pool data/pools/wikileads-dev.jsonl.gz \\
        --checkpoint checkpoints/wikileads-grounded --threshold 0.7256 --limit 40 --permutations 30 \\
        --json experiments/results/adaptive-rollout/order.json

The temperature defaults to the checkpoint's calibration.json. Permutation r uses numpy's
default_rng(seed + r) (`trace_selector.adaptive.arrival_orders`), so a rerun repeats every order;
experiments/adaptive_selection.py ``--orders`` draws the same ones.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def replay(adaptive: Any, groups: list[Any], orders: list[list[int]]) -> tuple[list[float], list[int]]:
    """EM (0/1) and trajectories used per question when trajectories arrive in `orders` (sample ids per
    question), each question scored only up to the wave where it stops."""
    from trace_selector.adaptive import stopped_pick
    from trace_selector.scoring import em_of

    picks = [stopped_pick(w, adaptive.rule.threshold) for w in adaptive.waves(groups, orders, until_stopped=True)]
    return [em_of(g, p) for g, p in zip(groups, picks)], [p.extra["trajectories_used"] for p in picks]


def spread(values: list[float]) -> dict[str, float]:
    qs = np.percentile(values, [2.5, 50, 97.5])
    return {"mean": round(statistics.fmean(values), 2), "sd": round(statistics.pstdev(values), 2),
            "min": round(min(values), 2), "p2.5": round(float(qs[0]), 2), "median": round(float(qs[1]), 2),
            "p97.5": round(float(qs[2]), 2), "max": round(max(values), 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--pool", type=Path, required=True, help="a finished pool (.jsonl or .jsonl.gz)")
    p.add_argument("--checkpoint", required=True, help="selector folder (or Hub repo id) whose adaptive row is replayed")
    p.add_argument("--threshold", type=float, required=True, help="the row's stopping threshold (chosen on a dev pool)")
    p.add_argument("--temperature", type=float, default=None,
                   help="confidence temperature (default: the checkpoint's calibration.json)")
    p.add_argument("--wave", type=int, default=2, help="trajectories per wave (default 2)")
    p.add_argument("--min-waves", type=int, default=2, help="first wave allowed to stop (default 2)")
    p.add_argument("--offset", type=int, default=0, help="first question of the pool (pool order)")
    p.add_argument("--limit", type=int, default=None, help="questions from the offset (default: all)")
    p.add_argument("--permutations", type=int, default=30, help="random orders of arrival (default 30)")
    p.add_argument("--seed", type=int, default=0, help="order r is drawn with default_rng(seed + r)")
    p.add_argument("--json", type=Path, default=None, help="write the figures and every order's row here")
    args = p.parse_args(argv)
    if args.permutations < 1:
        p.error("--permutations must be >= 1")

    from trace_selector.adaptive import AdaptiveConfig, arrival_orders, build_adaptive
    from trace_selector.evaluate import TraceMethod
    from trace_selector.model.hub import read_temperature
    from trace_selector.records import Pool, read_pool
    from trace_selector.scoring import em_of

    pool = read_pool(args.pool)
    groups = pool.groups[args.offset:None if args.limit is None else args.offset + args.limit]
    if not groups:
        p.error(f"{args.pool}: no questions at offset {args.offset}")
    temperature = args.temperature if args.temperature is not None else read_temperature(args.checkpoint)
    if temperature is None:
        p.error(f"{args.checkpoint} has no calibration.json: give --temperature")
    trace = TraceMethod(args.checkpoint, Pool(groups=list(groups), meta=pool.meta))
    if trace.reason:
        p.error(f"{args.checkpoint}: {trace.reason}")
    row = "trace_adaptive"
    adaptive = build_adaptive(row, AdaptiveConfig(wave=args.wave, min_waves=args.min_waves,
                                                  thresholds={row: args.threshold}, temperature={row: temperature}),
                              trace)
    fixed = [em_of(g, pick) for g, pick in zip(groups, trace.select(groups))]
    fixed_em = 100.0 * statistics.fmean(fixed)
    print(f"{len(groups)} questions of {args.pool}; fixed K: {fixed_em:.1f}", file=sys.stderr)

    rows: list[dict[str, Any]] = []
    lost_by_q = np.zeros(len(groups))
    t0 = time.perf_counter()
    for r in range(args.permutations):
        em, used = replay(adaptive, list(groups), arrival_orders(groups, args.seed + r))
        lost_by_q += np.array([f - e for f, e in zip(fixed, em)])
        rows.append({"order": r, "em": round(100.0 * statistics.fmean(em), 2),
                     "mean_trajectories": round(statistics.fmean(used), 3),
                     "lost": int(sum(f > e for f, e in zip(fixed, em))), "won": int(sum(e > f for f, e in zip(fixed, em)))})
        print(f"order {r}: EM {rows[-1]['em']:.1f} at {rows[-1]['mean_trajectories']:.2f} trajectories "
              f"({rows[-1]['lost']} lost, {rows[-1]['won']} won against fixed K; {time.perf_counter() - t0:.0f} s)",
              file=sys.stderr)

    gaps = [r["em"] - fixed_em for r in rows]
    out = {"pool": str(args.pool), "checkpoint": args.checkpoint, "questions": len(groups), "offset": args.offset,
           "threshold": args.threshold, "temperature": round(temperature, 4), "wave": args.wave,
           "min_waves": args.min_waves, "permutations": args.permutations, "seed": args.seed,
           "fixed_em": round(fixed_em, 2), "adaptive_em": spread([r["em"] for r in rows]),
           "adaptive_minus_fixed": spread(gaps), "mean_trajectories": spread([r["mean_trajectories"] for r in rows]),
           "orders_losing_at_least": {str(pts): sum(g <= -pts for g in gaps) for pts in (2.5, 5.0, 7.5, 10.0)},
           "questions_ever_lost": int((lost_by_q > 0).sum()),
           "seconds": round(time.perf_counter() - t0, 1), "orders": rows}
    a, g = out["adaptive_em"], out["adaptive_minus_fixed"]
    print(f"fixed K EM {fixed_em:.1f}; adaptive over {args.permutations} orders: mean {a['mean']:.1f} "
          f"(sd {a['sd']:.1f}, {a['min']:.1f}-{a['max']:.1f}); adaptive - fixed: mean {g['mean']:+.1f}, "
          f"95% of orders in [{g['p2.5']:+.1f}, {g['p97.5']:+.1f}]; orders losing >= 10 points: "
          f"{out['orders_losing_at_least']['10.0']} of {args.permutations}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

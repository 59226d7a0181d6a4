"""Training several seeds one after another against several at once (`trace-selector train --seeds
... --jobs N`), side by side in one run on the same recipe, pool and graph cache.

Each condition trains the same seeds into its own fresh run folder from a graph cache warmed before
the timings (so no condition pays for encoding), with one torch thread per training, and prints the
wall time and the speed-up over ``--jobs 1``. It also checks that every seed's validation score is
the same in every condition (a seed's run does not depend on which process trains it).

    .venv/bin/python benchmarks/seed_jobs.py --config training/wikileads.yaml --seeds 0,1 --jobs 1,2 \\
        optim.max_steps=300 --json benchmarks/seed_jobs.json

Extra arguments are training overrides for every condition. Run it on an idle machine: another busy
process takes cores from the parallel condition first.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True, help="training YAML")
    ap.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1)")
    ap.add_argument("--jobs", default="1,2", help="comma-separated --jobs values to time (default 1,2)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("overrides", nargs="*", help="training overrides (key=value), e.g. optim.max_steps=300")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = [int(j) for j in args.jobs.split(",")]

    from trace_selector.config import load_config
    from trace_selector.train import TrainConfig, train_seeds
    from trace_selector.train.data import PoolDataModule

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def config(name: str) -> TrainConfig:
            return load_config(TrainConfig, args.config, [f"out_dir={tmp}", f"name={name}", "trainer.threads=1",
                                                          "trainer.progress_bar=false", *args.overrides])

        t0 = time.perf_counter()
        PoolDataModule(config("warm")).setup("fit")
        print(f"graph cache warmed in {time.perf_counter() - t0:.1f} s (not counted)", flush=True)
        for n in jobs:
            t0 = time.perf_counter()
            _, table = train_seeds(config(f"jobs-{n}"), seeds, jobs=n)
            wall = time.perf_counter() - t0
            rows.append({"jobs": n, "wall_s": round(wall, 1), "val_acc": [r["val_acc"] for r in table],
                         "steps": [r["global_step"] for r in table]})
            print(f"--jobs {n}: {wall:.1f} s for {len(seeds)} seeds", flush=True)
    base = rows[0]["wall_s"]
    same = all(r["val_acc"] == rows[0]["val_acc"] and r["steps"] == rows[0]["steps"] for r in rows)
    print(f"\n{args.config}, seeds {args.seeds}, overrides {' '.join(args.overrides) or '-'}; "
          f"{os.cpu_count()} cores ({platform.processor() or platform.machine()})")
    print("| --jobs | wall s | speed-up |\n|---:|---:|---:|")
    for r in rows:
        print(f"| {r['jobs']} | {r['wall_s']:.1f} | {base / r['wall_s']:.2f}x |")
    print(f"every seed's validation accuracy and steps the same in every condition: {same}")
    if args.json:
        from trace_selector.atomic import atomic_write

        with atomic_write(args.json) as fh:
            json.dump({"config": str(args.config), "seeds": seeds, "overrides": args.overrides,
                       "cores": os.cpu_count(), "rows": rows, "same_runs": same}, fh, indent=2)
            fh.write("\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

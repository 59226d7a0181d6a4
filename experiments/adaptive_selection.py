"""Budget-adaptive selection on a setting's pools: how many trajectories each method needs when it
may stop sampling once it is sure, against the fixed K = 16 it otherwise reads.

    .venv/bin/python experiments/adaptive_selection.py                 # wikileads dev pool: choose settings, print
    .venv/bin/python experiments/adaptive_selection.py --sealed        # once, final: dev choices on the sealed pool
    .venv/bin/python experiments/adaptive_selection.py --setting wikihops   # the multi-hop pools and selectors
    .venv/bin/python experiments/adaptive_selection.py --setting wikihops --k 8 \
        --held-out data/pools/wikihops-dev-standard150.jsonl.gz   # dev choices on other, unsealed questions

Rows (trace_selector/adaptive.py): Adaptive-Consistency (`majority_adaptive_ac`), Early-Stopping
Self-Consistency (`majority_adaptive_esc`) and each shipped selector stopping on its calibrated
confidence (`trace_adaptive`, `trace_grounded_adaptive`), trajectories arriving in waves of `--wave`.
A new rollout draws its first trajectories at random, so each row is replayed on `--orders` random
orders of arrival of every question's trajectories (seeded; `--orders 0`: the pool's sample order
alone) and its figures are the means over them: a threshold chosen on one order fits that order's
luck. Everything is chosen on the dev pool, in-sample (so the dev rows are optimistic):

- each selector's temperature, fitted on every wave of every dev question (calibration.py);
- per row, the threshold (and for selectors the first wave allowed to stop) with the fewest
  trajectories that reaches (a) the row's own fixed-K EM within `--tolerance` points and (b) majority
  vote's fixed-K EM within the same tolerance, the common target at which the rows are compared
  question by question (trajectories used, paired bootstrap of paired.py);
- ESC has no threshold (its window is the wave); it is shown at its rule.

`--sealed` first makes the same dev choices, then applies them unchanged to the sealed test pool,
which is read nowhere else: without the flag this script refuses to open it, and with it the run
writes `--record` and refuses to run again while that file exists. `--held-out` applies the same
choices to any other pool of questions the choices never saw (not a sealed one), as often as wanted:
an out-of-sample reading before the final one.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Setting:
    """A search setting's pools, shipped selectors and sealed-run record (the `--setting` defaults)."""

    dev_pool: Path
    sealed_pool: Path
    checkpoints: tuple[str, ...]
    record: Path


SETTINGS = {
    name: Setting(ROOT / f"data/pools/{name}-dev.jsonl.gz", ROOT / f"data/pools/{name}-test-sealed.jsonl.gz",
                  (f"trace=checkpoints/{name}", f"trace_grounded=checkpoints/{name}-grounded"),
                  ROOT / f"experiments/results/{name}-sealed-adaptive-evaluation.txt")
    for name in ("wikileads", "wikihops")
}


@dataclass(slots=True)
class Choice:
    """One row's setting, chosen on the dev pool."""

    row: str
    """Adaptive row name."""
    target: str
    """Which EM it had to reach: "own fixed K", "majority fixed K", or "rule" (ESC, the paper's default)."""
    threshold: float
    """Stopping threshold (inf: never stops early)."""
    first_wave: int = 1
    """First wave allowed to stop."""
    temperature: float | None = None
    """Selector rows: the temperature fitted on the dev pool."""


def histories(groups: list, checkpoints: dict[str, str], wave: int, threads: int,
              orders: list[list[list[int]] | None]) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The rows, and for each every wave of every question once per order of arrival (selectors scored
    once per wave over all questions)."""
    import torch

    from trace_selector.adaptive import AdaptiveConfig, build_adaptive
    from trace_selector.evaluate import TraceMethod
    from trace_selector.records import Pool

    torch.set_num_threads(threads)
    cfg = AdaptiveConfig(wave=wave, min_waves=1)
    rows: dict[str, Any] = {name: build_adaptive(name, cfg) for name in ("majority_adaptive_ac", "majority_adaptive_esc")}
    for name, path in checkpoints.items():
        trace = TraceMethod(path, Pool(groups=groups), name=name, encoder_threads=threads)
        rows[f"{name}_adaptive"] = build_adaptive(f"{name}_adaptive", cfg, trace)
    replays: dict[str, list[Any]] = {}
    for name, method in rows.items():
        t0 = time.perf_counter()
        replays[name] = [method.waves(groups, order) for order in orders]
        print(f"{name}: {len(groups)} questions x {len(orders)} orders, every wave scored in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return rows, replays


def tables(rows: dict[str, Any], replays: dict[str, list[Any]], groups: list,
           temperatures: dict[str, float]) -> dict[str, Any]:
    """`WaveTable` per row, its orders stacked (row r * questions + q), selector statistics read at the
    given temperatures."""
    from trace_selector.adaptive import ConfidenceRule, WaveTable, restate
    from trace_selector.evaluate import em_of

    out = {}
    for name, method in rows.items():
        if isinstance(method.rule, ConfidenceRule):
            method.rule.temperature = temperatures[name]
            for history in replays[name]:
                restate(history, method.rule)
        out[name] = WaveTable.stack([WaveTable.build(history, groups, em_of) for history in replays[name]])
    return out


def arrival(groups: list, orders: int, seed: int) -> list[list[list[int]] | None]:
    """`orders` seeded random orders of arrival (`--orders`); none: the pool's sample order alone."""
    from trace_selector.adaptive import arrival_orders

    return [arrival_orders(groups, seed + r) for r in range(orders)] if orders else [None]


def choose(name: str, table: Any, target: float, label: str, tolerance: float, temperature: float | None) -> Choice:
    """The cheapest setting of a row reaching `target` within `tolerance` (selectors: threshold and first wave)."""
    from trace_selector.adaptive import choose_threshold

    if name == "majority_adaptive_esc":
        return Choice(name, "rule", 1.0)
    if temperature is None:  # AC: the threshold only
        return Choice(name, label, choose_threshold(table, target, tolerance).threshold)
    waves = int(table.valid.sum(axis=1).max())
    best: tuple[Any, int] | None = None
    for first in range(1, waves + 1):
        point = choose_threshold(table.from_wave(first), target, tolerance)
        reached = point.em >= target - tolerance - 1e-9
        key = (not reached, point.mean_trajectories, -point.em)
        if best is None or key < best[0]:
            best = (key, first, point)  # type: ignore[assignment]
    assert best is not None
    return Choice(name, label, best[2].threshold, best[1], temperature)  # type: ignore[misc]


def report(title: str, groups: list, tabs: dict[str, Any], choices: list[Choice],
           k: int, resamples: int, tolerance: float, orders: int) -> dict[str, Any]:
    """Print one pool's table (and the paired comparison at the common target); return it as a dict."""
    import numpy as np

    from trace_selector.paired import paired_difference

    majority_fixed = tabs["majority_adaptive_ac"].point(math.inf)
    print(f"\n{title}: {len(groups)} questions, K={k}; majority vote at K={k}: EM {majority_fixed.em:.1f}")
    print(f"EM and cost: means over {'the sample order' if orders == 0 else f'{orders} random orders of arrival'} "
          "(EM sd: their spread)")
    print("| row | target | threshold | first wave | T | EM | EM sd | EM fixed K | trajectories | x K | fewer | gen. tokens "
          "| x tokens |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    out: dict[str, Any] = {"pool": title, "questions": len(groups), "k": k, "rows": []}
    replays = max(1, orders)  # the tables stack one replay per order (the sample order alone for 0)
    per_question: dict[tuple[str, str], list[float]] = {}
    ems: dict[tuple[str, str], list[float]] = {}
    for c in choices:
        table = tabs[c.row].from_wave(c.first_wave)
        point, fixed = table.point(c.threshold), table.point(math.inf)
        at = table.stops(c.threshold)
        # [orders, questions]: the spread over orders, and each question's mean over them for pairing
        seen = table.seen[np.arange(len(at)), at].reshape(replays, len(groups))
        em = table.em[np.arange(len(at)), at].reshape(replays, len(groups))
        sd = float(100 * em.mean(axis=1).std())
        per_question[(c.row, c.target)] = seen.mean(axis=0).tolist()
        ems[(c.row, c.target)] = em.mean(axis=0).tolist()
        tokens = point.mean_generated_tokens
        token_ratio = None if tokens is None or not fixed.mean_generated_tokens else tokens / fixed.mean_generated_tokens
        thr = "-" if math.isinf(c.threshold) else f"{c.threshold:.4g}"
        print(f"| {c.row} | {c.target} | {thr} | {c.first_wave} | {'-' if c.temperature is None else f'{c.temperature:.3g}'} "
              f"| {point.em:.1f} | {sd:.1f} | {fixed.em:.1f} | {point.mean_trajectories:.2f} | {point.mean_trajectories / k:.3f} "
              f"| {k / point.mean_trajectories:.2f}x | {'-' if tokens is None else f'{tokens:.0f}'} "
              f"| {'-' if token_ratio is None else f'{token_ratio:.3f}'} |")
        out["rows"].append({"row": c.row, "target": c.target, "threshold": None if math.isinf(c.threshold) else c.threshold,
                            "first_wave": c.first_wave, "temperature": c.temperature, "em": point.em,
                            "em_sd_over_orders": sd, "fixed_k_em": fixed.em, "mean_trajectories": point.mean_trajectories,
                            "trajectory_ratio": point.mean_trajectories / k, "mean_generated_tokens": tokens,
                            "token_ratio": token_ratio})
    # At (near-)equal EM: rows that reached majority vote's fixed-K EM, paired question by question.
    common = [key for key in per_question if key[1] == "majority fixed K"]
    matched = [(a, b) for i, a in enumerate(common) for b in common[i + 1:]
               if abs(np.mean(ems[a]) - np.mean(ems[b])) * 100 <= 2 * tolerance + 1e-9]
    if matched:
        print(f"\nat majority vote's fixed-K EM (rows within {2 * tolerance:g} points of each other): "
              "trajectories used per question, A minus B, 95% paired bootstrap, questions where A used more/fewer")
    out["paired"] = []
    for a, b in matched:
        traj = paired_difference(per_question[a], per_question[b], resamples=resamples, scale=1.0)
        em = paired_difference(ems[a], ems[b], resamples=resamples)
        print(f"  {a[0]} vs {b[0]}: trajectories {traj.diff:+.2f} [{traj.low:+.2f}, {traj.high:+.2f}] "
              f"{traj.won}/{traj.lost}; EM {em.to_text()}")
        out["paired"].append({"a": a[0], "b": b[0], "trajectories": traj.to_dict(), "em": em.to_dict()})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setting", choices=sorted(SETTINGS), default="wikileads",
                   help="whose dev and sealed pools, shipped selectors and sealed record are the defaults")
    p.add_argument("--pool", type=Path, default=None, help="dev pool the choices are made on (default: the setting's)")
    p.add_argument("--checkpoint", action="append", default=None, metavar="NAME=PATH",
                   help="selector rows (default: the setting's trace and trace_grounded checkpoints, those that exist)")
    p.add_argument("--k", type=int, default=None,
                   help="read each question's first K trajectories by sample id, as `evaluate --k` does (default: all)")
    p.add_argument("--wave", type=int, default=2, help="trajectories per wave (default 2)")
    p.add_argument("--tolerance", type=float, default=0.5, help="EM points a row may lose to its target (default 0.5)")
    p.add_argument("--orders", type=int, default=20,
                   help="random orders of arrival every row is replayed on, its figures their means (default 20; "
                        "0: the pool's sample order alone)")
    p.add_argument("--order-seed", type=int, default=0, help="order r is drawn with default_rng(order seed + r)")
    p.add_argument("--threads", type=int, default=1, help="torch and encoder threads (default 1)")
    p.add_argument("--bootstrap", type=int, default=10_000, help="paired bootstrap resamples")
    p.add_argument("--out", type=Path, default=None, help="JSON of the choices and tables")
    p.add_argument("--sealed", action="store_true",
                   help="final evaluation: apply the dev choices to the sealed test pool (reads it; once)")
    p.add_argument("--held-out", type=Path, action="append", default=[], metavar="POOL",
                   help="also apply the dev choices to this pool of other questions (not a sealed one); repeatable")
    p.add_argument("--record", type=Path, default=None,
                   help="--sealed writes this and refuses while it exists (default: the setting's)")
    a = p.parse_args(argv)
    setting = SETTINGS[a.setting]
    a.pool = a.pool or setting.dev_pool
    a.record = a.record or setting.record
    sealed_pool = setting.sealed_pool

    from trace_selector.adaptive import AdaptiveConfig, wave_items
    from trace_selector.calibration import fit_temperature
    from trace_selector.evaluate import em_of, named_checkpoints, restrict
    from trace_selector.records import read_pool

    def is_sealed(path: Path) -> bool:
        return path.resolve() == sealed_pool.resolve() or "sealed" in path.name

    if is_sealed(a.pool):
        print(f"error: {a.pool} is the sealed test pool; choices are made on a dev pool (--sealed applies them to it)",
              file=sys.stderr)
        return 1
    if not a.pool.is_file():
        print(f"error: {a.pool}: dev pool not found (the pools README says how each setting's pools grow)", file=sys.stderr)
        return 1
    for pool in a.held_out:
        if is_sealed(pool):
            print(f"error: {pool} is a sealed test pool; --sealed reads it, once", file=sys.stderr)
            return 1
        if pool.resolve() == a.pool.resolve():
            print(f"error: {pool} is the dev pool the choices are made on, not held out", file=sys.stderr)
            return 1
        if not pool.is_file():
            print(f"error: {pool}: held-out pool not found", file=sys.stderr)
            return 1
    if a.sealed and a.record.exists():
        print(f"error: {a.record} exists: the sealed pool has been evaluated adaptively once already", file=sys.stderr)
        return 1
    if a.wave < 1 or a.tolerance < 0 or a.threads < 1 or a.bootstrap < 1 or a.orders < 0 or (a.k is not None and a.k < 1):
        print("error: --k, --wave, --threads and --bootstrap must be >= 1, --tolerance and --orders >= 0", file=sys.stderr)
        return 1
    defaults = list(setting.checkpoints)
    if a.checkpoint is None:  # a setting's selectors may not be trained yet: voting rows alone then
        missing = [c for c in defaults if not (ROOT / c.split("=", 1)[1]).exists()]
        if missing and a.sealed:
            print(f"error: --sealed needs the setting's selectors, and {', '.join(missing)} are not there "
                  "(the sealed pool is read once, so not without them)", file=sys.stderr)
            return 1
        for c in missing:
            print(f"note: {c.split('=', 1)[1]} not shipped yet: its row is left out", file=sys.stderr)
        defaults = [c for c in defaults if c not in missing]
    try:
        checkpoints = named_checkpoints(a.checkpoint if a.checkpoint is not None else defaults)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    checkpoints = {n: str(ROOT / c) if not Path(c).is_absolute() and (ROOT / c).exists() else c for n, c in checkpoints.items()}

    dev = restrict(read_pool(a.pool).groups, a.k)
    k = max(len(g.trajectories) for g in dev)
    rows, replays = histories(dev, checkpoints, a.wave, a.threads, arrival(dev, a.orders, a.order_seed))
    temperatures = {f"{n}_adaptive": fit_temperature([item for history in replays[f"{n}_adaptive"]
                                                      for item in wave_items(history, dev, em_of)])
                    for n in checkpoints}
    tabs = tables(rows, replays, dev, temperatures)
    majority_em = tabs["majority_adaptive_ac"].point(math.inf).em
    choices: list[Choice] = []
    for name, table in tabs.items():
        t = temperatures.get(name)
        if name.startswith("majority_"):  # its own fixed-K EM is majority vote's
            choices.append(choose(name, table, majority_em, "majority fixed K", a.tolerance, t))
            continue
        choices.append(choose(name, table, table.point(math.inf).em, "own fixed K", a.tolerance, t))
        choices.append(choose(name, table, majority_em, "majority fixed K", a.tolerance, t))
    # Not chosen: AC at the paper's threshold, the selectors at `evaluate`'s defaults (dev temperature).
    base = AdaptiveConfig()
    defaults = [Choice("majority_adaptive_ac", "default", base.ac_threshold)]
    defaults += [Choice(f"{n}_adaptive", "default", base.trace_threshold, base.min_waves, temperatures[f"{n}_adaptive"])
                 for n in checkpoints]
    results = {"dev": report(f"dev {a.pool.name} (choices made here, in-sample)", dev, tabs,
                             choices + defaults, k, a.bootstrap, a.tolerance, a.orders),
               "k": a.k, "wave": a.wave, "tolerance": a.tolerance, "orders": a.orders, "order_seed": a.order_seed,
               "temperatures": temperatures}

    def applied(pool: Path, title: str) -> dict[str, Any]:
        """The dev choices (thresholds and temperatures) on another pool, unchanged."""
        groups = restrict(read_pool(pool).groups, a.k)
        rows, replays = histories(groups, checkpoints, a.wave, a.threads, arrival(groups, a.orders, a.order_seed))
        return report(f"{title} {pool.name} (dev choices applied)", groups, tables(rows, replays, groups, temperatures),
                      choices + defaults, max(len(g.trajectories) for g in groups), a.bootstrap, a.tolerance, a.orders)

    if a.held_out:
        results["held_out"] = {str(pool): applied(pool, "held-out") for pool in a.held_out}
    if a.sealed:
        results["sealed"] = applied(sealed_pool, "sealed")
        a.record.write_text(f"experiments/adaptive_selection.py --sealed ran on {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n"
                            + json.dumps(results["sealed"], indent=1, default=str) + "\n")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Several training seeds of one recipe, the best kept by validation (``trace-selector train --seeds``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from trace_selector.config import dump_config
from trace_selector.errors import InputError
from trace_selector.train.config import TrainConfig
from trace_selector.train.fit import TrainResult, train

def train_one_seed(sub: TrainConfig, resume: bool) -> tuple[dict[str, Any], TrainResult]:
    """Train one seed's run (`sub` already carries the seed and its folder) and record its scores in
    ``seed.json``, which marks the seed finished. Top-level so that a worker process can run it."""
    import json

    from trace_selector.atomic import atomic_write

    result = train(sub, resume=resume and (sub.run_dir / "checkpoints" / "last.ckpt").is_file())
    row = {"seed": sub.seed, "val_acc": result.best_val_acc, "val_majority": result.val_majority_acc,
           "score": result.best_score, "global_step": result.global_step}
    with atomic_write(sub.run_dir / "seed.json") as fh:
        json.dump(row, fh)
    return row, result


def in_processes(warm: TrainConfig, fn: Callable[..., Any], calls: list[tuple], jobs: int) -> list[Any]:
    """``fn(*call)`` for every call, in `jobs` spawned worker processes; results in call order.

    `warm`'s graphs (and the encoder's embeddings) are built here first and cached on disk, so that
    the workers read them instead of all encoding the same texts at once. `fn` must be importable
    (module level) for a worker to run it."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from trace_selector.train.data import PoolDataModule

    PoolDataModule(warm).setup("fit")
    # spawn, not fork: a forked child inherits the parent's OpenMP thread pool in an unusable state.
    with ProcessPoolExecutor(min(jobs, len(calls)), mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(fn, *call) for call in calls]
        return [future.result() for future in futures]


def _in_parallel(cfg: TrainConfig, subs: list[TrainConfig], resume: bool, jobs: int) -> dict[int, tuple[dict[str, Any], TrainResult]]:
    """Train `subs` in `jobs` worker processes; returns each seed's (row, result)."""
    import os

    # Unset, torch would give every worker all cores: the workers would fight over them.
    threads = max(1, (os.cpu_count() or 1) // min(jobs, len(subs)))
    subs = [replace(s, trainer=replace(s.trainer, progress_bar=False, threads=s.trainer.threads or threads)) for s in subs]
    done = in_processes(cfg, train_one_seed, [(s, resume) for s in subs], jobs)
    return {s.seed: run for s, run in zip(subs, done)}


def train_seeds(cfg: TrainConfig, seeds: Sequence[int], resume: bool = False,
                jobs: int = 1) -> tuple[TrainResult, list[dict[str, Any]]]:
    """One run per seed in ``<run_dir>/seed-<s>/``; the best by validation (``optim.monitor``: accuracy,
    ties to the lower loss with ``optim.tie_break``; equal scores to the earlier seed) is copied to
    ``<run_dir>/selector/``, and every seed's scores go to ``<run_dir>/seeds.json``.

    A seed whose run folder holds a finished run (``seed.json``) is read back, not retrained, so an
    interrupted sweep continues; with `resume`, unfinished seeds continue from their last checkpoint.
    With `jobs` > 1 the unfinished seeds train in that many worker processes at once (a seed's run does
    not depend on which process trains it). Returns the chosen seed's result and the table written to
    seeds.json.
    """
    import json
    import shutil

    from trace_selector.atomic import atomic_write

    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError(f"--seeds: need distinct seeds, got {list(seeds)}")
    if jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {jobs}")
    dump_config(cfg, cfg.run_dir / "config.yaml")  # what --resume reads back
    subs = [replace(cfg, seed=seed, name=f"{cfg.name or cfg.setting}/seed-{seed}") for seed in seeds]
    pending = [s for s in subs if not (s.run_dir / "seed.json").is_file()]
    trained = _in_parallel(cfg, pending, resume, jobs) if jobs > 1 and len(pending) > 1 else {}
    results: list[tuple[dict[str, Any], TrainResult]] = []  # (its seeds.json row, the run) per seed
    for sub in subs:
        done = sub.run_dir / "seed.json"
        if sub.seed in trained:
            row, result = trained[sub.seed]
        elif done.is_file():
            row = json.loads(done.read_text())
            result = TrainResult(sub.run_dir, sub.run_dir / "checkpoints" / "best.ckpt", None, sub.run_dir / "selector",
                                 row["val_acc"], row["val_majority"], row["global_step"], row["score"])
        else:
            row, result = train_one_seed(sub, resume)
        results.append((row, result))
    ranked = [r for r in results if r[1].best_score is not None and r[1].selector_dir is not None]
    if not ranked:
        raise InputError(f"{cfg.run_dir}: no seed produced a validated checkpoint")
    chosen_row, chosen = max(ranked, key=lambda r: r[1].best_score)  # max keeps the first of equals
    target = cfg.run_dir / "selector"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(chosen.selector_dir, target)
    table = [{**row, "chosen": row is chosen_row} for row, _ in results]
    for folder in (cfg.run_dir, target):  # the selector carries the table its card points to
        with atomic_write(folder / "seeds.json") as fh:
            json.dump({"monitor": cfg.optim.monitor, "seeds": table}, fh, indent=2)
            fh.write("\n")
    if (target / "README.md").is_file():
        from trace_selector.model.hub import relocate_card

        every = ", ".join(str(row["seed"]) for row, _ in results)
        relocate_card(target, chosen.selector_dir, {"seed": f"{chosen_row['seed']} (the best on validation of "
                                                            f"seeds {every}; every seed's scores in `seeds.json`)"})
    return replace(chosen, run_dir=cfg.run_dir, selector_dir=target), table

"""Graph-building throughput: WebQA graphs per second at K=16, cold vs warm embedding cache.

Builds the graphs of a synthetic pool (`trace_selector.records.synthetic`, 50 questions x 16 trajectories,
1-3 searches of 3 chunks each) with the packaged all-MiniLM-L6-v2 encoder and prints one line per
condition:

- structure only: planning nodes and edges, no embeddings (the builder's own cost);
- hash encoder: full build with the stand-in encoder (builder + tensors, no model);
- cold cache: fresh cache folder, model loaded and every distinct text encoded;
- warm cache, new process state: a new `TextEncoder` on the same folder (no model load);
- graph cache: `load_or_build` reading the saved graphs.

Run:
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/graph_build.py [--questions 50] [--k 16] [--bf16] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--bf16", action="store_true", help="encode in bfloat16")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    args = ap.parse_args()

    import torch
    import torch_geometric.data  # noqa: F401  (import cost, ~5-15 s here, kept out of the timings)

    if args.threads:
        torch.set_num_threads(args.threads)

    from trace_selector.graph import GraphOptions, build_graphs, plan_graph
    from trace_selector.graph.dataset import load_or_build
    from trace_selector.graph.encoder import HashEncoder, TextEncoder
    from trace_selector.records.synthetic import SyntheticConfig, make_pool

    pool = make_pool(SyntheticConfig(questions=args.questions, k=args.k, k_min=args.k, seed=0))
    n = len(pool.groups)
    trajs = sum(len(g.trajectories) for g in pool.groups)
    opts = GraphOptions(kind="webqa")
    dtype = "bfloat16" if args.bf16 else "float32"
    rows: list[tuple[str, float, str]] = []

    t = time.perf_counter()
    plans = [plan_graph(g, opts) for g in pool.groups]
    rows.append(("structure only", time.perf_counter() - t, ""))
    texts = [x for p in plans for x in p.all_texts()]
    nodes = sum(sum(len(v) for v in p.texts.values()) for p in plans)
    edges = sum(len(s) for p in plans for s, _ in p.edges.values())

    t = time.perf_counter()
    build_graphs(pool, HashEncoder(384), opts)
    rows.append(("hash encoder (no model)", time.perf_counter() - t, ""))

    with tempfile.TemporaryDirectory() as tmp:
        emb, gdir = Path(tmp) / "emb", Path(tmp) / "graphs"
        t = time.perf_counter()
        cold = TextEncoder(cache_dir=emb, batch_size=args.batch_size, dtype=dtype)
        cold.dim  # loads the model
        load_s = time.perf_counter() - t
        t = time.perf_counter()
        graphs, report = build_graphs(pool, cold, opts)
        rows.append(("cold cache (model loaded before)", time.perf_counter() - t, str(cold.last)))
        rows.append(("cold cache incl. model load", time.perf_counter() - t + load_s, f"model load {load_s:.2f}s"))

        t = time.perf_counter()
        warm = TextEncoder(cache_dir=emb, batch_size=args.batch_size, dtype=dtype)
        build_graphs(pool, warm, opts)
        rows.append(("warm cache, new encoder", time.perf_counter() - t, str(warm.last)))

        t = time.perf_counter()
        build_graphs(pool, warm, opts)
        rows.append(("warm cache, same encoder", time.perf_counter() - t, str(warm.last)))

        load_or_build(pool, warm, opts, cache_dir=gdir)
        t = time.perf_counter()
        gs = load_or_build(pool, warm, opts, cache_dir=gdir)
        size = gs.path.stat().st_size / 2**20
        rows.append(("graph cache load (torch.load)", time.perf_counter() - t, f"{size:.1f} MiB file"))

    print(f"pool: {n} questions x K={args.k} ({trajs} trajectories, {report.retained} kept), "
          f"{nodes} nodes, {edges} edges, {len(texts)} node texts / {len(set(texts))} distinct; "
          f"dtype {dtype}, {torch.get_num_threads()} torch threads, load average {os.getloadavg()[0]:.1f}")
    print(f"{'condition':34s} {'seconds':>8s} {'graphs/s':>9s}  notes")
    for name, sec, note in rows:
        print(f"{name:34s} {sec:8.3f} {n / sec:9.1f}  {note}")


if __name__ == "__main__":
    main()

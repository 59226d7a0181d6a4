"""Selector throughput: training graphs/s, and scoring questions/s at K=16 with a cold and a warm
embedding cache (end to end: pool -> graphs -> scores -> selections), for the reference fp32 torch
encoder and a fast runtime side by side, against majority voting on the same pool, in one run.

    .venv/bin/python benchmarks/selector_throughput.py                  # synthetic pool, all-MiniLM-L6-v2
    .venv/bin/python benchmarks/selector_throughput.py --encoder bow    # no model load
    .venv/bin/python benchmarks/selector_throughput.py --pool data/pools/wikileads-0.5b-dev.jsonl.gz \
        --checkpoint checkpoints/wikileads --threads 2                  # the real 300 x 16 pool

Without --pool the pool is synthetic (trace_selector/records/synthetic.py) with K trajectories per question;
without --checkpoint the network is untrained (speed does not depend on the weights) with the default
architecture unless told. "cold" starts from an empty on-disk cache (model load, ONNX export from a
cache kept across runs, encoding); "warm" is a fresh encoder over the filled cache. Speed is shown as
ratios from this one run, so a busy machine slows every row alike.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch_geometric.loader import DataLoader

from trace_selector.graph import build_graphs, embed_plans, graph_options, plan_graphs
from trace_selector.graph.encoder import BagOfWordsEncoder, TextEncoder, make_encoder, parse_runtime
from trace_selector.model import ModelConfig, SelectorNet, selection_loss
from trace_selector.records.synthetic import SyntheticConfig, make_pool
from trace_selector.selector import Selector, score_plans, selections_from_plans


def train_rate(graphs: list, cfg: ModelConfig, batch_size: int, epochs: int) -> float:
    """Graphs per second of forward + backward + AdamW step (no Lightning overhead)."""
    net = SelectorNet(cfg).train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    loader = DataLoader(graphs, batch_size=batch_size, shuffle=True)
    seen, t0 = 0, time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            scores = net(batch)
            loss = selection_loss(scores, batch["answer"].y, batch["answer"].batch).total
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += batch.num_graphs
    return seen / (time.perf_counter() - t0)


def runtime_encoder(encoder: str, dim: int, cache: str, runtime: str, threads: int, root: str):
    """The encoder of one row: embeddings cached in `cache`, ONNX exports shared under `root`."""
    if encoder != "all-MiniLM-L6-v2":
        return make_encoder(encoder, dim, cache)
    backend, dtype = parse_runtime(runtime)
    return TextEncoder(cache_dir=cache, dtype=dtype, backend=backend, threads=threads,
                       export_dir=Path(root) / "onnx")


def score_rows(pool, net, encoder: str, runtimes: list[str], threads: int, cache_root: str) -> list[tuple]:
    """(runtime, cache, questions/s, graphs+embed s, network s, load s) for a cold then a warm cache."""
    import tempfile

    rows = []
    for runtime in runtimes:
        with tempfile.TemporaryDirectory(dir=cache_root) as cache:
            for label in ("cold", "warm"):
                # A fresh encoder each time, so "warm" means the on-disk cache, not process memory.
                t0 = time.perf_counter()
                enc = runtime_encoder(encoder, net.config.embed_dim, cache, runtime, threads, cache_root)
                selector = Selector(net, encoder=enc, batch_size=64)
                t1 = time.perf_counter()
                # Selector.select() in two timed halves: graph plans + embeddings, then the network.
                plans, _ = plan_graphs(pool, graph_options(net.config))
                rows_, table = embed_plans(plans, selector.encoder)
                t2 = time.perf_counter()
                picks = selections_from_plans(plans, score_plans(net, plans, rows_, table, 64))
                t3 = time.perf_counter()
                assert len(picks) == len(plans)
                rows.append((runtime if encoder == "all-MiniLM-L6-v2" else encoder, label,
                             len(pool.groups) / (t3 - t0), t2 - t1, t3 - t2, t1 - t0))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=64, help="synthetic pool size (or first N of --pool)")
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--pool", default=None, help="real pool instead of a synthetic one")
    ap.add_argument("--checkpoint", default=None, help="trained selector (default: an untrained network)")
    ap.add_argument("--encoder", default="all-MiniLM-L6-v2", help='"all-MiniLM-L6-v2" or "bow"')
    ap.add_argument("--runtimes", default="torch,onnx-int8", help="encoder runtimes to compare, reference first")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-train", action="store_true", help="skip the training-rate measurement")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    if args.pool:
        from trace_selector.evaluate import restrict
        from trace_selector.records import Pool, read_pool

        full = read_pool(args.pool)
        pool = Pool(groups=restrict(full.groups[: args.questions], args.k), meta=full.meta, path=full.path)
    else:
        pool = make_pool(SyntheticConfig(questions=args.questions, k=args.k, k_min=args.k, seed=1))
    n_q = len(pool.groups)
    n_traj = sum(len(g.trajectories) for g in pool.groups)
    print(f"pool: {pool.path or 'synthetic'}: {n_q} questions, K={args.k} ({n_traj} trajectories); "
          f"torch threads {args.threads}")

    if not args.no_train:
        # Training rate on prebuilt graphs (bag-of-words features: the encoder does not matter here).
        bow = BagOfWordsEncoder(384)
        cfg = ModelConfig(embed_dim=384, hidden=args.hidden, layers=args.layers, encoder="bow")
        graphs, _ = build_graphs(pool, bow, graph_options(cfg))
        nodes = sum(g.num_nodes for g in graphs) / len(graphs)
        edges = sum(g.num_edges for g in graphs) / len(graphs)
        rate = train_rate(graphs, cfg, args.batch_size, epochs=2)
        print(f"graph size: {nodes:.0f} nodes, {edges:.0f} edges per question")
        print(f"training: {rate:.1f} graphs/s (hidden {args.hidden}, L={args.layers}, batch {args.batch_size})")

    if args.checkpoint:
        from trace_selector.model import SelectorNet

        net = SelectorNet.load_checkpoint(args.checkpoint)
    else:
        net = SelectorNet(ModelConfig(embed_dim=384 if args.encoder != "bow" else 128, hidden=args.hidden,
                                      layers=args.layers, encoder=args.encoder))
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()] if args.encoder == "all-MiniLM-L6-v2" else ["torch"]
    with tempfile.TemporaryDirectory() as root, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an untrained or torch-trained net scored with another runtime
        for runtime in runtimes:  # the one-time ONNX export is setup, not part of a cold run
            enc = runtime_encoder(args.encoder, net.config.embed_dim, root, runtime, args.threads, root)
            if getattr(enc, "backend", "torch") == "onnx":
                t0 = time.perf_counter()
                enc._load_onnx()
                print(f"one-time export of {runtime}: {time.perf_counter() - t0:.1f}s (cached, checksummed)")
        rows = score_rows(pool, net, args.encoder, runtimes, args.threads, root)

    from trace_selector.baselines.registry import build_fast

    t0 = time.perf_counter()
    build_fast("majority").select(pool.groups)
    majority_qps = n_q / (time.perf_counter() - t0)

    ref = rows[0][2]
    print(f"\nscoring at K={args.k}, encoder {args.encoder}")
    print(f"{'runtime':<11} {'cache':<5} {'questions/s':>12} {'x ' + rows[0][0] + ' cold':>14} {'x majority':>11} "
          f"{'plans+embed s':>15} {'network s':>10} {'load s':>7}")
    for runtime, label, qps, g, n, load in rows:
        print(f"{runtime:<11} {label:<5} {qps:>12.1f} {qps / ref:>14.2f} {qps / majority_qps:>11.4f} "
              f"{g:>15.2f} {n:>10.2f} {load:>7.2f}")
    print(f"majority    -     {majority_qps:>12.1f}")


if __name__ == "__main__":
    main()

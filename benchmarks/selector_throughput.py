"""Selector throughput: training graphs/s, and scoring questions/s at K=16 with a cold and a warm
embedding cache (end to end: pool -> graphs -> scores -> selections).

    .venv/bin/python benchmarks/selector_throughput.py                  # all-MiniLM-L6-v2, ~2 min
    .venv/bin/python benchmarks/selector_throughput.py --encoder bow    # no model load

Pools are synthetic (trace_selector/synthetic.py) with K=16 trajectories per question; the network
is untrained (speed does not depend on the weights) with the default architecture unless told.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch
from torch_geometric.loader import DataLoader

from trace_selector.graph import build_graphs
from trace_selector.model import ModelConfig, SelectorNet, selection_loss
from trace_selector.selector import Selector, graph_options, make_encoder, score_graphs, selections_from_scores
from trace_selector.synthetic import BagOfWordsEncoder, SyntheticConfig, make_pool


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=64)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--encoder", default="all-MiniLM-L6-v2", help='"all-MiniLM-L6-v2" or "bow"')
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    pool = make_pool(SyntheticConfig(questions=args.questions, k=args.k, k_min=args.k, seed=1))
    n_traj = sum(len(g.trajectories) for g in pool.groups)
    print(f"pool: {args.questions} questions, K={args.k} ({n_traj} trajectories); torch threads {args.threads}")

    # Training rate on prebuilt graphs (bag-of-words features: the encoder does not matter here).
    bow = BagOfWordsEncoder(384)
    cfg = ModelConfig(embed_dim=384, hidden=args.hidden, layers=args.layers, encoder="bow")
    graphs, _ = build_graphs(pool, bow, graph_options(cfg))
    nodes = sum(g.num_nodes for g in graphs) / len(graphs)
    edges = sum(g.num_edges for g in graphs) / len(graphs)
    rate = train_rate(graphs, cfg, args.batch_size, epochs=2)
    print(f"graph size: {nodes:.0f} nodes, {edges:.0f} edges per question")
    print(f"training: {rate:.1f} graphs/s (hidden {args.hidden}, L={args.layers}, batch {args.batch_size})")

    rows = []
    net = SelectorNet(ModelConfig(embed_dim=384 if args.encoder != "bow" else 128, hidden=args.hidden,
                                  layers=args.layers, encoder=args.encoder))
    with tempfile.TemporaryDirectory() as cache:
        for label in ("cold cache", "warm cache"):
            # A fresh encoder each time, so "warm" means the on-disk cache, not process memory.
            t0 = time.perf_counter()
            enc = make_encoder(args.encoder, net.config.embed_dim, cache)
            selector = Selector(net, encoder=enc, batch_size=64)
            t1 = time.perf_counter()
            graphs, _ = selector.graphs(pool)
            t2 = time.perf_counter()
            # Selector.select() in two timed halves: graphs (+ embeddings), then the network.
            picks = selections_from_scores(graphs, score_graphs(net, graphs, 64))
            t3 = time.perf_counter()
            assert len(picks) == args.questions
            total = t3 - t0
            rows.append((label, args.questions / total, t2 - t1, t3 - t2, t1 - t0))
    print(f"\nscoring at K={args.k}, encoder {args.encoder}")
    print(f"{'':<11} {'questions/s':>12} {'graphs+embed s':>15} {'network s':>10} {'load s':>7}")
    for label, qps, g, n, load in rows:
        print(f"{label:<11} {qps:>12.1f} {g:>15.2f} {n:>10.2f} {load:>7.2f}")


if __name__ == "__main__":
    main()

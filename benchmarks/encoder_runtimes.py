"""Text-encoder runtimes side by side, in one run: texts/s of each runtime on a pool's texts, and what
the switch does to the selector's picks (identical picks, EM, EM difference against fp32 torch).

    .venv/bin/python benchmarks/encoder_runtimes.py --pool data/pools/wikileads-0.5b-dev10-k8.jsonl.gz
    .venv/bin/python benchmarks/encoder_runtimes.py --pool data/pools/wikileads-0.5b-dev.jsonl.gz --threads 2

Every runtime starts cold (a memory-only cache, model loaded before the clock starts) and encodes the
same distinct texts, those of the pool's graphs under the checkpoint's graph options, in one call;
the selector then scores the pool from those vectors. A pick is the answer a selector returns, so
agreement counts questions whose picked answers are the same after normalisation; the share of
identical picked trajectories is shown too (two trajectories with one answer are interchangeable).
A fast runtime is fit to be the default when its answers agree with fp32 torch on at least 99% of
questions and its EM is within 0.5 points (issue 13).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

AGREE_MIN = 0.99
"""Fraction of identical picks a runtime needs to replace fp32 torch as the default."""
EM_TOLERANCE = 0.5
"""Largest EM difference (points) a runtime may have against fp32 torch to become the default."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pool", required=True, help="rollout pool (the dev pool for the agreement table)")
    p.add_argument("--checkpoint", default="checkpoints/wikileads", help="selector checkpoint folder")
    p.add_argument("--runtimes", default="torch,onnx,onnx-int8", help="comma-separated; the first is the reference")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of every encoder and of the network")
    p.add_argument("--questions", type=int, default=None, help="first N questions only")
    p.add_argument("--json", default=None, help="write the table (and every runtime's picks) as JSON here too")
    a = p.parse_args(argv)

    import torch

    from trace_selector.graph import embed_plans, plan_graphs
    from trace_selector.model import SelectorNet
    from trace_selector.records.answers import normalize_answer
    from trace_selector.records import Pool, read_pool
    from trace_selector.graph import graph_options
    from trace_selector.graph.encoder import make_encoder
    from trace_selector.selector import score_plans, selections_from_plans

    torch.set_num_threads(a.threads)
    pool = read_pool(a.pool)
    if a.questions:
        pool = Pool(groups=pool.groups[: a.questions], meta=pool.meta, path=pool.path)
    net = SelectorNet.load_checkpoint(a.checkpoint)
    options = graph_options(net.config)
    runtimes = [r.strip() for r in a.runtimes.split(",") if r.strip()]
    print(f"pool {a.pool}: {len(pool.groups)} questions; checkpoint {a.checkpoint} "
          f"(trained on {net.config.encoder_runtime}); {a.threads} thread(s)")

    rows = []
    for runtime in runtimes:
        enc = make_encoder(net.config.encoder, net.config.embed_dim, None, runtime, a.threads)
        t0 = time.perf_counter()
        enc.encode(["warm-up: load the model (and export it for onnx) before the clock starts"])
        load_s = time.perf_counter() - t0
        plans, _ = plan_graphs(pool, options)
        text_rows, vectors = embed_plans(plans, enc)
        encode_s = enc.last.seconds
        picks = selections_from_plans(plans, score_plans(net, plans, text_rows, vectors, 64))
        em = 100 * sum(p.correct or 0.0 for p in picks.values()) / len(pool.groups)
        rows.append({"runtime": runtime, "texts": enc.last.encoded, "encode_s": encode_s,
                     "texts_per_s": enc.last.encoded / encode_s, "load_s": load_s, "em": em,
                     "picks": {q: s.sample_id for q, s in picks.items()}})
        print(f"  {runtime}: {enc.last.encoded} texts in {encode_s:.1f}s (load/export {load_s:.1f}s), EM {em:.2f}")

    answer = {(g.question_id, t.sample_id): normalize_answer(t.answer) for g in pool.groups for t in g.trajectories}
    ref = rows[0]
    n = max(len(ref["picks"]), 1)
    print(f"\n{'runtime':<11} {'texts/s':>8} {'x ' + ref['runtime']:>9} {'same answer':>12} {'same traj':>10} "
          f"{'EM':>6} {'dEM':>6}  default-fit")
    table = []
    for r in rows:
        same_traj = sum(r["picks"].get(q) == s for q, s in ref["picks"].items()) / n
        same = sum(answer.get((q, r["picks"].get(q))) == answer[(q, s)] for q, s in ref["picks"].items()) / n
        d_em = r["em"] - ref["em"]
        fit = same >= AGREE_MIN and abs(d_em) <= EM_TOLERANCE
        print(f"{r['runtime']:<11} {r['texts_per_s']:>8.1f} {r['texts_per_s'] / ref['texts_per_s']:>9.2f} "
              f"{100 * same:>11.1f}% {100 * same_traj:>9.1f}% {r['em']:>6.2f} {d_em:>+6.2f}  {'yes' if fit else 'no'}")
        table.append(r | {"same_answers": same, "same_trajectories": same_traj, "d_em": d_em, "fit": fit})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pool": a.pool, "threads": a.threads, "rows": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

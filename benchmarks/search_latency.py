"""BM25 search latency over the wikileads passage corpus: index build time, then per-query latency
of single queries and of batched queries, printed side by side.

    .venv/bin/python benchmarks/search_latency.py                       # prepared wikileads setting
    .venv/bin/python benchmarks/search_latency.py --setting DIR --queries 500 --k 3 --batch 64

Queries are the setting's dev questions (raw text, as an agent's first search would be). The index
is rebuilt from the setting's corpus in this process so the build time is measured; the first query
(which pays for imports and the sparse-matrix view) is timed separately as "first query".
"""

from __future__ import annotations

import argparse
import statistics
import time


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setting", default="wikileads", help="setting name or folder (default: wikileads)")
    ap.add_argument("--queries", type=int, default=500, help="number of queries (default 500)")
    ap.add_argument("--k", type=int, default=3, help="passages per query (default 3)")
    ap.add_argument("--batch", type=int, default=64, help="queries per batched call (default 64)")
    a = ap.parse_args()

    from trace_selector.search.bm25 import BM25Index
    from trace_selector.search.corpus import read_corpus
    from trace_selector.search.setting import load_setting

    s = load_setting(a.setting)
    split = "dev" if "dev" in s.splits else s.splits[0]
    queries = [q.question for q in s.questions(split)][: a.queries]

    t = time.perf_counter()
    passages = read_corpus(s.corpus)
    t_read = time.perf_counter() - t
    t, c = time.perf_counter(), time.process_time()
    index = BM25Index.build(passages)
    t_build, c_build = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    loaded = BM25Index.load(s.index_dir)
    t_load = time.perf_counter() - t

    t = time.perf_counter()
    index.search(queries[0], a.k)
    t_first = time.perf_counter() - t
    single = []
    for q in queries:
        t = time.perf_counter()
        index.search(q, a.k)
        single.append(time.perf_counter() - t)
    batched = []
    for start in range(0, len(queries), a.batch):
        chunk = queries[start : start + a.batch]
        t = time.perf_counter()
        index.search_batch(chunk, a.k)
        batched.append((time.perf_counter() - t) / len(chunk))
    assert loaded.search_batch(queries[:50], a.k) == index.search_batch(queries[:50], a.k)

    ms = 1000.0
    print(f"corpus {s.corpus} : {len(passages)} passages, {index.info['vocab_size']} terms; "
          f"{len(queries)} {split} queries, k={a.k}")
    # CPU seconds next to wall seconds: on a shared machine the wall figure mostly measures the neighbours.
    print(f"read corpus {t_read:.2f} s | build index {t_build:.2f} s (cpu {c_build:.2f} s) | "
          f"load saved index {t_load:.2f} s | "
          f"first query {t_first * ms:.1f} ms")
    print(f"{'per query':<24}{'mean ms':>10}{'p50 ms':>10}{'p95 ms':>10}{'q/s':>10}")
    print(f"{'single':<24}{statistics.mean(single) * ms:>10.2f}{_pct(single, .5) * ms:>10.2f}"
          f"{_pct(single, .95) * ms:>10.2f}{1 / statistics.mean(single):>10.0f}")
    print(f"{f'batched ({a.batch}/call)':<24}{statistics.mean(batched) * ms:>10.2f}{_pct(batched, .5) * ms:>10.2f}"
          f"{_pct(batched, .95) * ms:>10.2f}{1 / statistics.mean(batched):>10.0f}")


if __name__ == "__main__":
    main()

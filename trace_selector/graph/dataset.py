"""Graphs of a pool built once and kept on disk, so training epochs and repeated evaluations load
them instead of rebuilding.

The cache file is keyed by what determines the graphs: a fingerprint of the pool's graph-relevant
content (not its path or mtime), the encoder identity, the `GraphOptions` and the graph format
version. It is written atomically, so a crash never leaves a truncated file behind.

    gs = load_or_build(pool, TextEncoder(cache_dir=emb_dir), GraphOptions(), cache_dir=graph_dir)
    loader = torch_geometric.loader.DataLoader(gs.graphs, batch_size=8, shuffle=True)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from trace_selector.atomic import atomic_write
from trace_selector.graph.pipeline import build_graphs
from trace_selector.graph.encoder import Encoder
from trace_selector.graph.plan import DropReport, GraphOptions
from trace_selector.records import Pool

GRAPH_FORMAT = 7
"""Bumped whenever the builders change what a graph contains (old cache files are then ignored); 3:
TRACE long-horizon browsing graphs; 4: the answer-mentioned_by-answer bookkeeping relation (subsets);
5: the echo vote column; 6: browsing graphs keep answered trajectories without observations and take
page identity from the returned page's URL header; 7: en/em dashes separate words in the evidence the
grounding features read (`records/evidence.py`), and the sixth vote column (the answer in the last hop)."""


def pool_fingerprint(pool: Pool) -> str:
    """sha256 over every field the graph builders read, in pool order."""
    h = hashlib.sha256()
    for g in pool.groups:
        h.update(json.dumps([g.question_id, g.question, g.golden_answers]).encode())
        for t in g.trajectories:
            steps = [
                [s.action, s.content, s.search_result,
                 [[d.rank, d.title, d.text, d.doc_id, d.url] for d in s.documents]]
                for s in t.steps
            ]
            row = [t.sample_id, t.answer, t.correct, t.style, t.golden_answers, steps]
            h.update(json.dumps(row, ensure_ascii=False).encode())
    return h.hexdigest()


def cache_key(pool: Pool, encoder: Encoder, options: GraphOptions) -> str:
    """File-name key of a pool's graphs under `encoder` and `options`."""
    parts = {
        "pool": pool_fingerprint(pool),
        "encoder": encoder.identity,
        "options": dataclasses.asdict(options),
        "format": GRAPH_FORMAT,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


@dataclass(slots=True)
class GraphSet:
    """Graphs of one pool with their drop report."""

    graphs: list
    """One ``HeteroData`` per question with a retained trajectory, in pool order."""
    report: DropReport
    """What was left out when the graphs were built."""
    path: Path | None
    """Cache file the graphs were loaded from or saved to (None without a cache folder)."""
    cached: bool
    """True if loaded from the cache, False if built by this call."""


def load_or_build(
    pool: Pool, encoder: Encoder, options: GraphOptions | None = None, cache_dir: str | Path | None = None
) -> GraphSet:
    """The pool's graphs from ``cache_dir/graphs-<key>.pt`` if present, else built and saved there."""
    options = options or GraphOptions()
    path = Path(cache_dir) / f"graphs-{cache_key(pool, encoder, options)}.pt" if cache_dir else None
    if path is not None and path.is_file():
        # Our own files: HeteroData objects need full unpickling (weights_only would reject them).
        blob = torch.load(path, weights_only=False)
        return GraphSet(blob["graphs"], DropReport(**blob["report"]), path, True)
    graphs, report = build_graphs(pool, encoder, options)
    if path is not None:
        blob = {
            "graphs": graphs,
            "report": dataclasses.asdict(report),
            "options": dataclasses.asdict(options),
            "encoder": encoder.identity,
            "format": GRAPH_FORMAT,
        }
        with atomic_write(path, "wb") as f:
            torch.save(blob, f)
    return GraphSet(graphs, report, path, False)

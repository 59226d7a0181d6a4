"""Query-evidence graphs of rollout pools (docs/design.md §Graph): one ``HeteroData`` per question.

    from trace_selector.graph import GraphOptions, build_graphs
    from trace_selector.graph.encoder import TextEncoder

    enc = TextEncoder(cache_dir=paths.embeddings_dir())
    graphs, report = build_graphs(pool, enc, GraphOptions())     # all texts encoded in one call
    print(report.to_text())

Node and edge types, and the per-graph tensors, are fixed by `graph/schema.py`; the builders are in
`webqa.py` and `browsing.py`, the shared rules in `plan.py`, the pipeline over a pool in `pipeline.py`,
the on-disk graph cache in `dataset.py`. This file only re-exports.
"""

from trace_selector.graph.pipeline import build_graph, build_graphs, embed_plans, plan_graph, plan_graphs
from trace_selector.graph.plan import DropReport, GraphOptions, graph_options

__all__ = ["DropReport", "GraphOptions", "build_graph", "graph_options", "build_graphs", "embed_plans", "plan_graph", "plan_graphs"]

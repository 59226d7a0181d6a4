"""trace_selector: pick the right answer among K parallel search-agent trajectories.

Layers (lower never imports higher): records/answers/config -> search, rollout, graph -> model ->
train, baselines, evaluate, hub -> cli. Heavy dependencies are imported where they are used.
"""

__version__ = "0.1.0"

"""Rollout: search agents run K times per question through an engine, written to a resumable pool.

- `agent`: the ReAct agent, run on many trajectories at once at the token level (`Accounting` per pool);
- `tools`: the tool protocol and the WebQA `search` tool; `browser_agent`: search / open / find over pages;
- `prompts`: every prompt text; `strategies/`: standard, DivInit, partial rollout, replicas;
- `writer`: the resumable shard and pool lock; `runner`: `trace-selector rollout` (config, loop, metadata).

Engines come from `trace_selector.engines`. Nothing here imports PyG or Lightning; rollout meets the
selector only at the pool file.
"""

"""Answer-selection baselines over a pool's question groups (what each does and where it departs from
its paper: docs/baselines.md).

Fast methods (no model): `voting` (single rollout, majority, weighted by stated confidence, grounded
vote), `confidence` (DeepConf: token-confidence weighted vote with eta filtering), `heuristics`
(fewest / most tool calls, oracle). LLM methods on a rollout `Engine`: `aggregators` (SolAgg,
SummAgg, free answers; their ``_choice`` variants pick a candidate), `aggagent` (AggAgent, with its tools in `inspection`), `judge` (TIPEX rubric judge). Every
method returns one `records.pick.Pick` per group (built with the helpers of `pick`); `registry` builds them by name for `trace_selector.evaluate`.
"""

"""The pool contract: typed rollout-pool records, one `Trajectory` per sampled run of a search agent on a
question, and everything that reads, writes, checks, scores and summarises them.

Modules: `trajectory` (the record types), `codec` (records <-> dicts, observation text, the field
checker), `transcripts` (browsing chat messages -> tool calls and answers), `files` (JSONL / Parquet
files, the meta sidecar, `read_pool` / `write_pool`; `aggagent` maps AggAgent's Parquet rows),
`labels` (a separate file of correctness labels and gold answers),
`answers` (normalisation, EM / F1, the one `vote` and the one `is_correct`), `pick` (what a selection
method returns), `evidence` (what a trajectory read), `summary` (`trace-selector validate`) and
`synthetic` (made-up pools for tests and ablations). Nothing here imports torch, the graph or rollout.

Readers accept the public TRACE raw formats unchanged (WebQA style and browsing style, DESIGN
§Records) as JSONL, gzipped JSONL or Parquet; writers emit a superset (structured documents, raw step
text, per-token log-probabilities, provenance) that the readers also accept. Pool-level metadata lives
in a sidecar ``<pool>.meta.json`` so the pool file itself stays readable by the public tools.

    pool = read_pool("pool.jsonl.gz")          # Pool, trajectories grouped by question
    write_pool(pool, "copy.parquet")           # atomic: temp file, then rename
    trace-selector validate pool.jsonl.gz      # check a file and print `summary.summarize_pool`

Every malformed record raises `FormatError` naming file, line and field. Field paths use 0-based
list indices (``steps[1].search_result`` is the second step). Record rules:

- The style comes from the id key: ``question_index`` (int or str) means WebQA style, ``qid`` browsing.
- WebQA steps without ``documents`` get them parsed from ``search_result`` (strict "Doc i (Title: T)"
  blocks). Browsing records without ``steps`` get them from ``messages`` (`records.transcripts`):
  search -> content=query, documents from "Doc i" blocks or a JSON list of hits; open -> content=url
  or id, one `Document` carrying the url (or doc_id); find -> content=pattern (plus the page's url
  if the call names one); a call to an unknown tool or with unreadable arguments -> "invalid".
- Browsing ``sample_id`` may be given as ``seed`` (sample_id = seed - 42); a missing ``answer`` is
  extracted from the last assistant message (rule in `records.transcripts`).
- TRACE's browser rollouts: a record that carries ``traj_idx``, ``candidate_answer`` or
  ``tool_events`` is in that shape. ``traj_idx`` is the sample id; ``candidate_answer`` is the answer
  when there is no ``answer``; else the last assistant message is the answer, its markers
  (``<answer>``, ``Exact Answer:``, ``\\boxed``) first, the bare message otherwise. ``tool_events`` (used
  when there are no ``steps``; it wins over ``messages``) is a list of typed calls
  ``{"type": "search" | "open" | "find", <arguments>, "output": text}``: the kind in ``type`` (or
  ``tool`` / ``name``, dotted names allowed), the arguments in ``arguments`` (or ``args``) or as the
  event's other fields (``query``; ``url`` / ``docid`` / ``id``; ``pattern``), the reply in ``output``
  (or ``result`` / ``observation`` / ``content``), search hits also as a ``results`` list. They become
  steps by the rules for ``messages`` above. Correctness and gold may come from a separate labels
  file (`records.labels`). This shape is our reading of the TRACE README's description of its
  browser rollouts; its own code was not available to check against, so the fixtures in
  ``tests/data/trace_browser/`` are written by us in that shape.
- An ``open`` by link index (harmony's ``{"id": 0}``) records no document: the index means a
  different page in every trajectory, and the page's own ``URL:`` header identifies it instead.
- ``null`` means absent for optional fields; unknown top-level fields land in `Trajectory.extra`.
- Our writer omits ``documents`` when they equal what the reader would derive, and None fields, so a
  written file reads back equal (``read_pool(p) == pool`` after ``write_pool(pool, p)``).
- Parquet: one row per trajectory; nested fields (steps, messages, lists, unknown fields) are JSON
  strings, named in the schema metadata key ``trace_selector``; native nested Arrow columns from
  other tools are read as they are. AggAgent's published rollout Parquet is read as browsing records
  (mapping in `records.aggagent`).
"""

from trace_selector.records.codec import (
    SearchResultError,
    format_search_result,
    parse_search_result,
    trajectory_from_dict,
    trajectory_to_dict,
    trajectory_to_line,
)
from trace_selector.records.files import (
    iter_trajectories,
    meta_field,
    meta_path,
    read_meta,
    read_pool,
    write_meta,
    write_pool,
)
from trace_selector.records.trajectory import (
    ACTIONS,
    SEED_OFFSET,
    Document,
    Pool,
    PoolMeta,
    QuestionGroup,
    Step,
    Trajectory,
)

__all__ = [
    "ACTIONS", "SEED_OFFSET", "Document", "Pool", "PoolMeta", "QuestionGroup", "SearchResultError", "Step",
    "Trajectory", "format_search_result", "iter_trajectories", "meta_field", "meta_path", "parse_search_result", "read_meta",
    "read_pool", "trajectory_from_dict", "trajectory_to_dict", "trajectory_to_line", "write_meta", "write_pool",
]

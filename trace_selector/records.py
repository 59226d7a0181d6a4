"""Typed rollout-pool records: one `Trajectory` per sampled run of a search agent on a question.

Readers accept the public TRACE raw formats unchanged (WebQA style and browsing style, DESIGN
§Records) as JSONL, gzipped JSONL or Parquet; writers emit a superset (structured documents, raw step
text, per-token log-probabilities, provenance) that the readers also accept. Pool-level metadata lives
in a sidecar ``<pool>.meta.json`` so the pool file itself stays readable by the public tools.

    pool = read_pool("pool.jsonl.gz")          # Pool, trajectories grouped by question
    write_pool(pool, "copy.parquet")           # atomic: temp file, then rename
    trace-selector validate pool.jsonl.gz      # check a file and print `summarize_pool`

Every malformed record raises `FormatError` naming file, line and field. Field paths use 0-based
list indices (``steps[1].search_result`` is the second step). Record rules:

- The style comes from the id key: ``question_index`` (int or str) means WebQA style, ``qid`` browsing.
- WebQA steps without ``documents`` get them parsed from ``search_result`` (strict "Doc i (Title: T)"
  blocks). Browsing records without ``steps`` get them from ``messages`` (`trace_selector.transcripts`):
  search -> content=query, documents from "Doc i" blocks or a JSON list of hits; open -> content=url
  or id, one `Document` carrying the url (or doc_id); find -> content=pattern (plus the page's url
  if the call names one); a call to an unknown tool or with unreadable arguments -> "invalid".
- Browsing ``sample_id`` may be given as ``seed`` (sample_id = seed - 42); a missing ``answer`` is
  extracted from the last assistant message (rule in `trace_selector.transcripts`).
- ``null`` means absent for optional fields; unknown top-level fields land in `Trajectory.extra`.
- Our writer omits ``documents`` when they equal what the reader would derive, and None fields, so a
  written file reads back equal (``read_pool(p) == pool`` after ``write_pool(pool, p)``).
- Parquet: one row per trajectory; nested fields (steps, messages, lists, unknown fields) are JSON
  strings, named in the schema metadata key ``trace_selector``; native nested Arrow columns from
  other tools are read as they are. AggAgent's published rollout Parquet is read as browsing records
  (mapping in `trace_selector.aggagent_rollouts`).
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_selector.atomic import atomic_write
from trace_selector.errors import FormatError, InputError
from trace_selector.recordfile import (
    REQUIRED,
    Checker,
    is_int,
    is_number,
    pool_format,
    read_records,
    show,
    write_records,
)
from trace_selector.transcripts import (
    ToolCall,
    TranscriptError,
    extract_answer,
    extract_confidence,
    final_message,
    tool_calls,
)
from trace_selector.types import Action, PoolStyle

if TYPE_CHECKING:
    from trace_selector.summary import PoolSummary

ACTIONS: tuple[str, ...] = typing.get_args(Action)
"""Step actions in their canonical order."""
SEED_OFFSET = 42
"""Browsing pools number samples by seed starting at 42 (sample_id = seed - 42)."""


@dataclass(slots=True)
class Document:
    """One retrieved passage or page as the agent saw it in an observation."""

    rank: int
    """1-based position in the result list."""
    title: str
    """Title as shown in "Doc i (Title: ...)"."""
    text: str
    """Passage text (without the title)."""
    doc_id: str | None = None
    """Corpus id when the writer knew it (our pools); None for the public raw formats."""
    score: float | None = None
    """Retriever score, if recorded."""
    url: str | None = None
    """Page URL (browsing settings)."""


@dataclass(slots=True)
class Step:
    """One tool call of a trajectory and what came back."""

    action: Action
    """"search", "open", "find" (tool calls) or "invalid" (the model produced no valid action)."""
    content: str
    """The query (search), URL or page id (open), or pattern (find)."""
    search_result: str = ""
    """The observation text exactly as given to the model ("Doc 1 (Title: T) text\\n...")."""
    documents: list[Document] = field(default_factory=list)
    """Structured form of the observation; parsed from `search_result` when a raw pool lacks it."""
    raw_text: str | None = None
    """The model's generated text for this turn (reasoning plus the tool call)."""
    logprobs: list[float] | None = None
    """Log-probability of every sampled token of `raw_text`, in processed mode (after temperature)."""
    tool_start: int | None = None
    """Index into `logprobs` where the tool-call region starts; tokens before it are reasoning."""
    token_conf: list[float] | None = None
    """DeepConf token confidence of every sampled token (minus the mean log-prob of the top-20
    candidates), aligned with `logprobs`; None when the rollout did not record it."""
    prompt_tokens: int | None = None
    """Prompt length of the call that produced this step."""
    cached_tokens: int | None = None
    """Prompt tokens served from the prefix cache for that call."""


@dataclass(slots=True)
class Trajectory:
    """One sampled run of the agent on one question."""

    question_id: str
    """Question key: ``question_index`` (WebQA) or ``qid`` (browsing), as a string."""
    question: str
    """Question text."""
    sample_id: int
    """Index of this trajectory among the question's samples (unique per question)."""
    answer: str
    """Final answer, "" if the run ended without one."""
    steps: list[Step] = field(default_factory=list)
    """Tool calls in order."""
    golden_answers: list[str] = field(default_factory=list)
    """Gold aliases (may be empty in browsing pools that only carry `correct`)."""
    correct: bool | None = None
    """Correctness as stored in the pool (browsing style); None when it must be computed."""
    style: PoolStyle = "webqa"
    """Which public format the record follows."""
    messages: list[dict[str, Any]] | None = None
    """Raw chat messages (browsing style), kept for aggregators that read whole transcripts."""
    final_text: str | None = None
    """The model's last turn (the one containing the answer), for LLM aggregators."""
    final_logprobs: list[float] | None = None
    """Token log-probabilities of the final turn."""
    final_token_conf: list[float] | None = None
    """DeepConf token confidence of the final turn's tokens, aligned with `final_logprobs`."""
    confidence: float | None = None
    """Stated confidence in [0, 1] if the agent was asked for one."""
    finish_reason: str | None = None
    """"answer", "forced" (answered when told to), "no_answer", "length" (forced turn cut by max_tokens),
    "context" (no room left for another turn), ... as recorded by the rollout."""
    parent_sample: int | None = None
    """For branched trajectories (partial rollout): the sample it was branched from."""
    branch_step: int | None = None
    """For branched trajectories: the step index at which it diverged from its parent."""
    seed: int | None = None
    """Sampling seed of this trajectory if one was applied."""
    generated_tokens: int | None = None
    """Tokens generated for this trajectory (all turns)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Unknown top-level fields, preserved on round trip."""


@dataclass(slots=True)
class PoolMeta:
    """Pool-level metadata (sidecar ``<pool>.meta.json``)."""

    setting: str | None = None
    """Search setting name, e.g. "wikileads"."""
    split: str | None = None
    """Question split the pool was drawn from."""
    policy_model: str | None = None
    """Model path or id that generated the trajectories."""
    strategy: str | None = None
    """Rollout strategy: standard, divinit, partial, replicas."""
    sampling: dict[str, Any] = field(default_factory=dict)
    """Sampling parameters (temperature, top_p, max_tokens, ...)."""
    logprob_mode: str | None = None
    """vLLM logprobs mode the log-probabilities were recorded in (e.g. "processed_logprobs")."""
    vllm_version: str | None = None
    """vLLM version that generated the pool."""
    seed: int | None = None
    """Base seed of the run."""
    accounting: dict[str, Any] = field(default_factory=dict)
    """Per-pool totals: generated/prompt/cached tokens, wall seconds, tool calls, diversity figures."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else (strategy parameters, notes)."""


@dataclass(slots=True)
class QuestionGroup:
    """All trajectories of one question."""

    question_id: str
    question: str
    golden_answers: list[str]
    trajectories: list[Trajectory]
    """In file order."""


@dataclass(slots=True)
class Pool:
    """A rollout pool: trajectories grouped by question, in first-seen order."""

    groups: list[QuestionGroup]
    meta: PoolMeta = field(default_factory=PoolMeta)
    path: str | None = field(default=None, compare=False)
    """File it was read from, for messages (not part of equality: a copy written elsewhere is equal)."""

    def trajectories(self) -> Iterator[Trajectory]:
        """All trajectories, group by group."""
        for group in self.groups:
            yield from group.trajectories


# --------------------------------------------------------------------------------------------------
# Observation text: the one formatter agents use, and its parser.

_DOC_START = re.compile(r"^Doc[ \t]*(\d+)", re.MULTILINE)
_TITLE_OPEN = re.compile(r"[ \t]*\(Title:")


class SearchResultError(ValueError):
    """A search observation is not a sequence of "Doc i (Title: T) text" blocks numbered 1..n."""


def format_search_result(docs: Sequence[Document]) -> str:
    """``Doc 1 (Title: T) text`` lines numbered 1..n (ranks are not consulted); "" for no documents.

    This is the observation format of the WebQA agents (Search-R1 style, with a space before the
    parenthesis); `parse_search_result` inverts it for titles without newlines or unbalanced parentheses.
    """
    lines = []
    for i, d in enumerate(docs, 1):
        title = d.title.replace("\n", " ")
        lines.append(f"Doc {i} (Title: {title}) {d.text}")
    return "\n".join(lines)


def parse_search_result(text: str) -> list[Document]:
    """Documents of a "Doc i (Title: T) text" observation; [] for an empty one (no results).

    Accepts Search-R1's ``Doc 1(Title: T)`` (no space) and its ``<information>`` wrapper, multi-line
    passage text and titles with balanced parentheses (``Mercury (planet)``). Raises `SearchResultError` when the first block is
    not ``Doc 1``, the numbering is not 1..n, ``(Title:`` is missing or its parenthesis never closes.
    """
    inner = text.strip()
    if inner.startswith("<information>") and inner.endswith("</information>"):  # Search-R1's prompt wrapper
        text = inner[len("<information>") : -len("</information>")]
    if not text.strip():
        return []
    starts = list(_DOC_START.finditer(text))
    if not starts or text[: starts[0].start()].strip():
        raise SearchResultError("expected the observation to start with 'Doc 1 (Title: ...)'")
    docs = []
    for k, m in enumerate(starts):
        n = int(m.group(1))
        if n != k + 1:
            raise SearchResultError(f"block {k + 1} is numbered 'Doc {n}', expected 'Doc {k + 1}'")
        block = text[m.end() : starts[k + 1].start() if k + 1 < len(starts) else len(text)]
        head = _TITLE_OPEN.match(block)
        if head is None:
            raise SearchResultError(f"'Doc {n}' is not followed by '(Title:'")
        depth, pos = 1, head.end()
        while pos < len(block) and block[pos] != "\n":
            depth += {"(": 1, ")": -1}.get(block[pos], 0)
            if depth == 0:
                break
            pos += 1
        if depth != 0:
            raise SearchResultError(f"'Doc {n} (Title:' has no closing parenthesis on its line")
        body = block[pos + 1 :].rstrip("\r\n")  # the newline before the next block is a separator
        body = body[1:] if body.startswith(" ") else body
        docs.append(Document(rank=n, title=block[head.end() : pos].strip(), text=body))
    return docs


def _browse_documents(text: str) -> list[Document]:
    """Documents of a browsing search reply: "Doc i" blocks or a JSON list of hits, else [] (lenient)."""
    stripped = text.lstrip()
    if stripped.startswith("Doc"):
        try:
            return parse_search_result(text)
        except SearchResultError:
            return []
    if not stripped.startswith("["):
        return []
    try:
        hits = json.loads(stripped)
    except json.JSONDecodeError:
        return []
    docs = []
    for rank, hit in enumerate(hits if isinstance(hits, list) else [], 1):
        if not isinstance(hit, dict):
            return []
        doc_id = next((hit[k] for k in ("docid", "doc_id", "id") if isinstance(hit.get(k), (str, int))), None)
        body = next((hit[k] for k in ("text", "snippet", "contents") if isinstance(hit.get(k), str)), "")
        score = hit.get("score")
        docs.append(Document(
            rank=rank,
            title=hit["title"] if isinstance(hit.get("title"), str) else "",
            text=body,
            doc_id=None if doc_id is None else str(doc_id),
            score=float(score) if is_number(score) else None,
            url=hit["url"] if isinstance(hit.get("url"), str) else None,
        ))
    return docs


def _derived_documents(action: str, text: str, style: str) -> list[Document]:
    """What a reader derives for a step stored without ``documents`` (may raise SearchResultError)."""
    if action != "search":
        return []
    return parse_search_result(text) if style == "webqa" else _browse_documents(text)


# --------------------------------------------------------------------------------------------------
# Records <-> dicts, with validation that names file, line and field.

_SCALAR_KEYS = (
    "question_index", "qid", "question", "sample_id", "seed", "correct", "answer", "final_text",
    "confidence", "finish_reason", "parent_sample", "branch_step", "generated_tokens",
)
_KNOWN_KEYS = frozenset(_SCALAR_KEYS + ("golden_answers", "steps", "messages", "final_logprobs", "final_token_conf"))


def _document_from_dict(c: Checker, d: Any, where: str) -> Document:
    if not isinstance(d, dict):
        c.fail(where, f"expected an object, got {show(d)}")
    return Document(
        rank=c.int_(d, "rank", f"{where}.rank"),
        title=c.str_(d, "title", f"{where}.title"),
        text=c.str_(d, "text", f"{where}.text"),
        doc_id=c.str_(d, "doc_id", f"{where}.doc_id", None),
        score=c.float_(d, "score", f"{where}.score", None),
        url=c.str_(d, "url", f"{where}.url", None),
    )


def _step_from_dict(c: Checker, s: Any, where: str, style: str) -> Step:
    if not isinstance(s, dict):
        c.fail(where, f"expected an object, got {show(s)}")
    action = c.str_(s, "action", f"{where}.action")
    if action not in ACTIONS:
        c.fail(f"{where}.action", f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
    content = c.str_(s, "content", f"{where}.content")
    text = c.str_(s, "search_result", f"{where}.search_result", "")
    if s.get("documents") is not None:
        if not isinstance(s["documents"], list):
            c.fail(f"{where}.documents", f"expected a list, got {show(s['documents'])}")
        docs = [_document_from_dict(c, x, f"{where}.documents[{j}]") for j, x in enumerate(s["documents"])]
    else:
        try:
            docs = _derived_documents(action, text, style)
        except SearchResultError as err:
            c.fail(f"{where}.search_result", str(err))
    logprobs = c.float_list(s, "logprobs", f"{where}.logprobs", None)
    token_conf = c.float_list(s, "token_conf", f"{where}.token_conf", None)
    if token_conf is not None and logprobs is not None and len(token_conf) != len(logprobs):
        c.fail(f"{where}.token_conf", f"has {len(token_conf)} values for {len(logprobs)} logprobs")
    return Step(
        action=action,
        content=content,
        search_result=text,
        documents=docs,
        raw_text=c.str_(s, "raw_text", f"{where}.raw_text", None),
        logprobs=logprobs,
        token_conf=token_conf,
        tool_start=c.int_(s, "tool_start", f"{where}.tool_start", None),
        prompt_tokens=c.int_(s, "prompt_tokens", f"{where}.prompt_tokens", None),
        cached_tokens=c.int_(s, "cached_tokens", f"{where}.cached_tokens", None),
    )


def _step_from_call(call: ToolCall) -> Step:
    """A browsing tool call as a Step (rules in the module docstring)."""
    args = call.arguments or {}
    kind = call.short_name
    if kind == "search" and isinstance(args.get("query"), str):
        return Step("search", args["query"], call.output, _browse_documents(call.output))
    if kind == "find" and isinstance(args.get("pattern"), str):
        url = args.get("url")
        page = [Document(rank=1, title="", text="", url=url)] if isinstance(url, str) else []
        return Step("find", args["pattern"], call.output, page)
    if kind == "open" and call.arguments is not None:
        target = next((args[k] for k in ("url", "id", "docid") if isinstance(args.get(k), (str, int))), None)
        if target is None:  # scrolling the current page
            return Step("open", "", call.output)
        if isinstance(target, str) and ("url" in args or "://" in target):
            doc = Document(rank=1, title="", text="", url=target)
        else:
            doc = Document(rank=1, title="", text="", doc_id=str(target))
        return Step("open", str(target), call.output, [doc])
    return Step("invalid", f"{call.name} {call.raw_arguments}", call.output)


def trajectory_from_dict(d: Any, path: str | Path = "<record>", line: int | None = None) -> Trajectory:
    """Parse one raw or superset record; raises `FormatError` naming `path`, `line` and the field."""
    c = Checker(path, line)
    if not isinstance(d, dict):
        c.fail(None, f"expected a JSON object, got {show(d)}")
    if "question_index" in d and "qid" in d:
        c.fail("qid", "record has both 'question_index' (WebQA style) and 'qid' (browsing style)")
    if "question_index" not in d and "qid" not in d:
        c.fail(None, "unknown record format: neither 'question_index' (WebQA style) "
                     "nor 'qid' (browsing style)")
    style: PoolStyle = "webqa" if "question_index" in d else "browsing"
    id_key = "question_index" if style == "webqa" else "qid"
    qid = c.get(d, id_key, id_key, REQUIRED, lambda v: isinstance(v, str) or is_int(v),
                "an integer or a string")

    seed = c.int_(d, "seed", "seed", None)
    if d.get("sample_id") is None and style == "browsing" and seed is not None:
        sample_id, sample_field = seed - SEED_OFFSET, "seed"
    else:
        sample_id, sample_field = c.int_(d, "sample_id", "sample_id"), "sample_id"
    if sample_id < 0:
        how = " (seed - 42)" if sample_field == "seed" else ""
        c.fail(sample_field, f"sample_id must be >= 0, got {sample_id}{how}")

    messages = d.get("messages")
    is_chat = isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
    if messages is not None and not is_chat:
        c.fail("messages", f"expected a list of message objects, got {show(messages)}")
    if d.get("steps") is not None:
        if not isinstance(d["steps"], list):
            c.fail("steps", f"expected a list of steps, got {show(d['steps'])}")
        steps = [_step_from_dict(c, s, f"steps[{i}]", style) for i, s in enumerate(d["steps"])]
    elif style == "webqa" or messages is None:
        c.fail("steps" if style == "webqa" else "messages", "missing")
    else:
        try:
            steps = [_step_from_call(call) for call in tool_calls(messages)]
        except TranscriptError as err:
            c.fail(err.field, err.message)

    final_text = c.str_(d, "final_text", "final_text", None)
    confidence = c.float_(d, "confidence", "confidence", None)
    if d.get("answer") is not None:
        answer = c.str_(d, "answer", "answer")
    elif style == "browsing":
        try:
            last = final_message(messages)
        except TranscriptError as err:
            c.fail(err.field, err.message)
        answer = extract_answer(last)
        confidence = extract_confidence(last) if confidence is None else confidence
        final_text = last if final_text is None else final_text
    else:
        answer = ""
    if confidence is not None and not 0.0 <= confidence <= 1.0:
        c.fail("confidence", f"expected a number in [0, 1], got {confidence}")

    gold_default = [] if style == "browsing" else REQUIRED  # browsing pools may carry only `correct`
    return Trajectory(
        question_id=str(qid),
        question=c.str_(d, "question", "question"),
        sample_id=sample_id,
        answer=answer,
        steps=steps,
        golden_answers=list(c.str_list(d, "golden_answers", "golden_answers", gold_default)),
        correct=c.bool_(d, "correct", "correct", None),
        style=style,
        messages=messages,
        final_text=final_text,
        final_logprobs=c.float_list(d, "final_logprobs", "final_logprobs", None),
        final_token_conf=c.float_list(d, "final_token_conf", "final_token_conf", None),
        confidence=confidence,
        finish_reason=c.str_(d, "finish_reason", "finish_reason", None),
        parent_sample=c.int_(d, "parent_sample", "parent_sample", None),
        branch_step=c.int_(d, "branch_step", "branch_step", None),
        seed=seed,
        generated_tokens=c.int_(d, "generated_tokens", "generated_tokens", None),
        extra={k: v for k, v in d.items() if k not in _KNOWN_KEYS},
    )


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _rounded(values: list[float] | None) -> list[float] | None:
    # Three decimals keep per-token perplexities and confidences exact to 5e-4 (far below what any
    # method here resolves) and cut a pool's size roughly in half.
    return None if values is None else [round(v, 3) for v in values]


def _step_to_dict(s: Step, style: str) -> dict[str, Any]:
    out: dict[str, Any] = {"action": s.action, "content": s.content, "search_result": s.search_result}
    try:
        derivable = _derived_documents(s.action, s.search_result, style) == s.documents
    except SearchResultError:
        derivable = False
    if not derivable:
        out["documents"] = [_drop_none(asdict(doc)) for doc in s.documents]
    out.update(_drop_none({
        "raw_text": s.raw_text, "logprobs": _rounded(s.logprobs), "token_conf": _rounded(s.token_conf),
        "tool_start": s.tool_start,
        "prompt_tokens": s.prompt_tokens, "cached_tokens": s.cached_tokens,
    }))
    return out


def trajectory_to_dict(t: Trajectory) -> dict[str, Any]:
    """The superset record of `t`: its style's public fields first, then ours (None fields omitted)."""
    steps = [_step_to_dict(s, t.style) for s in t.steps]
    if t.style == "webqa":
        out: dict[str, Any] = {
            "question_index": t.question_id, "question": t.question, "golden_answers": list(t.golden_answers),
            "sample_id": t.sample_id, "answer": t.answer, "steps": steps,
        }
    else:
        out = {"qid": t.question_id, "question": t.question, "sample_id": t.sample_id, "answer": t.answer}
        if t.golden_answers:
            out["golden_answers"] = list(t.golden_answers)
        out["steps"] = steps
    out.update(_drop_none({
        "correct": t.correct, "messages": t.messages, "final_text": t.final_text,
        "final_logprobs": _rounded(t.final_logprobs), "final_token_conf": _rounded(t.final_token_conf),
        "confidence": t.confidence, "finish_reason": t.finish_reason,
        "parent_sample": t.parent_sample, "branch_step": t.branch_step, "seed": t.seed,
        "generated_tokens": t.generated_tokens,
    }))
    for key, value in t.extra.items():
        if key in _KNOWN_KEYS or key == "style":
            raise ValueError(f"Trajectory.extra key {key!r} clashes with a record field")
        out[key] = value
    return out


def trajectory_to_line(t: Trajectory) -> str:
    """One JSONL line (with the newline) for `t`, as `write_pool` writes it; for appending writers."""
    return json.dumps(trajectory_to_dict(t), ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------------
# Files.


def _numbered(path: str | Path) -> Iterator[tuple[int, Trajectory]]:
    from trace_selector.aggagent_rollouts import AggAgentRows, is_aggagent_row

    foreign = AggAgentRows(path)  # AggAgent's published rollouts read as browsing records
    for line, record in read_records(path):
        if is_aggagent_row(record):
            record = foreign.to_record(record, line)
        yield line, trajectory_from_dict(record, path, line)


def iter_trajectories(path: str | Path) -> Iterator[Trajectory]:
    """Stream the trajectories of a pool file one by one (per-record checks only; see `read_pool`)."""
    for _, t in _numbered(path):
        yield t


def read_pool(path: str | Path) -> Pool:
    """Read a pool and its sidecar metadata, grouped by question in first-seen order.

    Beyond per-record checks this rejects a duplicate (question, sample_id), a question id whose text
    or gold answers differ between lines, and WebQA- and browsing-style records mixed in one file.
    """
    groups: dict[str, QuestionGroup] = {}
    first: dict[str, int] = {}
    seen: dict[tuple[str, int], int] = {}
    style_line: tuple[str, int] | None = None
    for line, t in _numbered(path):
        if style_line is None:
            style_line = (t.style, line)
        elif t.style != style_line[0]:
            key = "qid" if t.style == "browsing" else "question_index"
            msg = f"{t.style}-style record in a {style_line[0]}-style pool (see line {style_line[1]})"
            raise FormatError(path, line, key, msg)
        key2 = (t.question_id, t.sample_id)
        if key2 in seen:
            msg = f"duplicate trajectory (question {t.question_id!r}, sample_id {t.sample_id}), also on line {seen[key2]}"
            raise FormatError(path, line, "sample_id", msg)
        seen[key2] = line
        group = groups.get(t.question_id)
        if group is None:
            groups[t.question_id] = QuestionGroup(t.question_id, t.question, list(t.golden_answers), [t])
            first[t.question_id] = line
            continue
        if t.question != group.question:
            msg = f"question {t.question_id!r} has a different text on line {first[t.question_id]}"
            raise FormatError(path, line, "question", msg)
        if t.golden_answers != group.golden_answers:
            msg = f"question {t.question_id!r} has different golden_answers on line {first[t.question_id]}"
            raise FormatError(path, line, "golden_answers", msg)
        group.trajectories.append(t)
    return Pool(list(groups.values()), read_meta(path), str(path))


def _check_writable(pool: Pool) -> list[Trajectory]:
    trajectories = list(pool.trajectories())
    if not trajectories:
        raise InputError("refusing to write an empty pool (a pool file needs at least one trajectory)")
    keys = {(t.question_id, t.sample_id) for t in trajectories}
    if len(keys) != len(trajectories):
        raise ValueError("pool has duplicate (question_id, sample_id) pairs")
    if len({t.style for t in trajectories}) > 1:
        raise ValueError("pool mixes WebQA- and browsing-style trajectories")
    for group in pool.groups:
        for t in group.trajectories:
            if (t.question_id, t.question, t.golden_answers) != (group.question_id, group.question, group.golden_answers):
                raise ValueError(f"trajectory {t.sample_id} of {group.question_id!r} disagrees with its group")
    return trajectories


def write_pool(pool: Pool, path: str | Path) -> None:
    """Write `pool` (.jsonl, .jsonl.gz or .parquet by extension) and its ``.meta.json`` sidecar.

    Both files go to temporary siblings first and are renamed into place only when both are complete,
    so an error (or a crash) leaves any existing pool untouched.
    """
    fmt = pool_format(path)
    rows = [trajectory_to_dict(t) for t in _check_writable(pool)]
    mode = "wb" if fmt == "parquet" else "w"
    with atomic_write(meta_path(path)) as meta_file, atomic_write(path, mode) as f:
        write_records(rows, f, fmt, _SCALAR_KEYS)
        meta_file.write(_meta_json(pool.meta))


# --------------------------------------------------------------------------------------------------
# Pool metadata sidecar.


def meta_path(pool_path: str | Path) -> Path:
    """The sidecar of a pool: ``<pool path>.meta.json``."""
    return Path(f"{pool_path}.meta.json")


def _meta_json(meta: PoolMeta) -> str:
    return json.dumps(asdict(meta), ensure_ascii=False, indent=2) + "\n"


def read_meta(pool_path: str | Path) -> PoolMeta:
    """The pool's sidecar metadata, or an empty `PoolMeta` when there is none. Unknown keys go to `extra`."""
    path = meta_path(pool_path)
    if not path.exists():
        return PoolMeta()
    c = Checker(path, None)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        c.fail(None, f"not valid JSON ({err})")
    if not isinstance(d, dict):
        c.fail(None, f"expected a JSON object, got {show(d)}")
    is_dict = lambda v: isinstance(v, dict)  # noqa: E731
    unknown = {k: v for k, v in d.items() if k not in {f.name for f in fields(PoolMeta)}}
    return PoolMeta(
        setting=c.str_(d, "setting", "setting", None),
        split=c.str_(d, "split", "split", None),
        policy_model=c.str_(d, "policy_model", "policy_model", None),
        strategy=c.str_(d, "strategy", "strategy", None),
        sampling=c.get(d, "sampling", "sampling", {}, is_dict, "an object"),
        logprob_mode=c.str_(d, "logprob_mode", "logprob_mode", None),
        vllm_version=c.str_(d, "vllm_version", "vllm_version", None),
        seed=c.int_(d, "seed", "seed", None),
        accounting=c.get(d, "accounting", "accounting", {}, is_dict, "an object"),
        extra={**c.get(d, "extra", "extra", {}, is_dict, "an object"), **unknown},
    )


def write_meta(meta: PoolMeta, pool_path: str | Path) -> None:
    """Write the sidecar ``<pool path>.meta.json`` atomically."""
    with atomic_write(meta_path(pool_path)) as f:
        f.write(_meta_json(meta))


def summarize_pool(path: str | Path) -> PoolSummary:
    """Read and check a pool, then summarise it (see `trace_selector.summary`); `FormatError` if bad."""
    from trace_selector.summary import summarize

    return summarize(read_pool(path))

"""Pool records <-> dicts and observation text, with a checker whose every failure names file, line and field.

A record is one JSON object (a JSONL line or a Parquet row) in either public TRACE format; the rules
for reading and writing it are in the package docstring (`trace_selector.records`). `Checker` gives
typed access to a raw record's fields; `trajectory_from_dict` / `trajectory_to_dict` are the codec;
`format_search_result` / `parse_search_result` are the one observation format of the WebQA agents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from trace_selector.errors import FormatError
from trace_selector.records.trajectory import ACTIONS, SEED_OFFSET, Document, Step, Trajectory
from trace_selector.records.transcripts import (
    ToolCall,
    TranscriptError,
    extract_answer,
    extract_confidence,
    final_message,
    plain_answer,
    tool_calls,
)
from trace_selector.types import PoolStyle

REQUIRED = object()
"""Default of `Checker` getters for a field that must be present."""


def show(v: Any) -> str:
    """Type and a short JSON preview of a value, for messages ("str \"0\"")."""
    text = json.dumps(v, ensure_ascii=False, default=str)
    return f"{type(v).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


class Checker:
    """Typed access to the fields of one raw record; every failure is a `FormatError`.

    Getters take the dict, the key, the field path for messages (``steps[1].content``) and a default;
    a missing or null field returns the default, or fails when the default is `REQUIRED`.
    """

    def __init__(self, path: str | Path, line: int | None):
        self.path, self.line = path, line

    def fail(self, where: str | None, message: str) -> NoReturn:
        raise FormatError(self.path, self.line, where, message)

    def get(self, d: dict, key: str, where: str, default: Any, ok: Callable[[Any], bool], expected: str) -> Any:
        v = d.get(key)
        if v is None:
            if default is REQUIRED:
                self.fail(where, "missing" if key not in d else "is null")
            return default
        if not ok(v):
            self.fail(where, f"expected {expected}, got {show(v)}")
        return v

    def str_(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        return self.get(d, key, where, default, lambda v: isinstance(v, str), "a string")

    def int_(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        return self.get(d, key, where, default, is_int, "an integer")

    def float_(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        v = self.get(d, key, where, default, is_number, "a number")
        return float(v) if is_number(v) else v

    def bool_(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        return self.get(d, key, where, default, lambda v: isinstance(v, bool), "true or false")

    def str_list(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        ok = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
        return self.get(d, key, where, default, ok, "a list of strings")

    def float_list(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        ok = lambda v: isinstance(v, list) and all(is_number(x) for x in v)  # noqa: E731
        v = self.get(d, key, where, default, ok, "a list of numbers")
        return [float(x) for x in v] if isinstance(v, list) else v


def is_int(v: Any) -> bool:
    """An int that is not a bool (JSON true must not pass as 1)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


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

SCALAR_KEYS = (
    "question_index", "qid", "question", "sample_id", "seed", "correct", "answer", "final_text",
    "confidence", "finish_reason", "parent_sample", "branch_step", "generated_tokens",
)
TRACE_KEYS = ("traj_idx", "candidate_answer", "tool_events")
"""Fields of TRACE's browser rollouts that mark a record as that shape (rules in `records`); the reader
turns them into ``sample_id``, ``answer`` and ``steps``, so a written copy carries those instead."""
_KNOWN_KEYS = frozenset(
    SCALAR_KEYS + TRACE_KEYS + ("golden_answers", "steps", "messages", "final_logprobs", "final_token_conf")
)


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
            return Step("open", target, call.output, [Document(rank=1, title="", text="", url=target)])
        if "url" in args or "docid" in args:  # a corpus document id names one page in every trajectory
            return Step("open", str(target), call.output, [Document(rank=1, title="", text="", doc_id=str(target))])
        # harmony's {"id": 0} is the index of a link on the page shown last: "0" is a different page
        # in every trajectory, so it identifies nothing (the page's own "URL:" header does, graph/browsing.py)
        return Step("open", str(target), call.output)
    return Step("invalid", f"{call.name} {call.raw_arguments}", call.output)


def _tool_event_call(c: Checker, event: Any, where: str) -> ToolCall:
    """A typed ``tool_events`` entry as the tool call it records (shape in the `records` docstring)."""
    if not isinstance(event, dict):
        c.fail(where, f"expected an object, got {show(event)}")
    name = next((event[k] for k in ("type", "tool", "name") if isinstance(event.get(k), str)), None)
    if name is None:
        c.fail(f"{where}.type", "missing or not a string")
    args = event.get("arguments", event.get("args"))
    if args is None:
        args = {k: v for k, v in event.items() if k not in _EVENT_KEYS}
    elif not isinstance(args, dict):
        c.fail(f"{where}.arguments", f"expected an object, got {show(args)}")
    output = next((event[k] for k in ("output", "result", "observation", "content") if event.get(k) is not None), "")
    if isinstance(output, (list, dict)):  # structured hits: the reader's JSON hit-list rule applies
        output = json.dumps(output, ensure_ascii=False)
    elif not isinstance(output, str):
        c.fail(f"{where}.output", f"expected a string or a list of hits, got {show(output)}")
    if not output and isinstance(event.get("results"), list):
        output = json.dumps(event["results"], ensure_ascii=False)
    return ToolCall(name, args, json.dumps(args, ensure_ascii=False), output, -1)


_EVENT_KEYS = frozenset({"type", "tool", "name", "output", "result", "observation", "content", "results",
                         "step", "turn", "index", "timestamp", "latency", "error"})
"""Bookkeeping keys of a tool event; the remaining keys are the call's arguments."""


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
    trace_shape = any(d.get(k) is not None for k in TRACE_KEYS)
    if d.get("sample_id") is None and d.get("traj_idx") is not None:
        sample_id, sample_field = c.int_(d, "traj_idx", "traj_idx"), "traj_idx"
    elif d.get("sample_id") is None and style == "browsing" and seed is not None:
        sample_id, sample_field = seed - SEED_OFFSET, "seed"
    else:
        if "sample_id" not in d:
            c.fail("sample_id", "missing (and no traj_idx" + (" or seed)" if style == "browsing" else ")"))
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
    elif d.get("tool_events") is not None and style == "browsing":
        if not isinstance(d["tool_events"], list):
            c.fail("tool_events", f"expected a list of tool events, got {show(d['tool_events'])}")
        steps = [_step_from_call(_tool_event_call(c, e, f"tool_events[{i}]")) for i, e in enumerate(d["tool_events"])]
    elif style == "webqa" or messages is None:
        c.fail("steps" if style == "webqa" else "messages", "missing")
    else:
        try:
            steps = [_step_from_call(call) for call in tool_calls(messages)]
        except TranscriptError as err:
            c.fail(err.field, err.message)

    final_text = c.str_(d, "final_text", "final_text", None)
    confidence = c.float_(d, "confidence", "confidence", None)
    candidate = c.str_(d, "candidate_answer", "candidate_answer", None)
    if d.get("answer") is not None:
        answer = c.str_(d, "answer", "answer")
    elif style == "browsing" and messages is not None:
        try:
            last = final_message(messages)
        except TranscriptError as err:
            c.fail(err.field, err.message)
        if candidate is not None:
            answer = candidate
        else:  # TRACE's browser rollouts end with the bare answer as the last assistant message
            answer = extract_answer(last) or (plain_answer(last) if trace_shape else "")
        confidence = extract_confidence(last) if confidence is None else confidence
        final_text = last if final_text is None else final_text
    else:
        answer = candidate or ""
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

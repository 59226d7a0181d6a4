"""AggAgent's published rollouts (Lee et al. 2025, princeton-pli/AggAgent) as browsing records, so that
`validate`, `evaluate`, `train` and `select` read a pool produced by that project unchanged.

The published files are Parquet with one row per rollout; ``messages``, ``instance``, ``cost``,
``metadata``, ``debug_data`` and ``auto_judge`` are JSON strings (the reference ``hf_to_rollout.py``),
next to plain ``question``, ``prediction``, ``termination`` and ``time`` columns. `records.read_pool`
recognises such a row (no ``qid`` / ``question_index``, but ``messages`` and ``auto_judge``) and maps it:

- ``qid``: ``instance.id`` / ``instance.prompt_id`` / ``instance.qid`` when a non-empty string, else
  ``"q_"`` + the first 12 hex digits of the question's SHA-1 (the reference's file naming);
- ``sample_id``: the row's position among the rows of its question, in file order (the reference's
  ``iter1``, ``iter2``, ...);
- ``correct``: from ``auto_judge``: ``correctness == "correct"`` (BrowseComp and most tasks) or
  ``all_correct`` (DeepSearchQA), as the reference's ``Strategy.is_correct``; no gold aliases are set,
  so evaluation uses this judged correctness rather than exact match (``instance.answer`` is kept as
  ``reference_answer``);
- ``answer``: ``auto_judge.extracted_final_answer`` (the judge's reading); when it is missing or "None",
  the ``Exact Answer:`` line of ``prediction`` (`transcripts.extract_answer`), else the whole prediction; ``confidence``: ``auto_judge.confidence`` / 100; ``final_text``: ``prediction``;
  ``finish_reason``: ``termination``;
- ``messages``: kept, with the tools renamed to ours: ``search`` (a list of queries is joined with
  "; ") and ``visit`` / ``get_document`` -> ``open`` (first url, or the docid); a tool reply that is a
  JSON-encoded string is decoded, so a BrowseComp-Plus hit list parses into documents;
- ``extra["aggagent"]``: ``source`` = "aggagent", ``cost``, ``tool_usage`` (from ``debug_data``),
  ``metadata``, ``time``, ``reference_answer``. The rest of ``debug_data`` (raw responses, a second copy
  of the messages) is dropped.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from trace_selector.errors import FormatError
from trace_selector.records.transcripts import extract_answer

JSON_FIELDS = ("metadata", "instance", "cost", "messages", "debug_data", "auto_judge")
"""Columns the published Parquet stores as JSON strings."""
OPEN_TOOLS = frozenset({"visit", "get_document", "get_document_bcp"})
SEARCH_TOOLS = frozenset({"search", "search_bcp"})


def is_aggagent_row(record: dict[str, Any]) -> bool:
    """True for a row of AggAgent's rollout format (and not one of ours)."""
    return "qid" not in record and "question_index" not in record and "messages" in record and "auto_judge" in record


def question_id(question: str, instance: Any) -> str:
    """The reference's stable question id (see the module docstring)."""
    if isinstance(instance, dict):
        for key in ("id", "prompt_id", "qid"):
            value = instance.get(key)
            if isinstance(value, str) and value:
                return value
    return "q_" + hashlib.sha1(question.encode("utf-8")).hexdigest()[:12]


def judged_correct(judge: dict[str, Any]) -> bool | None:
    """Correctness as the reference reads it; None when the judgement has neither field."""
    if "correctness" in judge:
        return judge["correctness"] == "correct"
    if "all_correct" in judge:
        return judge["all_correct"] is True
    return None


def _rename_call(call: dict[str, Any]) -> dict[str, Any]:
    func = call.get("function")
    if not isinstance(func, dict) or not isinstance(func.get("name"), str):
        return call
    name, raw = func["name"], func.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return call  # the reader records the call as invalid, as the agent's tool did
    if not isinstance(args, dict):
        return call
    if name in SEARCH_TOOLS:
        query = args.get("query")
        new_name, new_args = "search", {"query": "; ".join(map(str, query)) if isinstance(query, list) else query}
    elif name in OPEN_TOOLS:
        url = args.get("url")
        url = url[0] if isinstance(url, list) and url else url
        new_name = "open"
        new_args = {"url": url} if isinstance(url, str) else {"docid": args.get("docid")}
    else:
        return call
    return {**call, "function": {**func, "name": new_name, "arguments": json.dumps(new_args, ensure_ascii=False)}}


def _tool_name(name: Any) -> Any:
    return "search" if name in SEARCH_TOOLS else "open" if name in OPEN_TOOLS else name


def _decoded(content: Any) -> Any:
    """A tool reply the reference stored as ``json.dumps(result)``: the inner text when it was a string."""
    if isinstance(content, str) and content.startswith('"'):
        try:
            inner = json.loads(content)
        except json.JSONDecodeError:
            return content
        return inner if isinstance(inner, str) else content
    return content


def renamed_messages(messages: list[Any]) -> list[Any]:
    """Messages with AggAgent's tool names and arguments mapped to ours (see the module docstring)."""
    out = []
    for m in messages:
        if not isinstance(m, dict):
            out.append(m)
            continue
        m = dict(m)
        if isinstance(m.get("tool_calls"), list):
            m["tool_calls"] = [_rename_call(c) if isinstance(c, dict) else c for c in m["tool_calls"]]
        if m.get("role") == "tool":
            m["name"] = _tool_name(m.get("name"))
            m["content"] = _decoded(m.get("content"))
        out.append(m)
    return out


class AggAgentRows:
    """Maps the rows of one AggAgent rollout file to browsing records, numbering samples per question."""

    def __init__(self, path: str | Path):
        self.path = path
        self.seen: dict[str, int] = {}

    def _fail(self, row: int, field: str, msg: str) -> None:
        raise FormatError(self.path, row, field, f"{msg} (AggAgent rollout row)")

    def to_record(self, raw: dict[str, Any], row: int) -> dict[str, Any]:
        """One browsing-style record dict for `trajectory_from_dict`."""
        d = dict(raw)
        for key in JSON_FIELDS:
            if isinstance(d.get(key), str):
                try:
                    d[key] = json.loads(d[key])
                except json.JSONDecodeError as err:
                    self._fail(row, key, f"not valid JSON ({err.msg} at column {err.colno})")
        question = d.get("question")
        if not isinstance(question, str) or not question:
            instance_q = d.get("instance", {}).get("question") if isinstance(d.get("instance"), dict) else None
            if not isinstance(instance_q, str) or not instance_q:
                self._fail(row, "question", "missing or not a string")
            question = instance_q
        judge = d.get("auto_judge")
        if not isinstance(judge, dict):
            self._fail(row, "auto_judge", "expected a JSON object with the judge's verdict")
        correct = judged_correct(judge)
        if correct is None:
            self._fail(row, "auto_judge.correctness", "missing (neither 'correctness' nor 'all_correct')")
        if not isinstance(d.get("messages"), list):
            self._fail(row, "messages", "expected a JSON list of chat messages")
        qid = question_id(question, d.get("instance"))
        sample_id = self.seen.get(qid, 0)
        self.seen[qid] = sample_id + 1

        prediction = d.get("prediction") if isinstance(d.get("prediction"), str) else ""
        extracted = judge.get("extracted_final_answer")
        if isinstance(extracted, str) and extracted.strip() not in ("", "None"):
            answer = extracted.strip()
        else:  # the judge found none: our reading of the response format ("Exact Answer: ..."), else all of it
            answer = extract_answer(prediction) or prediction.strip()
        confidence = judge.get("confidence")
        instance = d.get("instance") if isinstance(d.get("instance"), dict) else {}
        debug = d.get("debug_data") if isinstance(d.get("debug_data"), dict) else {}
        extra = {"source": "aggagent", "cost": d.get("cost"), "tool_usage": debug.get("tool_usage"),
                 "metadata": d.get("metadata"), "time": d.get("time"), "reference_answer": instance.get("answer")}
        record: dict[str, Any] = {
            "qid": qid, "question": question, "sample_id": sample_id, "correct": correct, "answer": answer,
            "messages": renamed_messages(d["messages"]), "final_text": prediction or None,
            "finish_reason": d.get("termination") if isinstance(d.get("termination"), str) else None,
            "aggagent": {k: v for k, v in extra.items() if v is not None},
        }
        if isinstance(confidence, (int, float)) and not isinstance(confidence, bool) and 0 <= confidence <= 100:
            record["confidence"] = float(confidence) / 100.0
        return record

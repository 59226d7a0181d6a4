"""Browsing-style chat transcripts: the tool calls in them, their outputs, and the final answer.

A browsing pool (DESIGN §Records) stores each trajectory as chat messages. Two encodings of the same
conversation are accepted:

- OpenAI chat: ``{"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name":
  "browser.search", "arguments": "{\\"query\\": ...}"}}]}`` followed by ``{"role": "tool",
  "tool_call_id": "c1", "content": ...}``.
- harmony (gpt-oss): ``{"role": "assistant", "recipient": "browser.search", "content": "<json args>"}``
  followed by a message authored by the tool (``{"role": "tool", "name": "browser.search"}``, or
  ``{"author": {"role": "tool", "name": "browser.search"}}``).

Content may be a string, ``None``, or a list of ``{"type": "text", "text": ...}`` parts. This module
knows nothing about pool records; `trace_selector.records` turns its `ToolCall`s into `Step`s.

Final-answer rule (used only when a record has no ``answer`` field): take the last assistant message
that is not a tool call (a harmony ``channel: "final"`` message wins if there is one), then the last
``<answer>...</answer>`` in it; else the last ``Exact Answer: ...`` line (BrowseComp's response format,
markdown bold allowed); else the last ``\\boxed{...}``; else "" (no answer). TRACE's browser rollouts
write the bare answer as that message, so for them (`records` docstring) a message with none of these
markers is the answer itself (`plain_answer`). A ``Confidence: 80%`` line there gives the stated
confidence (0.8).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_CHAT_ROLES = {"system", "developer", "user", "assistant"}
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_EXACT = re.compile(r"^[\s*#>-]*exact answer[\s*]*:(.*)$", re.IGNORECASE | re.MULTILINE)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_CONFIDENCE = re.compile(
    r"^[\s*#>-]*confidence[\s*]*:[\s*]*([0-9]+(?:\.[0-9]+)?)\s*(%?)", re.IGNORECASE | re.MULTILINE
)


class TranscriptError(ValueError):
    """A message is malformed; `field` is its path inside the record (e.g. ``messages[3].content``)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(slots=True)
class ToolCall:
    """One tool call found in a transcript, paired with the tool's reply."""

    name: str
    """Tool name as written, e.g. "browser.search" (use `short_name` to dispatch)."""
    arguments: dict[str, Any] | None
    """Parsed arguments; None when they were not a JSON object (the model wrote a bad call)."""
    raw_arguments: str
    """Arguments exactly as written (a JSON string)."""
    output: str
    """Text of the tool's reply; "" if no reply followed the call."""
    message: int
    """Index of the message that made the call."""

    @property
    def short_name(self) -> str:
        """Last dotted component: "browser.search" and "functions.search" both give "search"."""
        return self.name.rsplit(".", 1)[-1]


def _role(m: dict[str, Any], where: str) -> str:
    role = m.get("role")
    if role is None and isinstance(m.get("author"), dict):
        role = m["author"].get("role")
    if not isinstance(role, str):
        raise TranscriptError(f"{where}.role", "missing or not a string")
    return role


def _name(m: dict[str, Any]) -> str | None:
    name = m.get("name")
    if name is None and isinstance(m.get("author"), dict):
        name = m["author"].get("name")
    return name if isinstance(name, str) else None


def message_text(m: dict[str, Any], where: str = "message") -> str:
    """The text of a message: a string content, or its text parts joined (non-text parts skipped)."""
    content = m.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if text is not None and not isinstance(text, str):
                    raise TranscriptError(f"{where}.content[{j}].text", "not a string")
                parts.append(text or "")
            else:
                raise TranscriptError(f"{where}.content[{j}]", f"expected a text part, got {type(part).__name__}")
        return "".join(parts)
    raise TranscriptError(f"{where}.content", f"expected a string or a list of parts, got {type(content).__name__}")


def _arguments(raw: Any, where: str) -> tuple[dict[str, Any] | None, str]:
    if isinstance(raw, dict):
        return raw, json.dumps(raw, ensure_ascii=False)
    if not isinstance(raw, str):
        raise TranscriptError(where, f"expected a JSON string or an object, got {type(raw).__name__}")
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return None, raw
    return (parsed if isinstance(parsed, dict) else None), raw


def _is_harmony_call(m: dict[str, Any]) -> bool:
    recipient = m.get("recipient")
    return isinstance(recipient, str) and recipient not in ("all", "user", "assistant", "")


def tool_calls(messages: Any) -> list[ToolCall]:
    """All tool calls of a transcript in order, each with its reply. Raises `TranscriptError`."""
    if not isinstance(messages, list):
        raise TranscriptError("messages", f"expected a list of messages, got {type(messages).__name__}")
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    waiting: list[ToolCall] = []  # calls without a reply yet, oldest first
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise TranscriptError(where, f"expected an object, got {type(m).__name__}")
        role = _role(m, where)
        if role == "assistant" and m.get("tool_calls"):
            raw_calls = m["tool_calls"]
            if not isinstance(raw_calls, list):
                raise TranscriptError(f"{where}.tool_calls", "expected a list")
            for j, tc in enumerate(raw_calls):
                cw = f"{where}.tool_calls[{j}]"
                fn = tc.get("function") if isinstance(tc, dict) else None
                if not isinstance(fn, dict):
                    raise TranscriptError(f"{cw}.function", "missing or not an object")
                if not isinstance(fn.get("name"), str):
                    raise TranscriptError(f"{cw}.function.name", "missing or not a string")
                args, raw = _arguments(fn.get("arguments", "{}"), f"{cw}.function.arguments")
                call = ToolCall(fn["name"], args, raw, "", i)
                calls.append(call)
                waiting.append(call)
                if isinstance(tc.get("id"), str):
                    by_id[tc["id"]] = call
        elif role == "assistant" and _is_harmony_call(m):
            args, raw = _arguments(message_text(m, where), f"{where}.content")
            call = ToolCall(m["recipient"], args, raw, "", i)
            calls.append(call)
            waiting.append(call)
        elif role not in _CHAT_ROLES:  # "tool", or a harmony author named after the tool
            text = message_text(m, where)
            call_id = m.get("tool_call_id")
            call = by_id.get(call_id) if isinstance(call_id, str) else None
            if call is None:
                name = _name(m) or (role if role != "tool" else None)
                # the oldest waiting call of that tool, else the oldest waiting call
                call = next((c for c in waiting if c.name == name), waiting[0] if waiting else None)
            if call is not None:
                call.output = text
                waiting = [c for c in waiting if c is not call]  # by identity: equal calls are distinct
        else:
            message_text(m, where)  # validate the content even when it carries no call
    return calls


def final_message(messages: list[dict[str, Any]]) -> str | None:
    """Text of the last assistant message that is not a tool call (a harmony final message wins)."""
    candidates = [
        (i, m)
        for i, m in enumerate(messages)
        if _role(m, f"messages[{i}]") == "assistant" and not m.get("tool_calls") and not _is_harmony_call(m)
    ]
    finals = [c for c in candidates if c[1].get("channel") == "final"]
    for i, m in reversed(finals or candidates):
        text = message_text(m, f"messages[{i}]")
        if text.strip():
            return text
    return None


def extract_answer(text: str | None) -> str:
    """The final answer stated in `text` by the rule in the module docstring; "" if none."""
    if not text:
        return ""
    for pattern in (_ANSWER_TAG, _EXACT, _BOXED):
        found = pattern.findall(text)
        if found:
            return found[-1].strip(" \t\r\n*")  # markdown bold around the answer is not part of it
    return ""


def plain_answer(text: str | None) -> str:
    """A final message that is the answer itself (TRACE's browser rollouts): the text stripped of
    surrounding whitespace and markdown bold; "" for none."""
    return (text or "").strip().strip("*").strip()


def extract_confidence(text: str | None) -> float | None:
    """Stated confidence in [0, 1] from a ``Confidence: 80%`` line (values above 1 read as percent)."""
    found = _CONFIDENCE.findall(text or "")
    if not found:
        return None
    value, percent = found[-1]
    conf = float(value)
    if percent or conf > 1:
        conf /= 100
    return min(max(conf, 0.0), 1.0)

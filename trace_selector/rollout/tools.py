"""The tools an agent calls: the `Toolbox` / `ToolSession` protocols, what a call returns, and the WebQA
`search` tool over a BM25 index (the browsing tools are in `browser_agent.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from trace_selector.errors import InputError
from trace_selector.records import Document, Step, format_search_result


@dataclass(slots=True)
class ToolResult:
    """What one tool call returned: the observation body and its structured documents."""

    body: str
    documents: list[Document] = field(default_factory=list)
    ok: bool = True
    """False when the call failed (page not found, nothing matched)."""


class ToolSession(Protocol):
    """Per-trajectory tool state (the browsing agent remembers the last opened page)."""

    def call(self, action: str, content: str) -> ToolResult: ...


class Toolbox(Protocol):
    """The tools of one agent kind."""

    kind: Literal["webqa", "browsing"]

    def session(self, steps: list[Step]) -> ToolSession:
        """A fresh session whose state replays `steps` (the prefix a branch inherits)."""
        ...


class SearchTools:
    """WebQA tool: `search` over a BM25 index (anything with ``search(query, k) -> hits``)."""

    kind: Literal["webqa"] = "webqa"

    def __init__(self, index: Any, top_k: int = 3, doc_chars: int = 360):
        self.index = index
        self.top_k = top_k
        self.doc_chars = doc_chars

    def session(self, steps: list[Step]) -> SearchTools:
        return self  # stateless

    def call(self, action: str, content: str) -> ToolResult:
        hits = self.index.search(content, self.top_k)
        docs = [
            Document(rank=i + 1, title=h.title, text=clip(h.text, self.doc_chars), doc_id=str(h.doc_id),
                     score=None if h.score is None else float(h.score))
            for i, h in enumerate(hits)
        ]
        return ToolResult(format_search_result(docs), docs, ok=bool(docs))


def clip(text: str, limit: int) -> str:
    """`text` with whitespace collapsed, cut to `limit` characters with "..." when longer."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def safe_call(session: ToolSession, action: str, content: str) -> ToolResult:
    # A tool failure (page not found, bad pattern) is an observation for the agent, not a crash.
    try:
        return session.call(action, content)
    except (InputError, ValueError, LookupError) as err:
        return ToolResult(f"Error: {err}", [], ok=False)

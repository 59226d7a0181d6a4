"""Browsing agent tools: `search` / `open` / `find` over the page corpus of a search setting.

The loop, prompts-as-tokens and recording are the ReAct agent's (`agent.py`); only the toolbox
differs. A session remembers the page opened last, so ``<find>word</find>`` searches that page; a
branch of a partial rollout replays the inherited steps to restore it.

    tools = BrowserTools(PageStore.load(setting.pages))
    agent = Agent(engine, tools, AgentConfig(max_turns=6))
"""

from __future__ import annotations

from typing import Any, Literal

from trace_selector.records import Document, Step
from trace_selector.rollout.tools import ToolResult, clip

class BrowserTools:
    """Toolbox over a `PageStore` (``search``, ``get``, ``lines``, ``open``, ``find``)."""

    kind: Literal["browsing"] = "browsing"

    def __init__(self, store: Any, top_k: int = 5, snippet_chars: int = 160, page_chars: int = 1200):
        self.store = store
        self.top_k = top_k
        self.snippet_chars = snippet_chars
        self.page_chars = page_chars

    def session(self, steps: list[Step]) -> BrowserSession:
        session = BrowserSession(self)
        for step in steps:  # replay: the last successfully opened page is the current one
            if step.action == "open" and step.documents and step.documents[0].url:
                session.current = step.documents[0].url
        return session


class BrowserSession:
    """Tool state of one trajectory: the page opened last."""

    def __init__(self, tools: BrowserTools):
        self.tools = tools
        self.current: str | None = None

    def call(self, action: str, content: str) -> ToolResult:
        if action == "search":
            return self._search(content)
        if action == "open":
            return self._open(content)
        if action == "find":
            return self._find(content)
        raise ValueError(f"unknown browsing action {action!r}")

    def _search(self, query: str) -> ToolResult:
        hits = self.tools.store.search(query, self.tools.top_k)
        docs, lines = [], []
        for i, hit in enumerate(hits, start=1):
            url = getattr(hit, "url", None)
            snippet = clip(getattr(hit, "text", ""), self.tools.snippet_chars)
            docs.append(Document(rank=i, title=hit.title, text=snippet, doc_id=getattr(hit, "doc_id", None) or url,
                                 score=_score(hit), url=url))
            lines.append(f"[{i}] {hit.title} ({url}) {snippet}")
        return ToolResult("\n".join(lines), docs, ok=bool(docs))

    def _open(self, target: str) -> ToolResult:
        store = self.tools.store
        page = store.get(target)
        if page is None:
            return ToolResult(f"Page not found: {target}", [], ok=False)
        self.current = page.url
        body = _clip_lines(store.open(page.url), self.tools.page_chars)
        return ToolResult(body, [Document(rank=1, title=page.title, text=body, doc_id=page.url, url=page.url)])

    def _find(self, pattern: str) -> ToolResult:
        if self.current is None:
            return ToolResult("No page is open. Use <open> first.", [], ok=False)
        store = self.tools.store
        page = store.get(self.current)
        needle = pattern.strip().casefold()
        if page is None or not needle or not any(needle in line.casefold() for line in store.lines(page)):
            return ToolResult(store.find(self.current, pattern), [], ok=False)
        body = _clip_lines(store.find(page.url, pattern), self.tools.page_chars)
        return ToolResult(body, [Document(rank=1, title=page.title, text=body, doc_id=page.url, url=page.url)])


def _score(hit: Any) -> float | None:
    score = getattr(hit, "score", None)
    return None if score is None else float(score)


def _clip_lines(text: str, limit: int) -> str:
    # Keep whole numbered lines so the agent can still cite them; mark the cut.
    if len(text) <= limit:
        return text
    out, size = [], 0
    for line in text.splitlines():
        if size + len(line) + 1 > limit:
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out) + "\n..."

"""Whole pages for browsing settings: `search` over pages, `open` a page as numbered lines, `find`
a pattern in it (the browser tools of DESIGN §Rollout).

A page file is JSONL with one page per line: ``{"url", "title", "text"}``. Also read: FlashRAG
``contents`` (quoted title line + text) instead of title/text, and BrowseComp-Plus ``docid``/``text``
rows with a ``url``. URLs are stored in canonical form (`canonical_url`), which is also the page's id
in search results, so every spelling of a URL opens the same page.

    store = PageStore.load("pages.jsonl.gz")          # or a page index folder (faster)
    print(format_results(store.search("nightshade berry", 3)))
    print(store.open("https://en.wikipedia.org/wiki/Tomato"))
    print(store.find("Tomato", "Eurasia"))

Tool outputs are strings meant for the agent; an unknown page is a one-line "Page not found" answer
rather than an exception, because a bad URL from the policy is an observation, not a crash.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trace_selector.errors import FormatError
from trace_selector.records.files import iter_jsonl
from trace_selector.search.bm25 import BM25Index, SearchHit
from trace_selector.search.corpus import Passage, parse_contents, string_field, write_jsonl
from trace_selector.search.urls import canonical_url

SNIPPET_CHARS = 200
"""Characters of page text shown per page-search hit."""


@dataclass(slots=True, frozen=True)
class Page:
    """One browsable page."""

    url: str
    """Canonical URL (the page's identity)."""
    title: str
    """Page title."""
    text: str
    """Full page text; newlines separate paragraphs."""


def read_pages(path: str | Path) -> list[Page]:
    """Pages of a page JSONL file; missing url/text or a duplicate URL raises `FormatError`."""
    pages: list[Page] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        url = canonical_url(string_field(obj, "url", path, lineno))
        if not url:
            raise FormatError(path, lineno, "url", "empty")
        if "text" in obj:
            text = string_field(obj, "text", path, lineno)
            title = string_field(obj, "title", path, lineno, required=False)
        elif "contents" in obj:
            title, text = parse_contents(string_field(obj, "contents", path, lineno))
        else:
            raise FormatError(path, lineno, "text", "missing (need 'text' or 'contents')")
        if url in seen:
            raise FormatError(path, lineno, "url", f"duplicate page {url} (first on line {seen[url]})")
        seen[url] = lineno
        pages.append(Page(url, title, text))
    if not pages:
        raise FormatError(path, None, None, "no pages")
    return pages


def write_pages(pages: Iterable[Page], path: str | Path) -> None:
    """Write pages as ``{"url", "title", "text"}`` JSONL, atomically, in the given order."""
    write_jsonl(({"url": p.url, "title": p.title, "text": p.text} for p in pages), path)


def build_page_index(pages: Sequence[Page]) -> BM25Index:
    """BM25 index whose documents are the pages, with the canonical URL as document id."""
    return BM25Index.build([Passage(p.url, p.title, p.text) for p in pages])


class PageStore:
    """Pages with a BM25 index over them and the three browser tools."""

    def __init__(self, pages: Sequence[Page], index: BM25Index | None = None, line_width: int = 160):
        self.pages = list(pages)
        self.line_width = line_width
        self._by_url = {p.url: p for p in self.pages}
        self._by_title: dict[str, Page] = {}
        for p in self.pages:
            # First page wins on a title clash, exact spelling before case-folded.
            self._by_title.setdefault(p.title, p)
        for p in self.pages:
            self._by_title.setdefault(p.title.casefold(), p)
        self._index = index

    @classmethod
    def load(cls, path: str | Path, line_width: int = 160) -> PageStore:
        """From a page JSONL file (index built in memory) or a page index folder."""
        path = Path(path)
        if path.is_dir():
            index = BM25Index.load(path)
            pages = [Page(p.id, p.title, p.text) for p in index.passages]
            return cls(pages, index, line_width)
        return cls(read_pages(path), None, line_width)

    @property
    def index(self) -> BM25Index:
        if self._index is None:
            self._index = build_page_index(self.pages)
        return self._index

    def get(self, url_or_title: str) -> Page | None:
        """The page with this URL (any spelling) or title (exact, case-folded, or with underscores)."""
        key = url_or_title.strip()
        page = self._by_url.get(canonical_url(key)) or self._by_title.get(key)
        if page is None:
            plain = key.replace("_", " ")
            page = self._by_title.get(plain) or self._by_title.get(plain.casefold())
        return page

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """Top-`k` pages for `query`, each with its URL and a snippet of its text."""
        return [self._snippet(h) for h in self.index.search(query, k)]

    def search_batch(self, queries: Sequence[str], k: int = 5) -> list[list[SearchHit]]:
        """`search` for many queries at once."""
        return [[self._snippet(h) for h in hits] for hits in self.index.search_batch(queries, k)]

    @staticmethod
    def _snippet(hit: SearchHit) -> SearchHit:
        text = hit.text.replace("\n", " ")
        if len(text) > SNIPPET_CHARS:
            text = text[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " ..."
        return SearchHit(hit.rank, hit.doc_id, hit.title, text, hit.score, url=hit.doc_id)

    def lines(self, page: Page) -> list[str]:
        """The page text as display lines: paragraphs wrapped at `line_width` characters."""
        out: list[str] = []
        for para in page.text.split("\n"):
            if para.strip():
                out.extend(textwrap.wrap(para, self.line_width, break_long_words=False, break_on_hyphens=False))
        return out

    def open(self, url_or_title: str, start: int = 0, max_lines: int | None = None) -> str:
        """Page header (URL, title, line range) and numbered lines ``L<i>: text`` from `start`."""
        page = self.get(url_or_title)
        if page is None:
            return f"Page not found: {url_or_title}"
        lines = self.lines(page)
        start = max(0, min(start, len(lines)))
        stop = len(lines) if max_lines is None else min(len(lines), start + max(0, max_lines))
        head = [f"URL: {page.url}", f"Title: {page.title}",
                f"[lines {start}-{max(start, stop - 1)} of {len(lines)}]" if lines else "[empty page]"]
        return "\n".join(head + [f"L{i}: {lines[i]}" for i in range(start, stop)])

    def find(self, url_or_title: str, pattern: str) -> str:
        """Numbered lines of the page containing `pattern` (case-insensitive, literal text)."""
        page = self.get(url_or_title)
        if page is None:
            return f"Page not found: {url_or_title}"
        needle = pattern.strip().casefold()
        if not needle:
            return f"Empty pattern; nothing to find in {page.url}"
        hits = [f"L{i}: {line}" for i, line in enumerate(self.lines(page)) if needle in line.casefold()]
        if not hits:
            return f"No lines matching '{pattern.strip()}' in {page.url}"
        head = [f"URL: {page.url}", f"Title: {page.title}", f"[{len(hits)} lines matching '{pattern.strip()}']"]
        return "\n".join(head + hits)

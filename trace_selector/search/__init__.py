"""Search layer: FlashRAG corpora, an in-process BM25 index, page-level browser tools, and the search
settings built on them (`setting`: corpus + questions + indexes on disk; `wikileads`: the bundled one).

    from trace_selector.search import BM25Index, PageStore, read_corpus
    index = BM25Index.load(setting.index_dir)
    hits = index.search("who directed 2001 a space odyssey", k=3)

Nothing here imports `bm25s` (and so numba) until an index is built or loaded, so rollout code can
import this package before it builds its vLLM engine.
"""

from trace_selector.search.bm25 import BM25Index, SearchHit, build_index, format_results, tokenize
from trace_selector.search.corpus import Passage, read_corpus, write_corpus
from trace_selector.search.pages import Page, PageStore, read_pages, write_pages
from trace_selector.search.urls import canonical_url, wiki_url

__all__ = [
    "BM25Index", "Page", "PageStore", "Passage", "SearchHit", "build_index", "canonical_url",
    "format_results", "read_corpus", "read_pages", "tokenize", "wiki_url", "write_corpus", "write_pages",
]

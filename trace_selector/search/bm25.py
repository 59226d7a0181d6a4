"""BM25 retrieval over a passage corpus, built with `bm25s` and scored in-process.

`bm25s` computes the eager BM25 score matrix (Lucene variant, k1=1.5, b=0.75 by default); scoring a
batch of queries is one sparse matrix product, so `search(q)` and `search_batch([q])[0]` are the same
code and give identical results. Ties are broken by corpus order, so rankings are deterministic.

The tokenizer is ours, not bm25s's: lowercase, tokens of 2+ word characters, accents folded (NFKD),
bm25s's English stop words removed, and Harman's (1991) "S" stemmer for plurals (ies->y, es->e, s->"")
so "tomatoes" finds "tomato" without a stemming dependency. The vocabulary is sorted, so the index
files are byte-identical across runs (bm25s's own vocabulary follows set order, which varies with
PYTHONHASHSEED).

An index folder holds the bm25s arrays, ``passages.jsonl.gz`` (the corpus, FlashRAG format) and
``index.json`` (sizes, parameters, corpus sha256), so `BM25Index.load(dir)` needs nothing else.

    trace-selector index corpus.jsonl.gz --out idx/
    trace-selector search "who directed 2001 a space odyssey" --index idx/ -k 3

`bm25s` pulls in numba, so it is imported inside methods only: a process that builds a vLLM engine
must do so before the first search (DESIGN §Environment facts).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_selector.errors import InputError
from trace_selector.search.corpus import Passage, file_sha256, read_corpus, write_corpus

INDEX_FORMAT = 2
"""Bumped when the folder layout or the tokenizer changes; older folders are refused on load."""

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS: frozenset[str] | None = None


def _stopwords() -> frozenset[str]:
    global _STOPWORDS
    if _STOPWORDS is None:
        from bm25s.stopwords import STOPWORDS_EN

        _STOPWORDS = frozenset(STOPWORDS_EN)
    return _STOPWORDS


def s_stem(token: str) -> str:
    """Harman's S stemmer: strip English plural endings, leaving other words alone."""
    if len(token) > 3 and token.endswith("ies") and token[-4] not in "ae":
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("es") and token[-3] not in "aeo":
        return token[:-1]
    if len(token) > 2 and token.endswith("s") and token[-2] not in "us":
        return token[:-1]
    return token


@functools.lru_cache(maxsize=1 << 18)
def _term(word: str) -> str:
    # Per distinct word, memoised: folding accents character by character over every occurrence
    # made indexing 18.7k passages take ~3x longer.
    if not word.isascii():
        word = "".join(ch for ch in unicodedata.normalize("NFKD", word) if not unicodedata.combining(ch))
    return "" if word in _stopwords() else s_stem(word)


def tokenize(text: str) -> list[str]:
    """Index/query tokens of `text` (the same function on both sides)."""
    words = _TOKEN.findall(unicodedata.normalize("NFC", text.casefold()))
    return [t for t in map(_term, words) if t]


@dataclass(slots=True, frozen=True)
class SearchHit:
    """One ranked result."""

    rank: int
    """1-based rank."""
    doc_id: str
    """Corpus id (the page's canonical URL for page search)."""
    title: str
    """Title of the passage or page."""
    text: str
    """Passage text (a snippet for page search)."""
    score: float
    """BM25 score (higher is better)."""
    url: str | None = None
    """Page URL (page search only)."""


class BM25Index:
    """A BM25 index over passages with their texts, searchable in-process."""

    def __init__(self, passages: list[Passage], retriever: Any, vocab: dict[str, int], info: dict[str, Any]):
        self.passages = passages
        self._retriever = retriever
        self._vocab = vocab
        self.info = info
        self._matrix: Any = None

    def __len__(self) -> int:
        return len(self.passages)

    @classmethod
    def build(cls, passages: Sequence[Passage], k1: float = 1.5, b: float = 0.75) -> BM25Index:
        """Index `passages` (title and text both count); raises InputError on an empty corpus."""
        import bm25s

        passages = list(passages)
        if not passages:
            raise InputError("cannot index an empty corpus")
        docs = [tokenize(f"{p.title} {p.text}") for p in passages]
        vocab = {tok: i for i, tok in enumerate(sorted({t for d in docs for t in d}))}
        n_terms = len(vocab)
        ids = [[vocab[t] for t in d] for d in docs]
        retriever = bm25s.BM25(k1=k1, b=b, method="lucene", backend="numpy")
        retriever.index((ids, vocab), show_progress=False)
        info = {"format": INDEX_FORMAT, "num_docs": len(passages), "vocab_size": n_terms,
                "k1": k1, "b": b, "method": "lucene", "tokenizer": "casefold+nfkd+bm25s_en_stop+s_stem"}
        return cls(passages, retriever, retriever.vocab_dict, info)

    def save(self, directory: str | Path) -> None:
        """Write the index folder atomically (built beside it, then swapped in)."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
        try:
            self._retriever.save(str(tmp), show_progress=False)
            write_corpus(self.passages, tmp / "passages.jsonl.gz")
            info = dict(self.info, passages_sha256=file_sha256(tmp / "passages.jsonl.gz"))
            (tmp / "index.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            os.chmod(tmp, 0o755)
            _swap_dir(tmp, directory)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, directory: str | Path) -> BM25Index:
        """Load a folder written by `save`; a missing or foreign folder raises InputError."""
        import bm25s

        directory = Path(directory)
        meta = directory / "index.json"
        if not meta.is_file():
            raise InputError(f"{directory}: not a BM25 index folder (no index.json); build one with "
                             "`trace-selector index CORPUS --out DIR` or `trace-selector data prepare`")
        info = json.loads(meta.read_text(encoding="utf-8"))
        if info.get("format") != INDEX_FORMAT:
            raise InputError(f"{meta}: index format {info.get('format')} is not {INDEX_FORMAT}; rebuild the index")
        passages = read_corpus(directory / "passages.jsonl.gz")
        retriever = bm25s.BM25.load(str(directory), show_progress=False)
        if retriever.scores["num_docs"] != len(passages):
            raise InputError(f"{directory}: index has {retriever.scores['num_docs']} documents but "
                             f"passages.jsonl.gz has {len(passages)}; rebuild the index")
        return cls(passages, retriever, retriever.vocab_dict, info)

    def _score_matrix(self) -> Any:
        # (vocab x docs) CSR view of bm25s's (docs x vocab) CSC arrays: row t = scores of term t.
        if self._matrix is None:
            import scipy.sparse as sp

            s = self._retriever.scores
            self._matrix = sp.csr_matrix((s["data"], s["indices"], s["indptr"]),
                                         shape=(len(s["indptr"]) - 1, s["num_docs"]))
        return self._matrix

    def scores(self, queries: Sequence[str]) -> Any:
        """Dense float32 array [len(queries), num_docs] of BM25 scores."""
        import numpy as np
        import scipy.sparse as sp

        matrix = self._score_matrix()
        rows, cols = [], []
        for i, q in enumerate(queries):
            for t in tokenize(q):
                # bm25s appends an empty-string term with no column; tokens are never empty anyway.
                if self._vocab.get(t, matrix.shape[0]) < matrix.shape[0]:
                    rows.append(i)
                    cols.append(self._vocab[t])
        # Duplicated query terms count once per occurrence, as in bm25s.
        q = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                          shape=(len(queries), matrix.shape[0]))
        return (q @ matrix).toarray()

    def search(self, query: str, k: int = 3) -> list[SearchHit]:
        """Top-`k` passages for `query`; passages sharing no term with it are never returned."""
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 3, chunk: int | None = None) -> list[list[SearchHit]]:
        """`search` for many queries at once, `chunk` queries per sparse product (default: as many
        as keep the dense score block near 16M floats, 64 MiB: 256 for wikileads, 1 for wiki18)."""
        import numpy as np

        if k < 1:
            raise InputError(f"k must be >= 1, got {k}")
        out: list[list[SearchHit]] = []
        n = len(self.passages)
        chunk = chunk or max(1, min(256, (1 << 24) // n))
        kk = min(k, n)
        for start in range(0, len(queries), chunk):
            scores = self.scores(queries[start : start + chunk])
            for row in scores:
                # Everything scoring at least the k-th best score competes, so a tie at the cut is
                # resolved by corpus position (argpartition alone would pick arbitrarily).
                kth = row[np.argpartition(-row, kk - 1)[kk - 1]] if kk < n else row.min()
                top = np.flatnonzero((row >= kth) & (row > 0))
                top = top[np.lexsort((top, -row[top]))][:kk]
                hits = []
                for idx in top:
                    p = self.passages[int(idx)]
                    hits.append(SearchHit(len(hits) + 1, p.id, p.title, p.text, float(row[idx])))
                out.append(hits)
        return out


def _swap_dir(new: Path, target: Path) -> None:
    """Replace folder `target` by `new`; the old one is moved aside first and deleted after."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def build_index(corpus_path: str | Path, out_dir: str | Path) -> str:
    """Index a FlashRAG JSONL corpus into `out_dir`; returns a one-line report."""
    t0 = time.perf_counter()
    passages = read_corpus(corpus_path)
    index = BM25Index.build(passages)
    index.save(out_dir)
    secs = time.perf_counter() - t0
    return (f"indexed {len(passages)} passages ({index.info['vocab_size']} terms) from {corpus_path} "
            f"into {out_dir} in {secs:.1f} s")


def format_results(hits: Sequence[SearchHit]) -> str:
    """The observation text an agent sees: "Doc i (Title: T) text" lines, or a no-result line."""
    from trace_selector.records import Document, format_search_result

    if not hits:
        return "No results found."
    docs = [Document(rank=h.rank, title=h.title, text=h.text, doc_id=h.doc_id, score=h.score, url=h.url)
            for h in hits]
    return format_search_result(docs)

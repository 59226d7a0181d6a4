"""Passage corpora in the FlashRAG JSONL format, plain or gzipped.

One JSON object per line: ``{"id": "0", "contents": "\\"Title\\"\\ntext"}`` (the wiki18 layout: the
title in double quotes on the first line of `contents`, the passage text after it). Other keys are
ignored on read. A line without a quoted title is read with an empty title and the whole `contents`
as text, because some FlashRAG corpora (e.g. MS MARCO) have no titles.

    passages = read_corpus("corpus.jsonl.gz")
    write_corpus(passages, "copy.jsonl.gz")     # atomic, byte-deterministic
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_selector.errors import FormatError
from trace_selector.records.files import iter_jsonl


@dataclass(slots=True, frozen=True)
class Passage:
    """One retrievable unit of a corpus."""

    id: str
    """Corpus id (FlashRAG `id`), unique within the corpus."""
    title: str
    """Title of the article the passage comes from ("" when the corpus has none)."""
    text: str
    """Passage text without the title."""

    @property
    def contents(self) -> str:
        """FlashRAG `contents` field: the quoted title, a newline, the text."""
        return f'"{self.title}"\n{self.text}'


def parse_contents(contents: str) -> tuple[str, str]:
    """Split FlashRAG `contents` into (title, text); ("", contents) when there is no quoted title."""
    head, sep, text = contents.partition("\n")
    if sep and len(head) >= 2 and head.startswith('"') and head.endswith('"'):
        return head[1:-1], text
    return "", contents


def string_field(obj: dict[str, Any], key: str, path: str | Path, lineno: int, *, required: bool = True) -> str:
    """`obj[key]` as a string (an int is accepted for an ``id``); missing or wrong type raises `FormatError`."""
    if key not in obj:
        if required:
            raise FormatError(path, lineno, key, "missing")
        return ""
    value = obj[key]
    if not isinstance(value, str) and not (key.endswith("id") and isinstance(value, int) and not isinstance(value, bool)):
        raise FormatError(path, lineno, key, f"expected a string, got {type(value).__name__}")
    return str(value)


def read_corpus(path: str | Path) -> list[Passage]:
    """All passages of a FlashRAG JSONL corpus; duplicate ids and malformed lines raise `FormatError`."""
    passages: list[Passage] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        pid = string_field(obj, "id", path, lineno)
        contents = string_field(obj, "contents", path, lineno)
        if pid in seen:
            raise FormatError(path, lineno, "id", f"duplicate id {pid!r} (first on line {seen[pid]})")
        seen[pid] = lineno
        title, text = parse_contents(contents)
        passages.append(Passage(pid, title, text))
    if not passages:
        raise FormatError(path, None, None, "corpus is empty")
    return passages


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | Path) -> None:
    """Write JSON objects one per line, atomically; ``.gz`` paths get deterministic gzip bytes."""
    from trace_selector.atomic import atomic_write

    with atomic_write(path) as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_corpus(passages: Iterable[Passage], path: str | Path) -> None:
    """Write passages in FlashRAG JSONL (``{"id", "contents"}``), in the given order."""
    write_jsonl(({"id": p.id, "contents": p.contents} for p in passages), path)


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

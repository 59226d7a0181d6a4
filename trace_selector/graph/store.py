"""On-disk embedding store of the text encoder: text key -> vector, append-only ``.npy`` shards.

    store = EmbeddingStore(folder, dim=384)
    store.add([text_key("some text")], vectors)        # one shard per call, compacted now and then
    hit, vecs = store.lookup([text_key("some text")])

`graph/encoder.py` keeps one store per model identity (model, runtime, precision).
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from trace_selector.atomic import atomic_write
from trace_selector.errors import InputError

StoreDtype = Literal["float32", "float16"]

STORE_VERSION = 1
"""Bumped when the on-disk layout or the key derivation changes (old folders are then ignored)."""

_COMPACT_AT = 32
"""Shard count at which a store merges its small shards (one shard per encode call with misses;
merging keeps start-up to a handful of file opens)."""


def text_key(text: str) -> bytes:
    """Cache key of one text: sha256 of its UTF-8 bytes (32 bytes)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class EmbeddingStore:
    """Append-only map from text key to vector, in memory or in one folder of ``.npy`` shards.

    Layout of a folder: ``<name>.vec.npy`` ``[n, D]`` vectors and ``<name>.key.npy`` ``[n, 32]`` uint8
    keys per shard. A shard counts once its key file exists; the key file is renamed into place
    after the vector file, so a crash leaves at most an orphan vector file, never a half shard.
    Shard names are unique per writer, so concurrent processes append without locks; a key stored
    twice maps to the same vector, so duplicates are harmless. Every `add` makes one shard; at
    `_COMPACT_AT` shards all but the largest are merged into one, so a long run of small appends
    neither litters the folder nor rewrites the bulk of the store each time.

    Args:
        folder: shard folder, or None for a memory-only store.
        dim: vector width.
        dtype: storage dtype; vectors come back as float32 rounded through it.
    """

    def __init__(self, folder: str | Path | None, dim: int, dtype: StoreDtype = "float32"):
        self.folder = Path(folder) if folder is not None else None
        self.dim = dim
        self.dtype = np.dtype(dtype)
        self._reset()
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.refresh()
            self._maybe_compact()

    def _reset(self) -> None:
        self._index: dict[bytes, int] = {}  # key -> shard << 32 | row
        self._shards: list[np.ndarray] = []
        self._keys: list[np.ndarray] = []
        self._names: list[str] = []

    def __len__(self) -> int:
        return len(self._index)

    @property
    def num_shards(self) -> int:
        return len(self._shards)

    def refresh(self) -> None:
        """Pick up shards written since the last look (by this or another process)."""
        if self.folder is None:
            return
        known = set(self._names)
        for key_file in sorted(self.folder.glob("*.key.npy")):
            name = key_file.name[: -len(".key.npy")]
            if name in known:
                continue
            try:
                keys = np.load(key_file)
                vecs = np.load(self.folder / f"{name}.vec.npy", mmap_mode="r")
            except FileNotFoundError:  # compacted away by another process between glob and open
                continue
            if vecs.shape != (len(keys), self.dim) or vecs.dtype != self.dtype:
                raise InputError(
                    f"{self.folder}: shard {name} holds {vecs.dtype} {vecs.shape}, expected "
                    f"{self.dtype} [{len(keys)}, {self.dim}]; delete the folder to rebuild the cache"
                )
            self._add_shard(name, keys, vecs)

    def _add_shard(self, name: str, keys: np.ndarray, vecs: np.ndarray) -> None:
        base = len(self._shards) << 32
        self._shards.append(vecs)
        self._keys.append(keys)
        self._names.append(name)
        # Keys live as uint8 [n, 32]: numpy's bytes dtype would strip trailing NUL bytes of a digest.
        raw = keys.tobytes()
        split = (raw[i : i + 32] for i in range(0, len(raw), 32))
        self._index.update(zip(split, range(base, base + len(keys))))

    def lookup(self, keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Positions of `keys` that are stored, and their vectors ``[hits, D]`` float32."""
        where = [self._index.get(k, -1) for k in keys]
        loc = np.fromiter(where, dtype=np.int64, count=len(where))
        hit = np.flatnonzero(loc >= 0)
        out = np.empty((len(hit), self.dim), dtype=np.float32)
        if len(hit):
            shard, row = loc[hit] >> 32, loc[hit] & 0xFFFFFFFF
            for s in np.unique(shard):
                sel = shard == s
                out[sel] = self._shards[int(s)][row[sel]]
        return hit, out

    def add(self, keys: Sequence[bytes], vecs: np.ndarray) -> np.ndarray:
        """Store new vectors; returns them rounded through the storage dtype (as float32)."""
        keys_arr = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, 32)
        stored = self._write(keys_arr, np.ascontiguousarray(vecs, dtype=self.dtype))
        self._maybe_compact()
        return stored.astype(np.float32)

    def _write(self, keys: np.ndarray, vecs: np.ndarray) -> np.ndarray:
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if self.folder is not None:
            with atomic_write(self.folder / f"{name}.vec.npy", "wb") as f:
                np.save(f, vecs)
            with atomic_write(self.folder / f"{name}.key.npy", "wb") as f:  # commit marker
                np.save(f, keys)
        self._add_shard(name, keys, vecs)
        return vecs

    def _maybe_compact(self) -> None:
        if len(self._shards) >= _COMPACT_AT:
            self.compact()

    def compact(self) -> None:
        """Merge every shard but the largest into one (new shard first, then delete the old files)."""
        if len(self._shards) < 3:
            return
        big = int(np.argmax([len(k) for k in self._keys]))
        small = [i for i in range(len(self._shards)) if i != big]
        keys = np.concatenate([self._keys[i] for i in small])
        vecs = np.concatenate([np.asarray(self._shards[i]) for i in small])
        old = [self._names[i] for i in small]
        kept = (self._names[big], self._keys[big], self._shards[big])
        self._reset()
        self._add_shard(*kept)
        self._write(keys, vecs)
        if self.folder is not None:
            for name in old:
                for suffix in (".key.npy", ".vec.npy"):  # key first: the shard stops counting at once
                    (self.folder / f"{name}{suffix}").unlink(missing_ok=True)

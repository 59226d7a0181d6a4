"""ONNX Runtime encoder backend: export checks, agreement with sentence-transformers, runtime bookkeeping."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from trace_selector.errors import InputError
from trace_selector.graph.encoder import ENCODER_RUNTIMES, TextEncoder, parse_runtime, runtime_of
from trace_selector.graph.onnx_model import _check_layout

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TEXTS = [
    "Paris is the capital of France.",
    "  leading and trailing spaces  ",
    "Hamlet\nHamlet is a tragedy written by William Shakespeare sometime between 1599 and 1601. " * 12,  # > 256 tokens
    "Ünïcödé café — naïve façade",
    "x",
]


def test_runtime_names_round_trip():
    for name, (backend, dtype) in ENCODER_RUNTIMES.items():
        assert runtime_of(backend, dtype) == name and parse_runtime(name) == (backend, dtype)
    with pytest.raises(InputError, match="unknown encoder runtime 'tensorrt'; known: torch, torch-bf16, onnx"):
        parse_runtime("tensorrt")
    with pytest.raises(InputError, match="no encoder runtime computes int8 on backend 'torch'"):
        TextEncoder(dtype="int8")
    with pytest.raises(InputError, match="backend must be torch or onnx"):
        TextEncoder(backend="tensorrt")
    with pytest.raises(InputError, match="threads must be >= 1"):
        TextEncoder(threads=0)


def test_layout_check_names_unsupported_pooling(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(
        {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    with pytest.raises(InputError, match="supports Transformer \\+ mean Pooling.*Transformer \\+ Pooling; use encoder backend 'torch'"):
        _check_layout(tmp_path)
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    assert _check_layout(tmp_path) == 128


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One embedding cache (and so one ONNX export) for the module: exporting is most of the time."""
    return tmp_path_factory.mktemp("emb")


def test_onnx_matches_sentence_transformers(cache):
    ref = TextEncoder(cache_dir=cache)
    fast = TextEncoder(cache_dir=cache, backend="onnx", threads=1)
    assert fast.identity != ref.identity and fast.runtime == "onnx" and ref.runtime == "torch"
    onnx_model = fast._load_onnx()
    # token ids exactly as sentence-transformers makes them (padding, truncation at 256, lower-casing)
    st_ids = ref._load().tokenize(TEXTS)["input_ids"]
    assert onnx_model.tokenize(TEXTS)["input_ids"].tolist() == st_ids.tolist()
    x, y = ref.encode(TEXTS), fast.encode(TEXTS)
    assert fast.last.encoded == len(TEXTS)  # its own cache folder: nothing reused from the torch run
    assert torch.allclose(y.norm(dim=1), torch.ones(len(TEXTS)), atol=1e-5)
    assert (x * y).sum(1).min() > 0.99999
    # rows come back in input order although batches run sorted by length (batch size 2: 3 batches)
    rev = torch.nn.functional.normalize(torch.from_numpy(onnx_model.encode(TEXTS[::-1], batch_size=2)), dim=-1)
    assert torch.allclose(rev, torch.flip(y, [0]), atol=1e-5)


def test_onnx_int8_close_and_export_verified(cache):
    ref = TextEncoder(cache_dir=cache).encode(TEXTS)
    enc = TextEncoder(cache_dir=cache, backend="onnx", dtype="int8", threads=1)
    q = enc.encode(TEXTS)
    assert enc.runtime == "onnx-int8" and (ref * q).sum(1).min() > 0.95
    folder = enc._onnx.path.parent
    sums = json.loads((folder / "checksums.json").read_text())
    assert set(sums) == {"model.onnx", "model-int8.onnx"}
    # a damaged export is detected by its checksum and made again, giving the same vectors
    (folder / "model-int8.onnx").write_bytes(b"truncated")
    from trace_selector.graph.onnx_model import OnnxSentenceModel

    model = OnnxSentenceModel.prepare(enc.model_dir, folder, "int8", threads=1)
    assert json.loads((folder / "checksums.json").read_text())["model-int8.onnx"] == sums["model-int8.onnx"]
    v = torch.nn.functional.normalize(torch.from_numpy(model.encode(TEXTS)), dim=-1)
    assert torch.allclose(v, q, atol=1e-5)


def test_selector_warns_on_another_runtime(cache):
    from trace_selector.model import ModelConfig, SelectorNet
    from trace_selector.selector import Selector

    net = SelectorNet(ModelConfig(embed_dim=384, hidden=8, layers=1, heads=1, encoder_runtime="torch"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Selector(net, cache_dir=cache)  # the checkpoint's own runtime: silent
    with pytest.warns(UserWarning, match="trained on torch embeddings is scoring with onnx-int8 embeddings"):
        sel = Selector(net, cache_dir=cache, encoder_runtime="onnx-int8")
    assert sel.encoder.runtime == "onnx-int8"


def test_model_config_runtime_default_and_check():
    from trace_selector.model import ModelConfig

    assert ModelConfig.from_json({"kind": "webqa"}).encoder_runtime == "torch"  # checkpoints before the field
    assert ModelConfig().encoder_runtime == "onnx"  # new selectors: same answers as torch, faster
    with pytest.raises(InputError, match="encoder_runtime must be one of torch, torch-bf16, onnx, onnx-int8"):
        ModelConfig.from_json({"encoder_runtime": "fp8"})

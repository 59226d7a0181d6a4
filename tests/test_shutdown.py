"""The stop watchdog: a SIGTERM ends the process even when the clean unwind hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

HANGING = textwrap.dedent("""
    import sys, time
    from trace_selector import shutdown
    shutdown.install(grace={grace})
    try:
        print("ready", flush=True)
        time.sleep(60)
    finally:
        print("unwinding", flush=True)
        time.sleep(60)  # a cleanup that never returns (vLLM's engine start once did this)
""")


def _start(grace: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HANGING.format(grace=grace)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_sigterm_forces_exit_after_grace_when_unwinding_hangs():
    proc = _start(grace=1.0)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "unwinding" in out  # the clean path ran first
    assert "did not stop within 1 s" in err
    assert time.monotonic() - t0 < 30


def test_second_signal_exits_at_once():
    proc = _start(grace=60.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().strip() == "unwinding"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "second interrupt" in err


def test_clean_unwind_keeps_its_own_exit():
    code = textwrap.dedent("""
        import sys
        from trace_selector import shutdown
        shutdown.install(grace=30)
        import os, signal
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            import time; time.sleep(5)
        except KeyboardInterrupt:
            sys.exit(3)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 3 and proc.stderr == ""

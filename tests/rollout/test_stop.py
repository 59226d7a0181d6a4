"""Slow: `trace-selector rollout` stopped by SIGTERM while vLLM's engine is still starting ends within
seconds, releases the pool lock, and the same command then finishes the pool.
Run: pytest tests/rollout/test_stop.py -m slow"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import tiny_setting

pytestmark = pytest.mark.slow


def test_sigterm_during_engine_start_ends_and_resumes(tmp_path):
    import fcntl

    from trace_selector.records import read_pool

    setting = tiny_setting(tmp_path / "setting")
    out = tmp_path / "pool.jsonl.gz"
    cmd = [sys.executable, "-m", "trace_selector.cli", "rollout", "--split", "dev", "--limit", "2", "--k", "2",
           "--model", "smollm2-135m", "--out", str(out), f"setting={setting}", "agent.max_turns=1",
           "agent.max_tokens=32", "agent.think=false", "agent.max_context=1024",
           "engine_options.kv_cache_gib=1"]  # small: other engines of the slow suite may still hold memory
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    time.sleep(8)  # imports done, vLLM still loading (engine start takes 30-100 s here)
    assert proc.poll() is None, proc.stdout.read()
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stopped_in = time.monotonic() - t0
    assert proc.returncode == 130, proc.stdout.read()[-2000:]
    assert stopped_in < 60
    # nothing of the run is left: no process in its session, the lock can be taken
    left = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert left == [], subprocess.run(["ps", "-o", "pid,stat,args", "-p", ",".join(left)],
                                      capture_output=True, text=True).stdout
    lock = tmp_path / "pool.jsonl.gz.lock"
    if lock.exists():
        with open(lock) as fh:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert not out.exists()
    # the same command finishes the pool
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-6000:]
    pool = read_pool(out)
    assert sorted((t.question_id, t.sample_id) for t in pool.trajectories()) == [
        ("q1", 0), ("q1", 1), ("q2", 0), ("q2", 1)]

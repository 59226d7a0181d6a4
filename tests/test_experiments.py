"""experiments/: the sealed wikileads pool stays evaluated once, on a fresh clone too."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_sealed_evaluation_refuses_a_second_run(tmp_path):
    """The committed record ends `ship_wikileads.sh sealed` before anything reads the sealed pool."""
    record = ROOT / "experiments" / "results" / "wikileads-sealed-evaluation.txt"
    assert record.is_file() and (ROOT / "experiments" / "results" / "wikileads-sealed" / "results.json").is_file()
    stub = tmp_path / "python"  # any call into Python would mean the guard let the run through
    stub.write_text(f'#!/usr/bin/env bash\ntouch {tmp_path}/called\nexit 0\n')
    stub.chmod(0o755)
    env = {**os.environ, "PYTHON": str(stub), "RUNS": str(tmp_path / "runs")}
    done = subprocess.run(["bash", str(ROOT / "experiments" / "ship_wikileads.sh"), "sealed"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "the sealed pool was evaluated already" in done.stderr
    assert not (tmp_path / "called").exists() and not (tmp_path / "runs").exists()

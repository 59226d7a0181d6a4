"""Quiet stages: other output goes to the log (child processes too), one line or bar per stage stays on screen."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trace_selector.progress import Stage, output_to

POOL = Path(__file__).parent / "data" / "webqa_pool.jsonl"


def test_output_to_routes_this_process_and_children_to_the_log(tmp_path, capfd):
    log = tmp_path / "job.log"
    with output_to(log) as term:
        os.write(1, b"from fd 1\n")
        os.write(2, b"from fd 2\n")
        subprocess.run([sys.executable, "-c", "import sys; print('child'); print('child err', file=sys.stderr)"])
        term.write("on screen\n")
    os.write(2, b"after\n")
    assert log.read_text().split() == ["from", "fd", "1", "from", "fd", "2", "child", "child", "err"]
    seen = capfd.readouterr()
    assert "on screen" in seen.err and "after" in seen.err and "child" not in seen.out + seen.err


def test_stage_prints_one_line_when_not_a_tty():
    screen = io.StringIO()
    with Stage("live rollout", 10.0, screen, "2/4") as stage:
        stage.note = "12 trajectories"
    assert screen.getvalue() == f"[2/4] live rollout: {stage.seconds:.1f} s, 12 trajectories\n"
    with pytest.raises(RuntimeError), Stage("evaluate", 1.0, screen):
        raise RuntimeError("boom")
    assert screen.getvalue().splitlines()[-1] == "evaluate: failed"


def test_quiet_quickstart_logs_the_stage_and_keeps_the_table(tmp_path, capfd):
    import torch

    from trace_selector.model import ModelConfig, SelectorNet
    from trace_selector.model.hub import save_selector
    from trace_selector.quickstart import QuickstartConfig, quickstart

    torch.manual_seed(0)
    ckpt = save_selector(SelectorNet(ModelConfig(embed_dim=16, hidden=16, layers=1, encoder="hash")), tmp_path / "c",
                         setting="toy")
    out = tmp_path / "qs"
    quickstart(QuickstartConfig(live_questions=0, checkpoint=str(ckpt), eval_pool=str(POOL), out_dir=str(out),
                                methods=["majority", "trace"], budget_subsets=1), quiet=True)
    seen = capfd.readouterr()
    assert "| majority |" in seen.out and "done in" in seen.out and "(log: quickstart.log)" in seen.out
    # the stage's one line (not a TTY); under pytest, Python-level writes bypass the file descriptors
    assert seen.err.replace("\r", "\n").splitlines()[-1].startswith("[1/1] evaluate the dev pool: ")
    assert (out / "quickstart.log").is_file()
    assert set(json.loads((out / "timings.json").read_text())) == {"evaluate the dev pool", "total"}

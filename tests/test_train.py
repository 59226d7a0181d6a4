"""Lightning training end to end at toy size: checkpoints, resolved config, resume, select, DDP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from trace_selector.cli import main
from trace_selector.config import load_config
from trace_selector.errors import InputError
from trace_selector.records import Document, Pool, QuestionGroup, Step, Trajectory, write_pool
from trace_selector.records.synthetic import SyntheticConfig, make_pool
from trace_selector.selector import Selector
from trace_selector.shutdown import EXIT_CODE
from trace_selector.train import (
    TrainConfig,
    is_mixed,
    is_val_question,
    resolve_config,
    selected_correct,
    train,
    validation_text,
)
from trace_selector.train.data import PoolDataModule, shared_answers, split_validation

from tests.conftest import one_thread, toy_graph

ROOT = Path(__file__).resolve().parents[1]

TINY = [
    "setting=toy", "name=tiny", "data.source=synthetic", "data.synthetic.questions=24", "data.synthetic.k=6",
    "data.val_fraction=0.25", "data.batch_size=8", "model.encoder=bow", "model.embed_dim=32", "model.hidden=16",
    "model.layers=1", "optim.epochs=1", "trainer.accelerator=cpu", "trainer.progress_bar=false", "trainer.threads=1",
]


_one_thread = pytest.fixture(autouse=True)(one_thread)


def tiny_config(tmp_path: Path, *extra: str) -> TrainConfig:
    return load_config(TrainConfig, None, [*TINY, f"out_dir={tmp_path}", *extra])


def test_fit_writes_checkpoints_config_logs_and_selector(tmp_path):
    cfg = tiny_config(tmp_path)
    result = train(cfg)
    run = tmp_path / "tiny"
    assert result.run_dir == run and result.global_step > 0
    assert (run / "checkpoints" / "best.ckpt").is_file() and (run / "checkpoints" / "last.ckpt").is_file()
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["seed"] == 0 and saved["model"]["hidden"] == 16 and saved["data"]["synthetic"]["questions"] == 24
    assert list(run.glob("logs/*/metrics.csv")), "CSV log missing"
    assert {p.name for p in (run / "selector").iterdir()} >= {"model.safetensors", "config.json", "README.md"}
    assert "val_selection_accuracy" in (run / "selector" / "README.md").read_text()
    assert 0.0 <= result.best_val_acc <= 1.0


def test_resume_continues_from_last_checkpoint(tmp_path):
    first = train(tiny_config(tmp_path))
    cfg = resolve_config(None, [*TINY, f"out_dir={tmp_path}", "optim.epochs=2"], resume=True)
    assert cfg.optim.epochs == 2
    second = train(cfg, resume=True)
    assert second.global_step == 2 * first.global_step


def test_resume_without_run_fails_clearly(tmp_path):
    with pytest.raises(InputError, match="--resume"):
        resolve_config(None, [*TINY, f"out_dir={tmp_path}"], resume=True)


def test_cli_train_max_steps_then_select(tmp_path, capsys):
    cfg_file = tmp_path / "toy.yaml"
    cfg_file.write_text(yaml.safe_dump({"setting": "toy", "out_dir": str(tmp_path)}))
    rc = main(["train", "--config", str(cfg_file), *TINY[1:], "optim.max_steps=3", "optim.epochs=5"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "best val selection accuracy" in out and "after 3 steps" in out

    pool = make_pool(SyntheticConfig(questions=5, k=6, offset=500))
    write_pool(pool, tmp_path / "pool.jsonl")
    sel_file = tmp_path / "sel.jsonl"
    rc = main(["select", "--checkpoint", str(tmp_path / "tiny" / "selector"), "--pool", str(tmp_path / "pool.jsonl"),
               "--out", str(sel_file)])
    assert rc == 0
    rows = [json.loads(line) for line in sel_file.read_text().splitlines()]
    assert [r["question_id"] for r in rows] == [g.question_id for g in pool.groups]
    for r, g in zip(rows, pool.groups):
        answers = {t.sample_id: t.answer for t in g.trajectories}
        assert answers[r["sample_id"]] == r["answer"]
        assert set(map(int, r["scores"])) == set(answers)
        assert max(r["scores"].values()) == r["scores"][str(r["sample_id"])]


def test_selector_api_matches_network_scores(tmp_path):
    result = train(tiny_config(tmp_path, "optim.max_steps=2"))
    selector = Selector.from_pretrained(result.selector_dir)
    pool = make_pool(SyntheticConfig(questions=3, k=6, offset=900))
    selections = selector.select(pool)
    graphs, _ = selector.graphs(pool)
    for s, g in zip(selections, graphs):
        scores = selector.net(g)
        assert s.sample_id == int(g["answer"].sample_id[int(scores.argmax())])
        assert torch.allclose(torch.tensor(list(s.scores.values())), scores, atol=1e-6)


def test_val_split_is_stable_and_normalised():
    assert is_val_question("Who wrote Hamlet?", 0.5) == is_val_question("  who wrote hamlet ", 0.5)
    share = sum(is_val_question(f"question {i}", 0.2) for i in range(2000)) / 2000
    assert 0.17 < share < 0.23


def test_answer_split_keeps_questions_that_share_answers_together():
    # A chain: q0-q1 share "paris" (after normalisation), q2 links "paris" to "city of light", q3 has only
    # the latter; 400 more questions repeat 40 answers.
    golds = [["Paris"], ["paris "], ["Paris", "City of Light"], ["the City of Light"], ["Rome"], []]
    golds += [[f"answer {i % 40}"] for i in range(400)]
    groups = [QuestionGroup(f"q{i}", f"question {i}", g, []) for i, g in enumerate(golds)]
    train, val = split_validation(groups, 0.3, "answer")
    held = {g.question_id for g in val}
    assert [g.question_id for g in train] == [g.question_id for g in groups if g.question_id not in held]
    assert len({("q0" in held), ("q1" in held), ("q2" in held), ("q3" in held)}) == 1
    assert shared_answers(train, val) == 0 and 0.15 < len(val) / len(groups) < 0.45
    # The same pool split by question text puts most repeated answers on both sides.
    by_question = split_validation(groups, 0.3, "question")
    assert shared_answers(*by_question) > 0.8 * len(by_question[1])
    with pytest.raises(ValueError, match="unknown validation split"):
        split_validation(groups, 0.3, "article")
    with pytest.raises(InputError, match="val_split"):
        load_config(TrainConfig, None, ["data.source=synthetic", "data.val_split=article"])


def test_question_split_warns_when_answers_are_shared(tmp_path):
    pool = make_pool(SyntheticConfig(questions=24, k=6))
    for i, group in enumerate(pool.groups):  # pairs of questions share an extra gold answer
        group.golden_answers = [*group.golden_answers, f"shared {i // 2}"]
        for t in group.trajectories:
            t.golden_answers = group.golden_answers
    write_pool(pool, tmp_path / "pool.jsonl")
    common = ["data.source=pool", f"data.train_pool={tmp_path / 'pool.jsonl'}", "data.val_fraction=0.5"]
    dm = PoolDataModule(tiny_config(tmp_path, *common))
    with pytest.warns(UserWarning, match="share a gold answer with a training question"):
        dm.setup()
    assert dm.shared_answers > 0
    dm = PoolDataModule(tiny_config(tmp_path, *common, "data.val_split=answer"))
    dm.setup()
    assert dm.shared_answers == 0 and dm.val_questions > 0
    assert dm.val_k == (6, 6)
    assert f", {dm.val_questions} questions x 6; the checkpoint was chosen" in validation_text(dm.config, dm)


def test_model_card_counts_questions_mixed_only_through_a_trajectory_the_graphs_leave_out(tmp_path):
    pool = make_pool(SyntheticConfig(questions=24, k=6))
    # Question 0: every trajectory right but one wrong one that never searched. The pool counts it mixed;
    # its graph has no wrong candidate, so it cannot teach a ranking.
    first = pool.groups[0]
    assert not is_val_question(first.question, 0.25)  # a training question
    for t in first.trajectories:
        t.answer = first.golden_answers[0]
    first.trajectories[0].answer, first.trajectories[0].steps = "Nobody", []
    write_pool(pool, tmp_path / "pool.jsonl")
    result = train(tiny_config(tmp_path, "data.source=pool", f"data.train_pool={tmp_path / 'pool.jsonl'}",
                               "data.val_fraction=0.25", "optim.max_steps=1"))
    dm = PoolDataModule(tiny_config(tmp_path, "data.source=pool", f"data.train_pool={tmp_path / 'pool.jsonl'}",
                                    "data.val_fraction=0.25"))
    dm.setup()
    seen = dm.train_questions_seen
    assert first.question_id not in {g.question_id for g in dm.train_graphs}
    assert dm.train_drops.dropped["no_search"] == 1 and dm.train_drops.dropped["no_answer"] == 0
    text = f"{len(dm.train_graphs)} of {seen} questions with a correct and a wrong candidate; " \
           "trajectories left out of the graphs: 1 without a search that returned anything"
    assert dm.training_text() == text
    assert text in (result.selector_dir / "README.md").read_text()


def test_selected_correct_takes_first_argmax():
    scores = torch.tensor([0.1, 0.9, 0.9, 0.5, -1.0])
    labels = torch.tensor([0.0, 1.0, 0.0, float("nan"), 1.0])
    group = torch.tensor([0, 0, 0, 1, 2])
    assert selected_correct(scores, labels, group, 4).tolist() == [1.0, 0.0, 1.0, 0.0]


def test_only_mixed_questions_train(tmp_path):
    from trace_selector.train import PoolDataModule

    mixed, all_wrong = toy_graph(0, k=3), toy_graph(1, k=3)
    all_wrong["answer"].y = torch.zeros(3)
    assert is_mixed(mixed) and not is_mixed(all_wrong)
    dm = PoolDataModule(tiny_config(tmp_path), graphs=([mixed, all_wrong], [all_wrong]))
    assert dm.train_graphs == [mixed] and dm.pos_weight == 2.0
    with pytest.raises(InputError, match="nothing to learn"):
        PoolDataModule(tiny_config(tmp_path), graphs=([all_wrong], [all_wrong]))


def test_config_validation(tmp_path):
    with pytest.raises(InputError, match="train_pool is required"):
        load_config(TrainConfig, None, ["data.source=pool"])
    with pytest.raises(InputError, match="val_fraction"):
        load_config(TrainConfig, None, ["data.source=synthetic", "data.val_fraction=1.5"])
    with pytest.raises(InputError, match="pool file not found"):
        train(load_config(TrainConfig, None, [f"out_dir={tmp_path}", f"data.train_pool={tmp_path / 'missing.jsonl'}",
                                               "model.encoder=hash", "model.embed_dim=16"]))


def test_shipped_training_configs_resolve():
    for name, setting, kind in [("wikileads", "wikileads", "webqa"), ("wikileads-grounded", "wikileads", "webqa"),
                                ("wikileads-browsing", "wikileads", "browsing"),
                                ("synthetic", "synthetic", "webqa")]:
        cfg = load_config(TrainConfig, ROOT / "training" / f"{name}.yaml", ["data.train_pool=x.jsonl"])
        assert (cfg.setting, cfg.model.kind) == (setting, kind)


@pytest.mark.slow
def test_ddp_two_cpu_processes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "trace_selector", "train", *TINY, f"out_dir={tmp_path}", "optim.epochs=2",
           "trainer.devices=2", "trainer.strategy=ddp"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "tiny"
    assert (run / "checkpoints" / "best.ckpt").is_file() and (run / "checkpoints" / "last.ckpt").is_file()
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["global_step"] > 0 and any(k.startswith("net.") for k in ckpt["state_dict"])
    assert (run / "selector" / "model.safetensors").is_file()


@pytest.mark.slow
def test_wandb_offline_logging(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    result = train(tiny_config(tmp_path, "optim.max_steps=2", "trainer.wandb=true", "trainer.wandb_offline=true"))
    assert list((result.run_dir / "wandb").glob("offline-run-*"))


def browsing_pool(questions: int) -> Pool:
    """Browsing-style questions whose right answer is the one read on an opened page."""
    groups = []
    for q in range(questions):
        right, wrong = (f"Alice{q}", f"Bob{q}") if q % 2 else (f"Bob{q}", f"Alice{q}")
        page = f"URL: https://wiki.org/X{q}\nTitle: X{q}\nL0: X{q} was founded by {right}."
        trajs = []
        for s in range(4):
            answer = right if s % 2 == 0 else wrong
            steps = [Step("search", f"X{q} founder", documents=[Document(rank=1, title=f"X{q}", text="snippet", url=f"https://wiki.org/X{q}")])]
            if answer == right:
                steps.append(Step("open", f"https://wiki.org/X{q}", page, [Document(rank=1, title=f"X{q}", text=page, url=f"https://wiki.org/X{q}")]))
            trajs.append(Trajectory(f"b{q}", f"Who founded X{q}?", s, answer, steps, [right], style="browsing"))
        groups.append(QuestionGroup(f"b{q}", f"Who founded X{q}?", [right], trajs))
    return Pool(groups)


def test_browsing_selector_trains_selects_and_refuses_webqa_pools(tmp_path, capsys):
    write_pool(browsing_pool(16), tmp_path / "browse.jsonl")
    args = ["setting=toy", "name=browse", "data.source=pool", f"data.train_pool={tmp_path / 'browse.jsonl'}",
            "data.val_fraction=0.25", "data.batch_size=4", "model.kind=browsing", "model.encoder=hash",
            "model.embed_dim=16", "model.hidden=16", "model.layers=1", "optim.max_steps=4",
            "trainer.accelerator=cpu", "trainer.progress_bar=false", "trainer.threads=1", f"out_dir={tmp_path}",
            f"data.graph_cache={tmp_path / 'cache'}"]
    assert main(["train", *args]) == 0
    selector = Selector.from_pretrained(tmp_path / "browse" / "selector")
    assert selector.net.config.kind == "browsing"
    picks = selector.select(browsing_pool(3))
    assert [p.question_id for p in picks] == ["b0", "b1", "b2"]

    write_pool(make_pool(SyntheticConfig(questions=2, k=6)), tmp_path / "webqa.jsonl")
    capsys.readouterr()
    rc = main(["select", "--checkpoint", str(tmp_path / "browse" / "selector"), "--pool", str(tmp_path / "webqa.jsonl"),
               "--out", str(tmp_path / "sel.jsonl")])
    err = capsys.readouterr().err
    assert rc != 0 and "webqa-style but browsing graphs were asked for" in err
    assert f"{tmp_path / 'webqa.jsonl'}: question " in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "sel.jsonl").exists()


def test_subset_training_draws_fresh_subsets_every_read(tmp_path):
    from trace_selector.graph.subset import SubsetGraphs
    from trace_selector.train import PoolDataModule

    graphs = [toy_graph(s, k=6) for s in range(4)]
    dm = PoolDataModule(tiny_config(tmp_path, "data.subsets=true", "data.subset_min=2", "data.subset_max=4"),
                        graphs=(graphs, graphs[:1]))
    loader = dm.train_dataloader()
    assert isinstance(loader.dataset, SubsetGraphs)
    torch.manual_seed(0)
    sizes = [len(loader.dataset[0].answers) for _ in range(60)]
    assert set(sizes) == {2, 3, 4}
    for _ in range(20):
        g = loader.dataset[1]
        assert is_mixed(g) and g["answer"].vote.shape == (g["answer"].num_nodes, 6)
    # Off (the default, and every run before the field): the graphs themselves.
    plain = PoolDataModule(tiny_config(tmp_path), graphs=(graphs, graphs[:1])).train_dataloader()
    assert plain.dataset is not None and not isinstance(plain.dataset, SubsetGraphs)


def test_subset_run_with_tie_break_and_early_stopping(tmp_path):
    cfg = tiny_config(tmp_path, "data.subsets=true", "optim.tie_break=true", "optim.early_stopping=1", "optim.epochs=6",
                      "optim.lr=1e-9")  # a frozen model: validation never improves, so patience 1 stops at epoch 2
    result = train(cfg)
    rows = (next((tmp_path / "tiny").glob("logs/*/metrics.csv"))).read_text().splitlines()
    header = rows[0].split(",")
    per_epoch = int(rows[1].split(",")[header.index("step")]) + 1  # first validation row: end of epoch 0
    assert result.global_step == 2 * per_epoch  # stopped after 2 of 6 epochs
    acc = float(next(r.split(",")[header.index("val/acc")] for r in rows[1:] if r.split(",")[header.index("val/acc")]))
    assert result.best_val_acc == pytest.approx(acc)  # the accuracy, not the objective
    saved = yaml.safe_load((result.selector_dir / "training_config.yaml").read_text())
    assert saved["data"]["subsets"] is True and saved["optim"]["tie_break"] is True


def test_tie_break_objective_orders_by_accuracy_then_loss():
    from trace_selector.train import validation_objective as objective

    n = 150
    assert objective(30 / n, 0.9, n) > objective(30 / n, 1.1, n)     # same accuracy: lower loss wins
    assert objective(31 / n, 1e6, n) > objective(30 / n, 0.0, n)     # one more right answer beats any loss
    assert objective(30 / n, 0.0, n) == 30 / n


def test_validation_size_floor(tmp_path):
    graphs = [toy_graph(s, k=3) for s in range(3)]
    from trace_selector.train import PoolDataModule

    with pytest.raises(InputError, match="2 validation questions, fewer than data.min_val_questions=150"):
        PoolDataModule(tiny_config(tmp_path, "data.min_val_questions=150"), graphs=(graphs, graphs[:2]))


def test_val_budgets_add_smaller_views_of_the_same_questions(tmp_path):
    from trace_selector.train import PoolDataModule, majority_accuracy

    val = [toy_graph(s, k=6) for s in range(3)] + [toy_graph(9, k=3)]
    dm = PoolDataModule(tiny_config(tmp_path, "data.val_budgets=[2,4]", "data.min_val_questions=4"),
                        graphs=(val, val))
    # every question at full K, then its first 2 and first 4 trajectories (the k=3 question only at 2)
    assert dm.val_questions == 4 and len(dm.val_graphs) == 4 + 4 + 3
    assert [g["answer"].num_nodes for g in dm.val_graphs[4:]] == [2, 2, 2, 2, 4, 4, 4]
    first2 = dm.val_graphs[4]
    assert torch.equal(first2["answer"].y, val[0]["answer"].y[:2])
    # vote columns are recounted over the view: c/R sums to 1 over distinct answers within 2 trajectories
    assert float(first2["answer"].vote[:, 1].max()) <= 1.0 and first2["answer"].vote.shape[0] == 2
    plain = PoolDataModule(tiny_config(tmp_path), graphs=(val, val))
    assert len(plain.val_graphs) == 4 and majority_accuracy(plain.val_graphs) is not None
    with pytest.raises(InputError, match="distinct sizes >= 2"):
        tiny_config(tmp_path, "data.val_budgets=[1]")
    with pytest.raises(InputError, match="per-trajectory graphs"):
        tiny_config(tmp_path, "data.val_budgets=[4]", "model.merge_evidence=true")


def test_new_training_fields_validate(tmp_path):
    with pytest.raises(InputError, match="subset_min <= data.subset_max"):
        tiny_config(tmp_path, "data.subset_min=4", "data.subset_max=3")
    with pytest.raises(InputError, match="early_stopping must be >= 0"):
        tiny_config(tmp_path, "optim.early_stopping=-1")
    with pytest.raises(InputError, match="per-trajectory graphs"):
        tiny_config(tmp_path, "data.subsets=true", "model.merge_answers=true")


def test_paper_and_grounded_recipes():
    paper = load_config(TrainConfig, ROOT / "training" / "wikileads.yaml")
    ours = load_config(TrainConfig, ROOT / "training" / "wikileads-grounded.yaml")
    assert paper.model.method == "trace" and ours.model.method == "trace_grounded"
    for cfg in (paper, ours):
        assert cfg.data.subsets and cfg.optim.tie_break and cfg.optim.early_stopping > 0
        assert cfg.data.min_val_questions >= 150
    assert paper.name != ours.name


def test_old_resolved_configs_keep_their_behaviour():
    # Saved before the subset / validation-size / tie-break / early-stopping fields existed.
    old = load_config(TrainConfig, ROOT / "checkpoints" / "wikileads-0.5b-grounded" / "training_config.yaml")
    assert not old.data.subsets and old.data.min_val_questions == 0 and old.data.val_budgets == []
    assert old.optim.monitor == "val/acc" and old.optim.early_stopping == 0
    assert old.model.method == "trace_grounded"  # what the shipped selector is, whatever its folder is called


def test_majority_accuracy_counts_the_most_frequent_answer_first_on_ties():
    from torch_geometric.data import HeteroData

    from trace_selector.train import majority_accuracy

    def graph(counts: list[int], right: list[float]) -> HeteroData:
        g = HeteroData()
        g["answer"].vote = torch.tensor([[float(torch.tensor(c).log1p()), c / len(counts), 0.0, 0.0] for c in counts])
        g["answer"].y = torch.tensor(right)
        return g

    wins = graph([1, 2, 2], [0.0, 1.0, 1.0])            # the pair's answer is right
    loses = graph([3, 3, 3, 1], [0.0, 0.0, 0.0, 1.0])   # the lone right answer is outvoted
    tie = graph([1, 1], [0.0, 1.0])                      # a tie goes to the first trajectory
    assert majority_accuracy([wins, loses, tie]) == pytest.approx(1 / 3)
    assert majority_accuracy([]) is None


def test_val_majority_is_logged_and_reported(tmp_path):
    result = train(tiny_config(tmp_path))
    rows = (next((tmp_path / "tiny").glob("logs/*/metrics.csv"))).read_text().splitlines()
    header = rows[0].split(",")
    logged = [float(r.split(",")[header.index("val/majority")]) for r in rows[1:] if r.split(",")[header.index("val/majority")]]
    assert logged and all(v == pytest.approx(result.val_majority_acc) for v in logged)
    assert "val_majority_accuracy" in (result.selector_dir / "README.md").read_text()


def test_seeds_keep_the_best_on_validation_and_resume_without_retraining(tmp_path, capsys):
    args = ["train", *TINY, f"out_dir={tmp_path}", "--seeds", "0,1"]
    assert main(args) == 0
    run = tmp_path / "tiny"
    table = json.loads((run / "seeds.json").read_text())["seeds"]
    assert [r["seed"] for r in table] == [0, 1] and sum(r["chosen"] for r in table) == 1
    best = max(table, key=lambda r: r["score"])  # the first of equal scores
    assert next(r for r in table if r["chosen"])["seed"] == best["seed"]
    kept = run / f"seed-{best['seed']}" / "selector" / "model.safetensors"
    assert (run / "selector" / "model.safetensors").read_bytes() == kept.read_bytes()
    assert "<- kept" in capsys.readouterr().out
    # the kept selector's card names its own folder, the seed it is and where the others' scores are
    card = (run / "selector" / "README.md").read_text()
    assert f'from_pretrained("{run / "selector"}")' in card and f"seed-{best['seed']}" not in card
    assert f"| seed | {best['seed']} (the best on validation of seeds 0, 1; every seed's scores in `seeds.json`) |" in card
    assert "the checkpoint was chosen on them" in card
    assert json.loads((run / "selector" / "seeds.json").read_text())["seeds"] == table
    stamp = (run / "seed-0" / "checkpoints" / "best.ckpt").stat().st_mtime_ns
    assert main(args) == 0  # both seeds finished: read back, not retrained
    assert (run / "seed-0" / "checkpoints" / "best.ckpt").stat().st_mtime_ns == stamp


@pytest.mark.slow  # two spawned processes import torch and Lightning afresh
def test_seeds_in_worker_processes_train_what_one_process_trains(tmp_path, capsys):
    """--jobs 2 trains the seeds in two spawned processes: the same scores and steps per seed as one
    after another, the same seed kept, and a rerun reads both back."""
    one = ["train", *TINY, f"out_dir={tmp_path / 'one'}", "--seeds", "0,1"]
    two = ["train", *TINY, f"out_dir={tmp_path / 'two'}", "--seeds", "0,1", "--jobs", "2"]
    assert main(one) == 0 and main(two) == 0
    tables = [json.loads((tmp_path / d / "tiny" / "seeds.json").read_text())["seeds"] for d in ("one", "two")]
    assert tables[0] == tables[1] and [r["seed"] for r in tables[1]] == [0, 1]
    assert all((tmp_path / "two" / "tiny" / f"seed-{s}" / "selector" / "model.safetensors").is_file() for s in (0, 1))
    stamp = (tmp_path / "two" / "tiny" / "seed-1" / "checkpoints" / "best.ckpt").stat().st_mtime_ns
    assert main(two) == 0  # finished: read back, no worker started
    assert (tmp_path / "two" / "tiny" / "seed-1" / "checkpoints" / "best.ckpt").stat().st_mtime_ns == stamp
    capsys.readouterr()
    assert main(["train", *TINY, f"out_dir={tmp_path}", "--jobs", "2"]) != 0
    assert "--jobs needs --seeds" in capsys.readouterr().err


def test_seeds_must_be_distinct_integers(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", *TINY, f"out_dir={tmp_path}", "--seeds", "0,x"])
    assert "comma-separated integers" in capsys.readouterr().err
    assert main(["train", *TINY, f"out_dir={tmp_path}", "--seeds", "1,1"]) != 0
    assert "distinct seeds" in capsys.readouterr().err


def test_sigterm_during_fit_exits_nonzero_and_leaves_no_selector(tmp_path):
    # The signal is sent from inside the first training step, so the test does not race a timer.
    script = f"""
import os, signal, sys
sys.path.insert(0, {str(ROOT)!r})
import torch
torch.set_num_threads(1)
from trace_selector import train as t
from tests.test_train import tiny_config
step = t.SelectorModule.training_step
def stepped(self, batch, batch_idx):
    os.kill(os.getpid(), signal.SIGTERM)
    return step(self, batch, batch_idx)
t.SelectorModule.training_step = stepped
t.train(tiny_config(__import__('pathlib').Path({str(tmp_path)!r}), "optim.epochs=3"))
print("finished")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == EXIT_CODE, proc.stderr[-2000:]  # what every interrupted command exits with
    assert "finished" not in proc.stdout
    assert not (tmp_path / "tiny" / "selector").exists()


@pytest.mark.parametrize("recipe", sorted(p.name for p in (Path(__file__).parents[1] / "training").glob("*.yaml")))
def test_every_training_recipe_loads_and_names_its_method(recipe):
    from trace_selector.config import load_config

    cfg = load_config(TrainConfig, Path(__file__).parents[1] / "training" / recipe)
    ours = recipe.endswith(("grounded.yaml", "browsing.yaml", "synthetic.yaml"))
    assert cfg.model.method == ("trace_grounded" if ours else "trace")
    if recipe == "wikihops-official.yaml":  # the official TRACE optimiser settings, nothing else changed
        base = load_config(TrainConfig, Path(__file__).parents[1] / "training" / "wikihops.yaml")
        assert (cfg.optim.lr, cfg.optim.weight_decay, cfg.model.hidden, cfg.model.dropout, cfg.data.subsets) == (
            3e-4, 1e-4, 256, 0.1, False)
        assert cfg.model.layers == base.model.layers and cfg.data.train_pool == base.data.train_pool

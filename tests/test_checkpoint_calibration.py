"""`trace-selector calibrate`: the temperature it saves beside a checkpoint is the one evaluate fits on
the same pool, evaluate's adaptive rows and the adaptive rollout read it back, and bad input leaves
the checkpoint untouched."""

from __future__ import annotations

import json

import pytest

from tests.conftest import one_thread, toy_selector
from trace_selector.cli import main
from trace_selector.checkpoint_calibration import CheckpointCalibration
from trace_selector.records import read_pool, write_pool
from trace_selector.records.synthetic import SyntheticConfig, make_pool

_one_thread = pytest.fixture(autouse=True)(one_thread)


@pytest.fixture()
def checkpoint(tmp_path):
    return toy_selector(tmp_path / "ckpt")


@pytest.fixture()
def pool_path(tmp_path):
    path = tmp_path / "dev.jsonl"
    write_pool(make_pool(SyntheticConfig(questions=8, k=7, k_min=5, seed=5)), path)
    return path


def test_saved_temperature_is_evaluates_fit_and_is_read_back(tmp_path, checkpoint, pool_path, capsys):
    plot = tmp_path / "rel.png"
    assert main(["calibrate", "--checkpoint", str(checkpoint), "--pool", str(pool_path), "--plot", str(plot)]) == 0
    saved = json.loads((checkpoint / "calibration.json").read_text())
    assert "-> " + str(checkpoint / "calibration.json") in capsys.readouterr().out
    assert saved["pool"] == str(pool_path) and saved["questions"] == 8 and saved["k"] == 7 and saved["wave"] == 2
    assert 1e-2 <= saved["temperature"] <= 1e3 and saved["picks"] == sum(-(-len(g.trajectories) // 2) for g in
                                                                          read_pool(pool_path).groups)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def adaptive_row(*extra):
        out = tmp_path / "r.json"
        assert main(["evaluate", "--pool", str(pool_path), "--checkpoint", str(checkpoint), "--out", str(out),
                     "--methods", "trace,trace_adaptive", "--no-budget", "bootstrap=20", *extra]) == 0
        return json.loads(out.read_text())["methods"]["trace_adaptive"]["calibration"]

    fitted = adaptive_row(f"adaptive.calibration_pool={pool_path}")  # evaluate's own fit on the same pool
    assert fitted["temperature"] == saved["temperature"] and fitted["n"] == saved["picks"]
    read = adaptive_row()  # no temperature given: the checkpoint's file
    assert read["temperature_source"] == str(checkpoint / "calibration.json")
    assert read["temperature"] == saved["temperature"] and read["ece"] == saved["ece"]
    given = adaptive_row("adaptive.temperature={trace_adaptive: 3.0}")  # a given one still wins
    assert given["temperature_source"] == "given" and given["temperature"] == 3.0


def test_dry_run_writes_nothing_and_the_training_pool_is_flagged(checkpoint, pool_path, capsys):
    (checkpoint / "training_config.yaml").write_text(f"data:\n  train_pool: {pool_path}\n")
    assert main(["calibrate", "--checkpoint", str(checkpoint), "--pool", str(pool_path), "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert "temperature " in captured.out and "-> " not in captured.out
    assert "is the pool" in captured.err and "trained on" in captured.err
    assert not (checkpoint / "calibration.json").exists()


def test_bad_input_is_one_line_and_keeps_the_old_file(tmp_path, checkpoint, pool_path, capsys):
    old = '{"temperature": 0.5}\n'
    (checkpoint / "calibration.json").write_text(old)
    unlabelled = make_pool(SyntheticConfig(questions=3, k=7, k_min=5, seed=1))
    for g in unlabelled.groups:
        g.golden_answers = []
        for t in g.trajectories:
            t.golden_answers, t.correct = [], None
    write_pool(unlabelled, tmp_path / "unlabelled.jsonl")
    unanimous = make_pool(SyntheticConfig(questions=2, k=7, k_min=5, seed=1))
    for g in unanimous.groups:
        for t in g.trajectories:
            t.answer = "same"
    write_pool(unanimous, tmp_path / "unanimous.jsonl")
    cases = [
        (["--pool", str(tmp_path / "unlabelled.jsonl")], "no gold answers or correctness labels"),
        (["--pool", str(tmp_path / "unanimous.jsonl")], "every scored pick is unanimous"),
        (["--pool", str(pool_path), "--wave", "0"], "--wave must be >= 1"),
        (["--pool", str(pool_path), "--questions", "0"], "no questions to calibrate on"),
    ]
    for args, message in cases:
        assert main(["calibrate", "--checkpoint", str(checkpoint), *args]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert (checkpoint / "calibration.json").read_text() == old
    folder = tmp_path / "not-a-checkpoint"
    folder.mkdir()
    assert main(["calibrate", "--checkpoint", str(folder), "--pool", str(pool_path)]) == 1
    assert "config.json" in capsys.readouterr().err and not (folder / "calibration.json").exists()


def test_a_fit_at_the_end_of_the_range_is_flagged():
    def record(t):
        return CheckpointCalibration(t, "p", 1, 4, 2, 2, 0, 0.3, 0.2)

    assert record(1000.0).at_bound and record(0.01).at_bound
    assert not record(2.25).at_bound and record(2.25).to_dict()["temperature"] == 2.25


def test_a_hub_id_is_read_from_its_snapshot(tmp_path, monkeypatch):
    from trace_selector.model import hub

    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    fetched = []
    monkeypatch.setattr(hub, "resolve", lambda repo, *args: fetched.append(repo) or snapshot)
    assert hub.read_temperature("owner/selector") is None  # fetched, but published without a calibration
    (snapshot / "calibration.json").write_text('{"temperature": 1.7}')
    assert hub.read_temperature("owner/selector") == 1.7 and fetched == ["owner/selector"] * 2
    assert hub.read_temperature(tmp_path / "missing") is None and len(fetched) == 2  # a path is never fetched
    assert "calibration.json" in hub.FILES  # downloaded and published with the weights

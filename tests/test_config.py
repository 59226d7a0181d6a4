"""Config resolution: defaults < YAML < key=value overrides, with clear errors."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from trace_selector.config import dump_config, load_config, merge_overrides
from trace_selector.errors import InputError


@dataclass
class Optim:
    lr: float = 1e-3
    """Learning rate."""

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@dataclass
class Run:
    name: str = "run"
    """Run name."""
    epochs: int = 3
    """Epochs."""
    optim: Optim = field(default_factory=Optim)
    """Optimiser."""


def test_defaults_yaml_overrides_precedence(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("epochs: 5\noptim:\n  lr: 0.01\n")
    cfg = load_config(Run, cfg_file, ["optim.lr=3e-4", "name=abc"])
    assert cfg.epochs == 5
    assert cfg.optim.lr == pytest.approx(3e-4)
    assert cfg.name == "abc"
    assert isinstance(cfg.optim, Optim)


def test_unknown_key_names_it(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("epoch: 5\n")
    with pytest.raises(InputError, match=r"unknown key\(s\) epoch"):
        load_config(Run, cfg_file)


def test_post_init_error_becomes_input_error():
    with pytest.raises(InputError, match="optim: lr must be > 0"):
        load_config(Run, None, ["optim.lr=-1"])


def test_bad_override_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="expected key=value"):
        merge_overrides({}, ["lr"])
    with pytest.raises(InputError, match="config file not found"):
        load_config(Run, tmp_path / "nope.yaml")


def test_dump_round_trip(tmp_path):
    cfg = load_config(Run, None, ["epochs=7"])
    dump_config(cfg, tmp_path / "resolved.yaml")
    again = load_config(Run, tmp_path / "resolved.yaml")
    assert again == cfg


def test_unreadable_scalar_names_field():
    with pytest.raises(InputError, match=r"config.epochs: cannot read 'many' as int"):
        load_config(Run, None, ["epochs=many"])


def test_unknown_key_suggests_close_matches():
    with pytest.raises(InputError, match=r"unknown key\(s\) epoch \(did you mean epochs\?\); known: "):
        load_config(Run, None, ["epoch=5"])
    # a nested key given at the top level points at its section
    with pytest.raises(InputError, match=r"unknown key\(s\) lr \(did you mean optim\.lr\?\)"):
        load_config(Run, None, ["lr=0.1"])
    with pytest.raises(InputError, match=r"config.optim: unknown key\(s\) lrr \(did you mean lr\?\)"):
        load_config(Run, None, ["optim.lrr=0.1"])


def test_config_keys_flatten_sections_with_docs_and_defaults():
    from trace_selector.config import config_keys, describe_keys, field_docs

    assert field_docs(Optim) == {"lr": "Learning rate."}
    keys = {k.key: k for k in config_keys(Run)}
    assert list(keys) == ["name", "epochs", "optim.lr"]
    assert (keys["optim.lr"].type, keys["optim.lr"].default, keys["optim.lr"].doc) == ("float", 1e-3, "Learning rate.")
    text = describe_keys(Run)
    assert "  optim.lr: float = 0.001\n      Learning rate." in text and "  name: str = run\n      Run name." in text


def _config_classes(cls, seen):
    """`cls` and every dataclass reachable through its fields."""
    import dataclasses
    import typing

    if cls in seen:
        return seen
    seen.append(cls)
    for tp in typing.get_type_hints(cls).values():
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            _config_classes(tp, seen)
    return seen


def test_every_config_field_has_a_docstring():
    """Adding a setting without a one-line doc fails here: the docs are what `--help` shows."""
    import dataclasses

    from trace_selector.config import field_docs
    from trace_selector.evaluate import EvalConfig
    from trace_selector.quickstart import QuickstartConfig
    from trace_selector.rollout.runner import RolloutConfig
    from trace_selector.train import TrainConfig

    classes = []
    for root in (EvalConfig, RolloutConfig, TrainConfig, QuickstartConfig):
        _config_classes(root, classes)
    assert len(classes) >= 12
    undocumented = [f"{cls.__qualname__}.{f.name}" for cls in classes for f in dataclasses.fields(cls)
                    if f.init and not field_docs(cls).get(f.name)]
    assert not undocumented, f"fields without a docstring: {undocumented}"

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

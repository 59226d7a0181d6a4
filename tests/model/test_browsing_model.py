"""The selector on TRACE long-horizon browsing graphs: the orphan-subquery learned state, and old
browsing checkpoints (graph layout 1) refused with a one-line error."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import orphan_group
from trace_selector.errors import InputError
from trace_selector.graph import build_graph
from trace_selector.graph.encoder import HashEncoder
from trace_selector.model import SelectorNet
from trace_selector.model.hub import save_selector
from trace_selector.model.selector_net import ModelConfig, SelectorNet


def small(**kw):
    return SelectorNet(ModelConfig(kind="browsing", embed_dim=8, hidden=8, heads=2, layers=1, **kw))


def test_orphan_state_enters_the_score():
    torch.manual_seed(0)
    data = build_graph(orphan_group(), HashEncoder(8))
    net = small()
    net(data).sum().backward()
    assert net.orphan["subquery"].grad.abs().sum() > 0
    # without orphans the state is unused
    net.zero_grad()
    data["subquery"].orphan = torch.zeros_like(data["subquery"].orphan)
    net(data).sum().backward()
    assert net.orphan["subquery"].grad is None or net.orphan["subquery"].grad.abs().sum() == 0


def test_old_browsing_checkpoint_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match=r"graph layout 1.*retrain") as err:
        ModelConfig.from_json({"kind": "browsing"}, where="old/config.json")
    assert "\n" not in str(err.value) and str(err.value).startswith("old/config.json: ")
    assert ModelConfig.from_json({"kind": "webqa"}).graph_version == 1  # WebQA graphs did not change
    out = save_selector(small(), tmp_path / "ckpt")
    assert SelectorNet.load_checkpoint(out).config.graph_version == 2
    cfg = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    del cfg["graph_version"]  # as saved before the long-horizon layout
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match=r"config\.json: browsing selector trained on graph layout 1"):
        SelectorNet.load_checkpoint(tmp_path / "ckpt")

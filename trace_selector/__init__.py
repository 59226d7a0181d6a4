"""trace_selector: pick the right answer among K parallel search-agent trajectories.

    from trace_selector import Selector
    selector = Selector.from_pretrained("checkpoints/wikileads")

Layers (lower never imports higher; tests/test_imports.py): errors, types, config, ... -> records/ (the
pool contract) -> search/, engines/ -> rollout/, graph/ -> model/ -> baselines/, selector, train ->
evaluate -> quickstart -> cli. Heavy dependencies are imported where they are used: the
names below are loaded on first access (PEP 562), so `import trace_selector` (and the CLI's
`--version`) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {"Selector": "trace_selector.selector", "Selection": "trace_selector.selector"}

if TYPE_CHECKING:
    from trace_selector.selector import Selection, Selector


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trace_selector' has no attribute {name!r}")


__all__ = ["Selection", "Selector", "__version__"]

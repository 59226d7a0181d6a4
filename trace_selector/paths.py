"""Where generated artefacts live when the user does not say: one cache root for data, indexes,
models and embeddings. Override with ``TRACE_SELECTOR_HOME`` (read once, by the CLI's defaults)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """Root of all generated artefacts (``$TRACE_SELECTOR_HOME`` or ``~/.cache/trace_selector``)."""
    env = os.environ.get("TRACE_SELECTOR_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "trace_selector"


def setting_dir(setting: str) -> Path:
    """Prepared files of one search setting (corpus, pages, questions, index)."""
    return home() / "settings" / setting


def models_dir() -> Path:
    """Policy models assembled by `trace-selector models prepare`."""
    return home() / "models"


def embeddings_dir() -> Path:
    """On-disk text-embedding cache of the graph encoder."""
    return home() / "embeddings"

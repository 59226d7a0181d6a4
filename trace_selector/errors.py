"""Errors that the CLI turns into one line on stderr and exit code 1.

Anything a user can cause with bad input (a malformed pool, a missing file, an unknown tag, a bad
config value) raises `InputError` or a subclass, never a bare `ValueError` from deep inside a library,
so the message can name the file, the line and the field.
"""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad user input. `str(err)` is the one line the CLI prints."""


class FormatError(InputError):
    """A record in a file is malformed.

    Args:
        path: the file.
        line: 1-based line (JSONL) or row (Parquet) number, or None when the whole file is bad.
        field: dotted path of the offending field (e.g. ``steps[2].search_result``), or None.
        message: what is wrong, in a few words.
    """

    def __init__(self, path: str | Path, line: int | None, field: str | None, message: str):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        where = self.path if line is None else f"{self.path}:{line}"
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {message}")


class MissingExtraError(InputError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, package: str, extra: str, feature: str):
        # extra "" marks a core dependency that a partial install left out.
        fix = f"pip install 'trace-selector[{extra}]'" if extra else f"a core dependency: pip install '{package}'"
        super().__init__(f"{feature} needs the '{package}' package: {fix}")

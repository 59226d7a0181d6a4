"""Atomic file output: write to a temporary file in the destination folder, fsync, then rename.

A reader (or a crash) therefore sees either the old file or the complete new one, never half of it;
this is how every output of the package is written. `check_writable` proves, before any work, that
an output can be written there (the CLI runs it on every output path of every command).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from trace_selector.errors import InputError


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary sibling of `path`; on clean exit rename it over `path`, on error delete it.

    `mode` is "w" (text) or "wb" (bytes). A path ending in ``.gz`` is gzip-compressed with mtime 0 so
    the same content always gives the same bytes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            if path.suffix == ".gz":
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                    if "b" in mode:
                        yield gz
                    else:
                        with open_text(gz, encoding) as text:
                            yield text
            elif "b" in mode:
                yield raw
            else:
                with open_text(raw, encoding) as text:
                    yield text
            raw.flush()
            os.fsync(raw.fileno())
        # mkstemp creates 0600 files; give the output the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def open_text(binary: IO[bytes], encoding: str | None) -> Iterator[IO[str]]:
    """Text view over a binary stream that does not close the stream when it is done."""
    import io

    wrapper = io.TextIOWrapper(binary, encoding=encoding or "utf-8", newline="\n")
    try:
        yield wrapper
    finally:
        wrapper.flush()
        wrapper.detach()


def check_writable(path: str | Path, label: str, folder: bool = False) -> None:
    """Raise a one-line `InputError` naming `label` and `path` unless an output can be written there.

    Missing parent folders are created (as the writers would); then a scratch file named like
    `atomic_write`'s temporary one is created and removed, which proves both the permission and that
    the name fits the file system. `folder`: `path` is an output folder rather than a file.
    """
    path = Path(path)
    if not folder and _is(path, Path.is_dir):
        raise InputError(f"{label} {path}: is a folder; give a file path")
    where = path if folder and _is(path, Path.is_dir) else path.parent
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, scratch = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=where)
        os.close(fd)
        os.unlink(scratch)
    except OSError as err:
        # mkdir's "File exists" hides the cause: a component of the path is a regular file.
        blocker = next((p for p in (where, *where.parents) if _is(p, Path.is_file)), None)
        reason = f"{blocker} is a file" if blocker is not None else err.strerror
        raise InputError(f"{label} {path}: cannot write there ({reason})") from None


def _is(path: Path, test) -> bool:
    """`test(path)`, False where the name itself is unusable (too long for the file system)."""
    try:
        return test(path)
    except OSError:
        return False

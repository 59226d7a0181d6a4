"""Quiet console output for a job of several stages: one progress bar per stage, with an ETA, on the
terminal; everything else the stage prints (library log lines, progress lines of libraries, the
output of child processes such as vLLM's engine core) goes to a log file.

    with output_to(out_dir / "quickstart.log") as term, Stage("live rollout", 120.0, term, "2/4"):
        run_the_stage()

The ETA of a stage comes from how long it took last time (the caller keeps those times), since a
stage such as an engine start reports no progress of its own. On a terminal that is not a TTY (a
CI log, `make demo > log`) a stage prints one line when it ends instead of a bar.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


@contextmanager
def output_to(log: str | Path) -> Iterator[TextIO]:
    """Point file descriptors 1 and 2 at `log` (appended) for the duration, so C libraries and child
    processes started inside write there too; yields a text stream to the original stderr."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    term = os.fdopen(os.dup(2), "w", buffering=1)
    try:
        with open(log, "a", encoding="utf-8") as fh:
            os.dup2(fh.fileno(), 1)
            os.dup2(fh.fileno(), 2)
            try:
                yield term
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        for fd in saved:
            os.close(fd)
        term.close()


class Stage:
    """One stage's bar on `stream`: elapsed and remaining time against `expected_s` seconds.

    Args:
        name: what the stage does, shown in front of the bar.
        expected_s: how long the stage took last time (the bar's total; past it, the bar stops at 99%
            and says so instead of giving an ETA).
        stream: the terminal (a TTY gets a bar, anything else one line at the end).
        label: position in the job, e.g. "2/4".
        tick_s: seconds between bar updates.
    """

    def __init__(self, name: str, expected_s: float, stream: TextIO, label: str = "", tick_s: float = 0.5):
        self.name = name
        self.expected_s = max(float(expected_s), 1.0)
        self.stream = stream
        self.desc = f"[{label}] {name}" if label else name
        self.tick_s = tick_s
        self.note = ""
        """Shown after the time when the stage ends (e.g. "12 trajectories")."""
        self.seconds = 0.0
        self._bar: Any = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def __enter__(self) -> Stage:
        self._t0 = time.perf_counter()
        if _is_tty(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=self.expected_s, desc=self.desc, file=self.stream, disable=False, leave=True,
                             bar_format="{desc}: {percentage:3.0f}%|{bar:24}| {elapsed}<{remaining}{postfix}")
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def _tick(self) -> None:
        over = False
        while not self._done.wait(self.tick_s):
            elapsed = time.perf_counter() - self._t0
            if elapsed >= 0.99 * self.expected_s:  # longer than last time: no ETA to give any more
                if not over:
                    self._bar.bar_format = "{desc}: {percentage:3.0f}%|{bar:24}| {elapsed} (past the estimate)"
                    over = True
                elapsed = 0.99 * self.expected_s
            self._bar.n = elapsed
            self._bar.refresh()

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self._t0
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        status = "failed" if exc_type is not None else f"{self.seconds:.1f} s"
        note = f", {self.note}" if self.note and exc_type is None else ""
        if self._bar is not None:
            self._bar.total = self._bar.n = max(self.seconds, 1e-9)
            self._bar.bar_format = "{desc}: {bar:24}| " + status + note
            self._bar.close()
        else:
            print(f"{self.desc}: {status}{note}", file=self.stream, flush=True)


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

"""Resumable pool writing: an append-only shard while running, one atomic pool file at the end.

While a rollout runs, every finished question group is appended to ``<pool>.shard.jsonl`` as its
trajectory lines plus one checkpoint line (cumulative accounting), in a single write followed by
flush + fsync. A kill therefore loses only in-flight groups. On restart `ShardWriter.resume`:

- ignores a torn last line (the write the kill interrupted); a bad line elsewhere is a FormatError;
- drops duplicate (question, sample) pairs, keeping the first;
- for coupled strategies (divinit, partial, replicas) drops groups with fewer than k samples, since
  their trajectories depend on each other and the group is regenerated whole;
- rewrites the shard atomically with what it kept and returns the finished (question, sample) pairs,
  which the runner skips.

`finalize` writes the pool and its ``.meta.json`` sidecar through `records.write_pool` (temp files +
rename), then removes the shard. While it runs, `snapshot` writes the same pool file now and then
and keeps the shard, so the finished part can be copied off a machine that may not last.

A finished pool can be extended (more questions, or more samples per question): `seed_from_pool`
turns it back into a shard, with its accounting as the starting totals, before `resume`. The pool
file itself is only replaced by a snapshot or when the extended run finalizes, each time with every
question it held before.

`PoolLock` keeps a second rollout off a pool that one is already writing: two writers appending to one
shard would interleave groups and double-count accounting.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from trace_selector.errors import FormatError, InputError
from trace_selector.records import Pool, PoolMeta, QuestionGroup, Trajectory

CHECKPOINT = "_checkpoint"
"""Key of the shard lines that carry cumulative accounting rather than a trajectory."""


def shard_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".shard.jsonl")


def lock_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".lock")


class PoolLock:
    """Exclusive lock on ``<pool>.lock`` for the lifetime of one rollout.

    It is an advisory `flock`, which the kernel drops when the holder dies (kill -9 included), so a
    crashed run never leaves a stale lock behind. The file holds the holder's pid for the error message
    and is removed on release. On systems without `fcntl` the lock is a no-op.
    """

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.path = lock_path(out)
        self._fh: Any = None

    def __enter__(self) -> "PoolLock":
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock rather than no rollout
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fh = open(self.path, "a+", encoding="utf-8")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                fh.close()
                raise InputError(f"{self.out}: another rollout (pid {holder}) is writing this pool; wait for it "
                                 f"or stop it, then rerun the same command to resume") from None
            # The previous holder may have unlinked the file between our open and flock: then we hold a
            # lock on a file nobody else can see, so start over on the current one.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fh.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            fh.close()
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self.path.unlink(missing_ok=True)  # before closing, so nobody locks the old inode after us
            self._fh.close()
            self._fh = None


class ShardWriter:
    """Append-only, fsynced shard of finished trajectory groups for pool `out`."""

    def __init__(self, out: str | Path, k: int, coupled: bool):
        self.out = Path(out)
        self.path = shard_path(out)
        self.k = k
        self.coupled = coupled
        self.rows: list[dict[str, Any]] = []
        self.checkpoint: dict[str, Any] = {}
        self.dropped = 0
        """Lines discarded on resume (torn, duplicate, or part of an incomplete coupled group)."""

    def resume(self) -> dict[str, set[int]]:
        """Load and compact an existing shard; return question id -> finished sample ids."""
        if not self.path.exists():
            return {}
        raw = self.path.read_text(encoding="utf-8").split("\n")
        if raw and raw[-1] == "":
            raw.pop()
        rows, seen = [], set()
        for lineno, line in enumerate(raw, start=1):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                if lineno == len(raw):  # the write a kill interrupted
                    self.dropped += 1
                    break
                raise FormatError(self.path, lineno, None, f"not valid JSON ({err.msg})") from err
            if CHECKPOINT in obj:
                self.checkpoint = obj[CHECKPOINT]
                continue
            key = (str(obj.get("question_index", obj.get("qid"))), int(obj.get("sample_id", -1)))
            if key in seen:
                self.dropped += 1
                continue
            seen.add(key)
            rows.append(obj)
        if self.coupled:
            count: dict[str, int] = defaultdict(int)
            for obj in rows:
                count[_qid(obj)] += 1
            kept = [obj for obj in rows if count[_qid(obj)] >= self.k]
            self.dropped += len(rows) - len(kept)
            rows = kept
        self.rows = rows
        self._rewrite()
        done: dict[str, set[int]] = defaultdict(set)
        for obj in rows:
            done[_qid(obj)].add(int(obj["sample_id"]))
        return dict(done)

    def seed_from_pool(self, pool: Pool) -> None:
        """Start the shard from a finished pool's trajectories and accounting (no shard must exist)."""
        from trace_selector.records import trajectory_to_dict

        if self.path.exists():
            raise FileExistsError(f"{self.path}: a shard exists already; resume it instead")
        self.rows = [trajectory_to_dict(t) for g in pool.groups for t in g.trajectories]
        acct = dict(pool.meta.accounting) if pool.meta else {}
        extra = pool.meta.extra if pool.meta else {}
        self.checkpoint = {"accounting": acct, "stats": dict(extra.get("strategy_stats", {})),
                           "wall_seconds": float(acct.get("wall_seconds", 0.0)),
                           "engine": dict(extra.get("engine", {}))}
        self._rewrite()

    def _rewrite(self) -> None:
        from trace_selector.atomic import atomic_write

        with atomic_write(self.path) as fh:
            for obj in self.rows:
                fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
            if self.checkpoint:
                fh.write(json.dumps({CHECKPOINT: self.checkpoint}) + "\n")

    def append_group(self, trajectories: list[Trajectory], checkpoint: dict[str, Any]) -> None:
        """Append one question's finished trajectories and the cumulative accounting, durably."""
        from trace_selector.records import trajectory_to_dict

        rows = [trajectory_to_dict(t) for t in trajectories]
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        text += json.dumps({CHECKPOINT: checkpoint}) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        self.rows.extend(rows)
        self.checkpoint = checkpoint

    def questions(self) -> int:
        """Questions with at least one finished trajectory."""
        return len({_qid(obj) for obj in self.rows})

    def trajectories(self) -> list[Trajectory]:
        from trace_selector.records import trajectory_from_dict

        return [trajectory_from_dict(obj, str(self.path), i + 1) for i, obj in enumerate(self.rows)]

    def finalize(self, order: list[str], meta: PoolMeta, trajectories: list[Trajectory] | None = None) -> Pool:
        """Write the pool (questions in `order`, samples by id) atomically, then drop the shard.
        `trajectories`: `self.trajectories()` if the caller has them already (parsing is not free)."""
        pool = self._write_pool(order, meta, trajectories)
        self.path.unlink(missing_ok=True)
        return pool

    def snapshot(self, order: list[str], meta: PoolMeta, trajectories: list[Trajectory] | None = None) -> Pool:
        """Write the pool of what is finished so far atomically and keep the shard: a later resume
        still starts from the shard, and without it (another machine) the pool is extended."""
        return self._write_pool(order, meta, trajectories)

    def _write_pool(self, order: list[str], meta: PoolMeta, trajectories: list[Trajectory] | None) -> Pool:
        from trace_selector.records import write_pool

        by_q: dict[str, list[Trajectory]] = defaultdict(list)
        for t in self.trajectories() if trajectories is None else trajectories:
            by_q[str(t.question_id)].append(t)
        groups = []
        for qid in order:
            ts = sorted(by_q.pop(qid, []), key=lambda t: t.sample_id)
            if ts:
                groups.append(QuestionGroup(qid, ts[0].question, list(ts[0].golden_answers), ts))
        for qid, ts in by_q.items():  # finished questions outside `order` (an earlier, wider run)
            ts.sort(key=lambda t: t.sample_id)
            groups.append(QuestionGroup(qid, ts[0].question, list(ts[0].golden_answers), ts))
        pool = Pool(groups=groups, meta=meta, path=str(self.out))
        write_pool(pool, self.out)  # also writes the .meta.json sidecar, both atomically
        return pool


def _qid(obj: dict[str, Any]) -> str:
    return str(obj.get("question_index", obj.get("qid")))

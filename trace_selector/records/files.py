"""Pool files: records in and out of JSONL, gzipped JSONL and Parquet, the ``.meta.json`` sidecar,
and `read_pool` / `write_pool`, which check a whole pool on top of the per-record `codec`.

`iter_jsonl` is the package's one JSONL reader (pools, corpora, pages, questions). Every failure
here is a `FormatError` naming the file, the 1-based line (JSONL) or row (Parquet), and the field: a
line that is not JSON, a truncated gzip stream, a corrupt Parquet file, an empty file, an unknown
extension, a missing file, or a field of the wrong type (through `codec.Checker`).

Parquet files hold one row per record. Scalar columns stay native; any other column is stored as JSON
text and listed under the schema metadata key ``trace_selector`` (``{"json_columns": [...]}``), so
every value reads back exactly. Files from other tools without that key are read as Arrow gives them
(nested columns become lists and dicts); a null cell counts as an absent field.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Collection, Iterator
from dataclasses import asdict, fields
from pathlib import Path
from typing import IO, Any

from trace_selector.atomic import atomic_write
from trace_selector.errors import FormatError, InputError
from trace_selector.records.aggagent import AggAgentRows, is_aggagent_row
from trace_selector.records.codec import SCALAR_KEYS, Checker, show, trajectory_from_dict, trajectory_to_dict
from trace_selector.records.labels import Labels, labels_from_records, labels_path
from trace_selector.records.trajectory import Pool, PoolMeta, QuestionGroup, Trajectory

EXTENSIONS: dict[str, str] = {".jsonl.gz": "jsonl.gz", ".jsonl": "jsonl", ".parquet": "parquet"}
"""Pool file extensions and the format each names."""


def pool_format(path: str | Path) -> str:
    """"jsonl", "jsonl.gz" or "parquet" from the file name; `FormatError` for anything else."""
    name = Path(path).name
    for suffix, fmt in EXTENSIONS.items():
        if name.endswith(suffix):
            return fmt
    raise FormatError(path, None, None, "unknown pool extension; expected .jsonl, .jsonl.gz or .parquet")


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Stream (1-based line number, object) of every non-blank line of a JSONL file, gunzipping
    ``*.gz``; a line that is not a JSON object, a cut-off gzip stream or non-UTF-8 text is a `FormatError`."""
    path = Path(path)
    if not path.is_file():
        raise FormatError(path, None, None, "file not found")
    gz = path.name.endswith(".gz")
    n = 0
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8")) as f:
            for n, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    record = json.loads(text)
                except json.JSONDecodeError as err:
                    if gz and not text.endswith("\n"):
                        f.read()  # a cut-off last line: let the gzip reader report the truncation
                    raise FormatError(path, n, None, f"not valid JSON ({err.msg} at column {err.colno})") from None
                if not isinstance(record, dict):
                    raise FormatError(path, n, None, f"expected a JSON object, got {show(record)}")
                yield n, record
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        where = f"after line {n}" if n else "before the first line"
        raise FormatError(path, None, None, f"truncated or corrupt gzip stream {where} ({err})") from None
    except UnicodeDecodeError:
        raise FormatError(path, n + 1, None, "not UTF-8 text") from None


def _parquet_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = 0
    try:
        pf = pq.ParquetFile(path)
        info = json.loads((pf.schema_arrow.metadata or {}).get(b"trace_selector", b"{}"))
        json_columns = set(info.get("json_columns", []))
        for batch in pf.iter_batches(batch_size=512):
            for raw in batch.to_pylist():
                row += 1
                record = {}
                for key, value in raw.items():
                    if value is None:  # a null cell is an absent field
                        continue
                    if key in json_columns:
                        try:
                            value = json.loads(value)
                        except (TypeError, json.JSONDecodeError) as err:
                            raise FormatError(path, row, key, f"not a valid JSON column value ({err})") from None
                    record[key] = value
                yield row, record
    except (pa.ArrowException, OSError, ValueError) as err:  # FormatError is none of these
        what = f"corrupt Parquet data after row {row}" if row else "not a readable Parquet file"
        raise FormatError(path, None, None, f"{what} ({err})") from None


def read_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Stream (line or row number, dict) of every record; blank JSONL lines are skipped."""
    fmt = pool_format(path)
    p = Path(path)
    if not p.exists():
        raise FormatError(path, None, None, "no such file")
    if p.is_dir():
        raise FormatError(path, None, None, "is a directory, expected a pool file")
    count = 0
    for item in _parquet_records(p) if fmt == "parquet" else iter_jsonl(p):
        count += 1
        yield item
    if count == 0:
        raise FormatError(path, None, None, "empty file: no trajectories")


def _write_parquet(rows: list[dict[str, Any]], f: Any, scalar_columns: Collection[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(dict.fromkeys(k for row in rows for k in row))
    json_columns = [c for c in columns if c not in scalar_columns]
    def cell(row: dict[str, Any], c: str) -> Any:
        if c not in row:
            return None
        return json.dumps(row[c], ensure_ascii=False) if c in json_columns else row[c]

    table = pa.table({c: [cell(row, c) for row in rows] for c in columns})
    table = table.replace_schema_metadata({"trace_selector": json.dumps({"json_columns": json_columns})})
    pq.write_table(table, f, compression="zstd")


def write_records(rows: list[dict[str, Any]], f: IO, fmt: str, scalar_columns: Collection[str] = ()) -> None:
    """Write dict records to an open file: text for "jsonl"/"jsonl.gz", binary for "parquet".

    For Parquet, columns in `scalar_columns` are stored natively, all others as JSON text.
    """
    if fmt == "parquet":
        _write_parquet(rows, f, scalar_columns)
    else:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------------------------------
# Pools.


def read_labels(path: str | Path) -> Labels:
    """A labels file (JSONL; format in `records.labels`)."""
    return labels_from_records(iter_jsonl(path), path)


def _labels(path: str | Path, labels: str | Path | None) -> Labels | None:
    """The labels to apply: the file given, else the pool's ``.labels.jsonl`` sidecar if there is one."""
    if labels is not None:
        return read_labels(labels)
    sidecar = labels_path(path)
    return read_labels(sidecar) if sidecar.is_file() else None


def _numbered(path: str | Path, labels: str | Path | None = None) -> Iterator[tuple[int, Trajectory]]:
    foreign = AggAgentRows(path)  # AggAgent's published rollouts read as browsing records
    judged = _labels(path, labels)
    for line, record in read_records(path):
        if is_aggagent_row(record):
            record = foreign.to_record(record, line)
        t = trajectory_from_dict(record, path, line)
        yield line, t if judged is None else judged.apply(t)


def iter_trajectories(path: str | Path, labels: str | Path | None = None) -> Iterator[Trajectory]:
    """Stream the trajectories of a pool file one by one (per-record checks only; see `read_pool`)."""
    for _, t in _numbered(path, labels):
        yield t


def read_pool(path: str | Path, labels: str | Path | None = None) -> Pool:
    """Read a pool and its sidecar metadata, grouped by question in first-seen order.

    Beyond per-record checks this rejects a duplicate (question, sample_id), a question id whose text
    or gold answers differ between lines, and WebQA- and browsing-style records mixed in one file.
    `labels` names a labels file (`records.labels`); without it, ``<path>.labels.jsonl`` is read
    when it exists.
    """
    groups: dict[str, QuestionGroup] = {}
    first: dict[str, int] = {}
    seen: dict[tuple[str, int], int] = {}
    style_line: tuple[str, int] | None = None
    for line, t in _numbered(path, labels):
        if style_line is None:
            style_line = (t.style, line)
        elif t.style != style_line[0]:
            key = "qid" if t.style == "browsing" else "question_index"
            msg = f"{t.style}-style record in a {style_line[0]}-style pool (see line {style_line[1]})"
            raise FormatError(path, line, key, msg)
        key2 = (t.question_id, t.sample_id)
        if key2 in seen:
            msg = f"duplicate trajectory (question {t.question_id!r}, sample_id {t.sample_id}), also on line {seen[key2]}"
            raise FormatError(path, line, "sample_id", msg)
        seen[key2] = line
        group = groups.get(t.question_id)
        if group is None:
            groups[t.question_id] = QuestionGroup(t.question_id, t.question, list(t.golden_answers), [t])
            first[t.question_id] = line
            continue
        if t.question != group.question:
            msg = f"question {t.question_id!r} has a different text on line {first[t.question_id]}"
            raise FormatError(path, line, "question", msg)
        if t.golden_answers != group.golden_answers:
            msg = f"question {t.question_id!r} has different golden_answers on line {first[t.question_id]}"
            raise FormatError(path, line, "golden_answers", msg)
        group.trajectories.append(t)
    return Pool(list(groups.values()), read_meta(path), str(path))


def _check_writable(pool: Pool) -> list[Trajectory]:
    trajectories = list(pool.trajectories())
    if not trajectories:
        raise InputError("refusing to write an empty pool (a pool file needs at least one trajectory)")
    keys = {(t.question_id, t.sample_id) for t in trajectories}
    if len(keys) != len(trajectories):
        raise ValueError("pool has duplicate (question_id, sample_id) pairs")
    if len({t.style for t in trajectories}) > 1:
        raise ValueError("pool mixes WebQA- and browsing-style trajectories")
    for group in pool.groups:
        for t in group.trajectories:
            if (t.question_id, t.question, t.golden_answers) != (group.question_id, group.question, group.golden_answers):
                raise ValueError(f"trajectory {t.sample_id} of {group.question_id!r} disagrees with its group")
    return trajectories


def write_pool(pool: Pool, path: str | Path) -> None:
    """Write `pool` (.jsonl, .jsonl.gz or .parquet by extension) and its ``.meta.json`` sidecar.

    Both files go to temporary siblings first and are renamed into place only when both are complete,
    so an error (or a crash) leaves any existing pool untouched.
    """
    fmt = pool_format(path)
    rows = [trajectory_to_dict(t) for t in _check_writable(pool)]
    mode = "wb" if fmt == "parquet" else "w"
    with atomic_write(meta_path(path)) as meta_file, atomic_write(path, mode) as f:
        write_records(rows, f, fmt, SCALAR_KEYS)
        meta_file.write(_meta_json(pool.meta))


# --------------------------------------------------------------------------------------------------
# Pool metadata sidecar.


def meta_path(pool_path: str | Path) -> Path:
    """The sidecar of a pool: ``<pool path>.meta.json``."""
    return Path(f"{pool_path}.meta.json")


def _meta_json(meta: PoolMeta) -> str:
    return json.dumps(asdict(meta), ensure_ascii=False, indent=2) + "\n"


def meta_field(pool_path: str | Path, dotted: str) -> Any:
    """One field of the pool's sidecar by dotted path (``extra.snapshot``), read without the pool."""
    path = meta_path(pool_path)
    if not path.exists():
        raise InputError(f"{path}: no sidecar next to the pool")
    value: Any = asdict(read_meta(pool_path))
    keys = dotted.split(".")
    for depth, key in enumerate(keys):
        if not isinstance(value, dict) or key not in value:
            raise FormatError(path, None, ".".join(keys[: depth + 1]), "no such field")
        value = value[key]
    return value


def read_meta(pool_path: str | Path) -> PoolMeta:
    """The pool's sidecar metadata, or an empty `PoolMeta` when there is none. Unknown keys go to `extra`."""
    path = meta_path(pool_path)
    if not path.exists():
        return PoolMeta()
    c = Checker(path, None)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        c.fail(None, f"not valid JSON ({err})")
    if not isinstance(d, dict):
        c.fail(None, f"expected a JSON object, got {show(d)}")
    is_dict = lambda v: isinstance(v, dict)  # noqa: E731
    unknown = {k: v for k, v in d.items() if k not in {f.name for f in fields(PoolMeta)}}
    return PoolMeta(
        setting=c.str_(d, "setting", "setting", None),
        split=c.str_(d, "split", "split", None),
        policy_model=c.str_(d, "policy_model", "policy_model", None),
        strategy=c.str_(d, "strategy", "strategy", None),
        sampling=c.get(d, "sampling", "sampling", {}, is_dict, "an object"),
        logprob_mode=c.str_(d, "logprob_mode", "logprob_mode", None),
        vllm_version=c.str_(d, "vllm_version", "vllm_version", None),
        seed=c.int_(d, "seed", "seed", None),
        accounting=c.get(d, "accounting", "accounting", {}, is_dict, "an object"),
        extra={**c.get(d, "extra", "extra", {}, is_dict, "an object"), **unknown},
    )


def write_meta(meta: PoolMeta, pool_path: str | Path) -> None:
    """Write the sidecar ``<pool path>.meta.json`` atomically."""
    with atomic_write(meta_path(pool_path)) as f:
        f.write(_meta_json(meta))

"""Raw pool records: dicts in and out of JSONL, gzipped JSONL and Parquet files, with typed field access.

This is the file layer under `trace_selector.records`, which gives the dicts their meaning. Every
failure here is a `FormatError` naming the file, the 1-based line (JSONL) or row (Parquet), and the
field: a line that is not JSON, a truncated gzip stream, a corrupt Parquet file, an empty file, an
unknown extension, a missing file, or a field of the wrong type (through `Checker`).

Parquet files hold one row per record. Scalar columns stay native; any other column is stored as JSON
text and listed under the schema metadata key ``trace_selector`` (``{"json_columns": [...]}``), so
every value reads back exactly. Files from other tools without that key are read as Arrow gives them
(nested columns become lists and dicts); a null cell counts as an absent field.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

from trace_selector.errors import FormatError

EXTENSIONS: dict[str, str] = {".jsonl.gz": "jsonl.gz", ".jsonl": "jsonl", ".parquet": "parquet"}
"""Pool file extensions and the format each names."""
REQUIRED = object()
"""Default of `Checker` getters for a field that must be present."""


def show(v: Any) -> str:
    """Type and a short JSON preview of a value, for messages ("str \"0\"")."""
    text = json.dumps(v, ensure_ascii=False, default=str)
    return f"{type(v).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


class Checker:
    """Typed access to the fields of one raw record; every failure is a `FormatError`.

    Getters take the dict, the key, the field path for messages (``steps[1].content``) and a default;
    a missing or null field returns the default, or fails when the default is `REQUIRED`.
    """

    def __init__(self, path: str | Path, line: int | None):
        self.path, self.line = path, line

    def fail(self, where: str | None, message: str) -> NoReturn:
        raise FormatError(self.path, self.line, where, message)

    def get(self, d: dict, key: str, where: str, default: Any, ok: Callable[[Any], bool], expected: str) -> Any:
        v = d.get(key)
        if v is None:
            if default is REQUIRED:
                self.fail(where, "missing" if key not in d else "is null")
            return default
        if not ok(v):
            self.fail(where, f"expected {expected}, got {show(v)}")
        return v

    def str_(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        return self.get(d, key, where, default, lambda v: isinstance(v, str), "a string")

    def int_(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        return self.get(d, key, where, default, is_int, "an integer")

    def float_(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        v = self.get(d, key, where, default, is_number, "a number")
        return float(v) if is_number(v) else v

    def bool_(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        return self.get(d, key, where, default, lambda v: isinstance(v, bool), "true or false")

    def str_list(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        ok = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
        return self.get(d, key, where, default, ok, "a list of strings")

    def float_list(self, d: dict, key: str, where: str, default: Any = REQUIRED) -> Any:
        ok = lambda v: isinstance(v, list) and all(is_number(x) for x in v)  # noqa: E731
        v = self.get(d, key, where, default, ok, "a list of numbers")
        return [float(x) for x in v] if isinstance(v, list) else v


def is_int(v: Any) -> bool:
    """An int that is not a bool (JSON true must not pass as 1)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def pool_format(path: str | Path) -> str:
    """"jsonl", "jsonl.gz" or "parquet" from the file name; `FormatError` for anything else."""
    name = Path(path).name
    for suffix, fmt in EXTENSIONS.items():
        if name.endswith(suffix):
            return fmt
    raise FormatError(path, None, None, "unknown pool extension; expected .jsonl, .jsonl.gz or .parquet")


def _jsonl_records(path: Path, gz: bool) -> Iterator[tuple[int, dict[str, Any]]]:
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
    for item in _parquet_records(p) if fmt == "parquet" else _jsonl_records(p, fmt == "jsonl.gz"):
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

"""Atomic writes: a failed write leaves the old file untouched and no temporary behind."""

from __future__ import annotations

import gzip

import pytest

from trace_selector.atomic import atomic_write


def test_failed_write_keeps_old_content(tmp_path):
    out = tmp_path / "pool.jsonl"
    out.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_write(out) as fh:
            fh.write("new partial")
            raise RuntimeError("boom")
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["pool.jsonl"]


def test_gzip_is_deterministic(tmp_path):
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    for path in (a, b):
        with atomic_write(path) as fh:
            fh.write('{"x": 1}\n')
    assert a.read_bytes() == b.read_bytes()
    assert gzip.decompress(a.read_bytes()) == b'{"x": 1}\n'


def test_output_has_umask_permissions(tmp_path):
    import os

    out = tmp_path / "x.txt"
    with atomic_write(out) as fh:
        fh.write("x")
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask

"""notebooks/analysis.ipynb: executed end to end on the shipped test pool and checkpoint (docs/design.md §Layout:
notebooks run in tests so they never rot), and kept in the repository without outputs.

    pytest -m slow tests/test_notebook.py

The slow test fails (it does not skip) when the shipped pool or checkpoint is missing. TRACE_NB_POOL and
TRACE_NB_CHECKPOINT point it at other inputs, e.g. the small dev pool and a throwaway checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "analysis.ipynb"
POOL = ROOT / "data" / "pools" / "wikileads-dev.jsonl.gz"
CHECKPOINT = ROOT / "checkpoints" / "wikileads"
OUTCOMES = {"both_right", "only_trace_right", "only_majority_right", "both_wrong"}


def test_notebook_is_saved_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "no code cells"
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, "clear the notebook's outputs before saving"


def kernelspec(folder: Path) -> None:
    """A ``python3`` kernelspec that runs this interpreter (the venv), found first via JUPYTER_PATH,
    so a ``python3`` kernel registered elsewhere on the machine cannot take over."""
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"}))


def outputs(nb) -> tuple[str, list[str], int]:
    """All stream text, all Markdown outputs and the number of PNG outputs of an executed notebook."""
    text, markdown, pngs = [], [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"{out.ename}: {out.evalue}"
            if out.output_type == "stream":
                text.append(out.text)
            data = out.get("data", {})
            markdown += [data["text/markdown"]] if "text/markdown" in data else []
            pngs += "image/png" in data
    return "".join(text), markdown, pngs


@pytest.mark.slow
def test_notebook_runs_on_the_shipped_pool(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    pool = Path(os.environ.get("TRACE_NB_POOL") or POOL)
    checkpoint = Path(os.environ.get("TRACE_NB_CHECKPOINT") or CHECKPOINT)
    missing = [str(p) for p in (pool, checkpoint) if not (p if p.is_absolute() else ROOT / p).exists()]
    if missing:
        pytest.fail(f"missing {' and '.join(missing)}: the notebook test needs the shipped dev pool and selector "
                    "(data/pools/README.md, training/wikileads.yaml), or TRACE_NB_POOL / TRACE_NB_CHECKPOINT")
    kernelspec(tmp_path / "jupyter")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("TRACE_NB_POOL", str(pool))
    monkeypatch.setenv("TRACE_NB_CHECKPOINT", str(checkpoint))
    monkeypatch.setenv("TRACE_NB_OUT", str(tmp_path / "out"))

    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    text, markdown, pngs = outputs(nb)

    assert f"python     {sys.executable}\n" in text  # the kernel ran the venv's interpreter
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(results["methods"]) == {"single", "majority", "weighted_token", "grounded_vote", "fewest_tools", "most_tools", "trace"}
    assert all("em" in r for r in results["methods"].values()), "a method was skipped"
    assert {"trace", "majority", "oracle_pass_at_k"} <= set(results["budget_curve"])
    table = next(m for m in markdown if "| method | EM |" in m)
    assert "| trace |" in table and "| majority |" in table
    assert pngs >= 2  # budget curve and graph
    assert (tmp_path / "out" / "budget.png").stat().st_size > 0

    found = re.search(r"^disagreement counts: (\{.*\})$", text, re.MULTILINE)
    assert found, "no 'disagreement counts:' line"
    counts = json.loads(found.group(1))
    assert set(counts) == OUTCOMES
    assert sum(counts.values()) == results["n_questions"] > 0
    differ = int(re.search(r"pick different answers on (\d+) of", text).group(1))
    assert counts["only_trace_right"] + counts["only_majority_right"] <= differ  # one right, one wrong: they differ
    assert sum(m.startswith("### Example") for m in markdown) == min(3, differ)

    nodes = json.loads(re.search(r"^nodes per type: (\{.*\})$", text, re.MULTILINE).group(1))
    assert set(nodes) == {"query", "subquery", "chunk", "answer"} and nodes["query"] == 1 and nodes["answer"] >= 1
    assert re.search(r"^edges per relation: \{.*\}$", text, re.MULTILINE)

"""The shipped pools keep their promises: the sealed test pool shares no question with any other pool
(so nothing was tuned on it), and every pool's sidecars name the same setting and split as its name."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

POOLS = Path(__file__).resolve().parents[2] / "data" / "pools"
SEALED = POOLS / "wikileads-test-sealed.jsonl.gz"


def _question_ids(path: Path) -> set[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return {str(d.get("question_index", d.get("qid"))) for d in map(json.loads, fh)}


def test_sealed_pools_share_no_question_with_any_other_pool():
    """Every sealed pool (wikileads, and wikihops once it is committed) against every other pool."""
    sealed_pools = sorted(POOLS.glob("*-test-sealed.jsonl.gz"))
    assert SEALED in sealed_pools
    for path in sealed_pools:
        sealed = _question_ids(path)
        assert sealed
        others = [p for p in POOLS.glob("*.jsonl.gz") if p != path]
        assert len(others) >= 5
        for other in others:
            shared = sealed & _question_ids(other)
            assert not shared, f"{other.name} shares {len(shared)} questions with {path.name}, e.g. {min(shared)}"


def test_sealed_pool_is_test_split_standard_k16():
    meta = json.loads(SEALED.with_name(SEALED.name + ".meta.json").read_text())
    assert (meta["split"], meta["strategy"], meta["extra"]["offset"]) == ("test", "standard", 300)
    with gzip.open(SEALED, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    per_question: dict[str, int] = {}
    for r in rows:
        per_question[r["question_index"]] = per_question.get(r["question_index"], 0) + 1
    assert set(per_question.values()) == {16}


def test_partial_rollout_pools_pair_40_dev_questions_no_pool_uses():
    """The partial-rollout benchmark's two pools (docs/results.md) hold the same 40 dev questions x 8,
    none of them in a shipped pool, so its comparison is paired and its questions fresh."""
    folder = POOLS.parents[1] / "experiments" / "results" / "wikihops-partial"
    pools = {name: folder / f"{name}.jsonl.gz" for name in ("standard", "partial-exploration")}
    counts = {}
    for name, path in pools.items():
        meta = json.loads(path.with_name(path.name + ".meta.json").read_text())
        assert (meta["setting"], meta["split"], meta["extra"]["offset"]) == ("wikihops", "dev", 350)
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            per_question: dict[str, int] = {}
            for r in map(json.loads, fh):
                per_question[r["question_index"]] = per_question.get(r["question_index"], 0) + 1
        assert len(per_question) == 40 and set(per_question.values()) == {8}
        counts[name] = per_question
    assert counts["standard"].keys() == counts["partial-exploration"].keys()
    for other in POOLS.glob("wikihops-*.jsonl.gz"):
        shared = set(counts["standard"]) & _question_ids(other)
        assert not shared, f"{other.name} shares {len(shared)} questions with the partial-rollout pools"

"""Two rollout strategies on the same questions, paired by question: every selection method's EM on
pool A minus its EM on pool B, with the paired bootstrap interval (DivInit against standard sampling
at matched compute: both pools at the same K, so the same number of trajectories per question).

Reads what `trace-selector evaluate --per-question` wrote for each pool (the same methods and
checkpoints on both); `oracle` is pass@K. Questions are paired by id; a question only one pool has is
left out and counted.

    .venv/bin/python experiments/strategy_comparison.py runs/ship-wikihops/divinit/per_question.jsonl \\
        runs/ship-wikihops/standard150/per_question.jsonl --names divinit,standard --out divinit.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trace_selector.atomic import atomic_write
from trace_selector.errors import FormatError, InputError
from trace_selector.paired import paired_difference, points
from trace_selector.records.files import iter_jsonl


def read_scores(path: Path) -> dict[str, dict[str, float]]:
    """question id -> method -> EM (0..1) from a per-question JSONL (plain or gzip)."""
    out: dict[str, dict[str, float]] = {}
    for n, row in iter_jsonl(path):
        if "question_id" not in row:
            raise FormatError(path, n, "question_id", "missing")
        methods = row.get("methods")
        if not isinstance(methods, dict):
            raise FormatError(path, n, "methods", "missing or not an object of method -> {em: ...}")
        try:
            out[str(row["question_id"])] = {m: float(v["em"]) for m, v in methods.items()}
        except (KeyError, TypeError, ValueError):
            raise FormatError(path, n, "methods.<name>.em", "missing or not a number") from None
    if not out:
        raise FormatError(path, None, None, "no questions")
    return out


def compare(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per method present in both: EM of each (percent), and A - B paired over the shared questions."""
    shared = [q for q in a if q in b]
    if not shared:
        raise InputError("the two pools share no question: a paired comparison needs the same questions")
    methods = [m for m in a[shared[0]] if all(m in a[q] and m in b[q] for q in shared)]
    rows = {}
    for m in methods:
        x, y = [a[q][m] for q in shared], [b[q][m] for q in shared]
        pair = paired_difference(x, y)
        rows[m] = {"em_a": round(100 * sum(x) / len(x), 2), "em_b": round(100 * sum(y) / len(y), 2),
                   "diff": round(pair.diff, 2), "low": round(pair.low, 2), "high": round(pair.high, 2),
                   "won": pair.won, "lost": pair.lost}
    return {"questions": len(shared), "only_a": len(a) - len(shared), "only_b": len(b) - len(shared), "methods": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pool_a", type=Path, help="per-question JSONL of strategy A (evaluate --per-question)")
    ap.add_argument("pool_b", type=Path, help="per-question JSONL of strategy B, the same questions")
    ap.add_argument("--names", default="A,B", help="the two strategies' names in the table (default A,B)")
    ap.add_argument("--out", type=Path, default=None, help="also write the comparison as JSON")
    args = ap.parse_args(argv)
    names = args.names.split(",")
    try:
        if len(names) != 2 or not all(names):
            raise InputError(f"--names needs two comma-separated names, got {args.names!r}")
        result = compare(read_scores(args.pool_a), read_scores(args.pool_b))
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    a, b = names
    print(f"{result['questions']} questions paired ({result['only_a']} only in {a}, {result['only_b']} only in {b})\n")
    print(f"| method | {a} | {b} | {a} - {b} [95% CI] | won / lost |")
    print("|---|---:|---:|---|---:|")
    for m, r in result["methods"].items():
        print(f"| {'pass@K (oracle)' if m == 'oracle' else m} | {r['em_a']:.1f} | {r['em_b']:.1f} | "
              f"{points(r['diff'])} [{points(r['low'])}, {points(r['high'])}] | {r['won']} / {r['lost']} |")
    if args.out:
        with atomic_write(args.out) as f:
            f.write(json.dumps({"a": a, "b": b, "pool_a": str(args.pool_a), "pool_b": str(args.pool_b), **result},
                               indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

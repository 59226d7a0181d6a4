"""Where the shipped selectors stand against the targets they are shipped for.

Reads what `experiments/ship_wikileads.sh` (or `ship_wikihops.sh`) writes and prints one line per
target: the measured figure, then `met` or `MISSED`. It reports; it never fails a run, so a missed
target is read, not hidden.

    .venv/bin/python experiments/targets.py runs/ship/sealed                 # the final numbers
    .venv/bin/python experiments/targets.py runs/ship/dev --ablation runs/ship/ablation-dev.json \\
        --transfer runs/ship/transfer-wikileads-0.5b-dev runs/ship/transfer-wikileads-dev-divinit
    .venv/bin/python experiments/targets.py runs/ship-wikihops/dev --strategy runs/ship-wikihops/divinit-vs-standard.json \
        --partial benchmarks/rollout_strategies-wikihops.json --partial-pairs runs/ship-wikihops/partial-vs-standard.json

The targets (issue 15; issue 32 adds the stricter ablation rule), on the pool of RESULTS (results.json
of `trace-selector evaluate`):
- `trace` (the paper's configuration) at least majority vote + 3 EM, the paired 95% interval above 0;
- `trace` at least majority vote at every budget k of the curve, and `trace` at k=8 at least majority
  vote at the pool's full K;
- `trace_grounded` (ours) at least the best heuristic (`grounded_vote`, `weighted_token`) + 2 EM;
- every ablation of the paper configuration below the full model (`experiments/pool_ablation.py --out`);
  the variants named by --interval-above-zero (the multi-hop setting's `no_cross`, issue 32) with the
  paired interval of full minus the variant above 0 as well;
- with --strategy (the JSON of `experiments/strategy_comparison.py --out`, DivInit as A against standard
  sampling as B at the same K, issue 32): A's pass@K at least B's + 5, or a negative reported with its
  interval;
- with --partial (the JSON of `benchmarks/rollout_strategies.py --parts partial`, issue 32): partial
  rollout at least 15% fewer computed tokens than standard sampling at equal N, with pass@N at most 2
  points below standard's (--partial-pairs, the two pools' strategy comparison, adds the paired interval).
Transfer pools are listed against majority vote; no target, but a row below it must say so in its card.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from trace_selector.paired import points

HEURISTICS = ("grounded_vote", "weighted_token")
"""The heuristics `trace_grounded` has to beat."""


def load(path: Path) -> dict[str, Any]:
    """A JSON file, or a one-line error naming it."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        sys.exit(f"error: {path}: not found")
    except json.JSONDecodeError as e:
        sys.exit(f"error: {path}: line {e.lineno}: not JSON ({e.msg})")


def require(record: dict[str, Any], keys: tuple[str, ...], source: Path, writer: str) -> None:
    """A one-line error naming the file and the first missing top-level key of a record `writer` writes."""
    for key in keys:
        if key not in record:
            sys.exit(f"error: {source}: {key}: missing (not written by {writer}?)")


def method(results: dict[str, Any], name: str, source: Path) -> dict[str, Any]:
    """The results entry of one scored method, or a one-line error naming the file and the method."""
    entry = results.get("methods", {}).get(name)
    if entry is None or "em" not in entry:
        why = entry.get("skipped", "not in the file") if isinstance(entry, dict) else "not in the file"
        sys.exit(f"error: {source}: methods.{name}: {why}")
    return entry


def pair_text(pair: dict[str, Any]) -> str:
    """``+3.1 [+1.0, +5.2], 24 won / 9 lost``."""
    return f"{points(pair['diff'])} [{points(pair['low'])}, {points(pair['high'])}], {pair['won']} won / {pair['lost']} lost"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def pool_targets(results: dict[str, Any], source: Path) -> list[tuple[str, bool]]:
    """(line, met) for every target read from one results.json."""
    lines: list[tuple[str, bool]] = []
    trace, majority = method(results, "trace", source), method(results, "majority", source)
    pair = trace.get("vs_majority")
    if pair is None:
        sys.exit(f"error: {source}: methods.trace.vs_majority: missing (results of an older evaluate?)")
    ok = pair["diff"] >= 3.0 and pair["low"] > 0.0
    lines.append((f"trace {trace['em']:.1f} vs majority {majority['em']:.1f}: {pair_text(pair)} "
                  f"(target >= +3.0, interval above 0)", ok))

    curve = results.get("budget_curve") or {}
    if "trace" in curve and "majority" in curve:
        # k=1 is no selection: every method takes the one trajectory
        ks = sorted(int(k) for k in curve["majority"] if int(k) >= 2)
        behind = [k for k in ks if curve["trace"][str(k)] < curve["majority"][str(k)]]
        cells = ", ".join(f"k={k} {points(curve['trace'][str(k)] - curve['majority'][str(k)])}" for k in ks)
        lines.append((f"trace - majority along the budget curve: {cells} (target >= 0 at every k)", not behind))
        full = str(max(ks))
        if "8" in curve["trace"] and full != "8":
            at8, maj_full = curve["trace"]["8"], curve["majority"][full]
            lines.append((f"trace at k=8 {at8:.1f} vs majority at k={full} {maj_full:.1f} (target >=)", at8 >= maj_full))
    else:
        lines.append((f"{source}: no budget curve for trace and majority (evaluate without budget=false)", False))

    grounded = method(results, "trace_grounded", source)
    heuristic = {n: method(results, n, source)["em"] for n in HEURISTICS}
    best = max(heuristic, key=heuristic.__getitem__)
    lead = grounded["em"] - heuristic[best]
    lines.append((f"trace_grounded {grounded['em']:.1f} vs the best heuristic ({best}) {heuristic[best]:.1f}: "
                  f"{points(lead)} (target >= +2.0)", lead >= 2.0))
    return lines


def ablation_targets(ablation: dict[str, Any], source: Path, strict: frozenset[str] = frozenset()) -> list[tuple[str, bool]]:
    """(line, met) per ablation variant: its mean EM at full K below the full model's, and for the
    variants in `strict` the paired interval of full minus the variant above 0."""
    require(ablation, ("k", "rows"), source, "pool_ablation.py --out")
    k = str(ablation["k"])
    rows = ablation["rows"]
    if "full" not in rows:
        sys.exit(f"error: {source}: rows.full: missing (run pool_ablation.py with the full variant)")
    unknown = sorted(strict - set(rows))
    if unknown:
        sys.exit(f"error: {source}: rows.{unknown[0]}: missing (--interval-above-zero names a variant not run)")
    full = statistics.mean(rows["full"]["em"][k])
    lines = []
    for name, row in rows.items():
        if name == "full" or name not in ablation.get("paired_vs_full", {}):
            continue
        em = statistics.mean(row["em"][k])
        pair = ablation["paired_vs_full"][name]
        strict_here = name in strict
        target = "below full, interval above 0" if strict_here else "below full"
        ok = em < full and (pair["low"] > 0.0 or not strict_here)
        lines.append((f"ablation {name} {em:.1f} vs full {full:.1f} at K={k} (mean of {len(row['em'][k])} seeds): "
                      f"full - {name} {pair_text(pair)} (target: {target})", ok))
    return lines


STRATEGY_GAIN = 5.0
"""Pass@K points the diverse strategy has to add over standard sampling at matched compute (issue 32)."""


def pass_at_k_pair(comparison: dict[str, Any], source: Path) -> dict[str, Any]:
    """The paired pass@K row (`oracle`) of a strategy_comparison.py record, or a one-line error."""
    require(comparison, ("methods",), source, "strategy_comparison.py --out")
    row = comparison["methods"].get("oracle")
    if row is None:
        sys.exit(f"error: {source}: methods.oracle: missing (compare per-question files with the oracle row)")
    return row


def strategy_target(comparison: dict[str, Any], source: Path) -> tuple[str, bool]:
    """(line, met): strategy A's pass@K minus strategy B's, paired by question, against STRATEGY_GAIN."""
    require(comparison, ("a", "b"), source, "strategy_comparison.py --out")
    row = pass_at_k_pair(comparison, source)
    a, b = comparison["a"], comparison["b"]
    line = (f"{a} pass@K {row['em_a']:.1f} vs {b} {row['em_b']:.1f} on {comparison.get('questions', '?')} paired questions: "
            f"{pair_text(row)} (target >= {points(STRATEGY_GAIN)})")
    return line, row["diff"] >= STRATEGY_GAIN


PARTIAL_SAVING = 15.0
"""Percent fewer computed tokens partial rollout has to spend than standard sampling at equal N (issue 32)."""
PARTIAL_PASS_LOSS = 2.0
"""Pass@N points partial rollout may lose against standard sampling while saving them."""


def partial_target(bench: dict[str, Any], source: Path, pairs: dict[str, Any] | None = None,
                   pairs_source: Path | None = None) -> tuple[str, bool]:
    """(line, met): partial rollout's computed-token saving and pass@N loss against standard sampling, from
    the benchmark's accounting; the paired pass@N interval from `pairs` when given."""
    require(bench, ("results",), source, "rollout_strategies.py --json")
    rows = bench["results"].get("partial_vs_standard")
    if not isinstance(rows, dict) or "standard" not in rows:
        sys.exit(f"error: {source}: results.partial_vs_standard.standard: missing (run with --parts partial)")
    name = next((n for n in rows if n.startswith("partial")), None)
    if name is None:
        sys.exit(f"error: {source}: results.partial_vs_standard: no partial row")
    std, par = rows["standard"], rows[name]
    for row, key in ((std, "standard"), (par, name)):
        for field in ("computed_tokens", "pass_at_k"):
            if field not in row:
                sys.exit(f"error: {source}: results.partial_vs_standard.{key}.{field}: missing")
    saving = 100 * (1 - par["computed_tokens"] / std["computed_tokens"])
    loss = 100 * (par["pass_at_k"] - std["pass_at_k"])
    difference = points(loss)
    if pairs is not None:
        oracle = pass_at_k_pair(pairs, pairs_source)
        loss, difference = oracle["diff"], pair_text(oracle)
    line = (f"{name} vs standard at N={bench.get('args', {}).get('k', '?')}: {saving:.1f}% fewer computed tokens "
            f"({par['computed_tokens']:,} vs {std['computed_tokens']:,}; target >= {PARTIAL_SAVING:.0f}%), "
            f"pass@N {100 * par['pass_at_k']:.1f} vs {100 * std['pass_at_k']:.1f}: {difference} "
            f"(target >= -{PARTIAL_PASS_LOSS:.1f})")
    return line, saving >= PARTIAL_SAVING and loss >= -PARTIAL_PASS_LOSS


def transfer_lines(results: dict[str, Any], source: Path) -> list[str]:
    """One line per selector row of a transfer pool, against majority vote."""
    majority = method(results, "majority", source)
    out = []
    for name, entry in results.get("methods", {}).items():
        if "checkpoint" in entry and "vs_majority" in entry:
            below = entry["em"] < majority["em"]
            out.append(f"{Path(results['pool']).name}: {name} {entry['em']:.1f} vs majority {majority['em']:.1f}: "
                       f"{pair_text(entry['vs_majority'])}" + ("  (below majority: its card must warn)" if below else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("results", type=Path, help="folder with results.json (or a .json file)")
    ap.add_argument("--ablation", type=Path, default=None, help="JSON of experiments/pool_ablation.py --out")
    ap.add_argument("--interval-above-zero", default="", metavar="VARIANTS",
                    help="comma-separated ablation variants whose full-minus-variant interval must lie above 0 "
                         "(default: none; ship_wikihops.sh passes no_cross)")
    ap.add_argument("--strategy", type=Path, default=None,
                    help="JSON of experiments/strategy_comparison.py --out (DivInit as A, standard sampling as B)")
    ap.add_argument("--partial", type=Path, default=None,
                    help="JSON of benchmarks/rollout_strategies.py --parts partial (partial rollout against standard)")
    ap.add_argument("--partial-pairs", type=Path, default=None,
                    help="JSON of experiments/strategy_comparison.py --out on the two pools of that benchmark "
                         "(partial as A, standard as B): the paired pass@N interval")
    ap.add_argument("--transfer", type=Path, nargs="+", action="extend", default=[],
                    help="folders (or files) of transfer-pool results; repeatable")
    args = ap.parse_args(argv)
    if args.partial_pairs is not None and args.partial is None:
        ap.error("--partial-pairs needs --partial (the benchmark's token accounting)")

    def results_file(p: Path) -> Path:
        return p if p.suffix == ".json" else p / "results.json"

    source = results_file(args.results)
    results = load(source)
    checks = pool_targets(results, source)
    if args.ablation is not None:
        strict = frozenset(v for v in args.interval_above_zero.split(",") if v)
        checks += ablation_targets(load(args.ablation), args.ablation, strict)
    if args.strategy is not None:
        checks.append(strategy_target(load(args.strategy), args.strategy))
    if args.partial is not None:
        pairs = None if args.partial_pairs is None else load(args.partial_pairs)
        checks.append(partial_target(load(args.partial), args.partial, pairs, args.partial_pairs))
    print(f"{results['pool']} ({results['n_questions']} questions, K={results['k']})")
    for line, ok in checks:
        print(f"- {verdict(ok)}: {line}")
    for path in args.transfer:
        for line in transfer_lines(load(results_file(path)), results_file(path)):
            print(f"- transfer: {line}")
    missed = sum(not ok for _, ok in checks)
    print(f"{len(checks) - missed} of {len(checks)} targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())

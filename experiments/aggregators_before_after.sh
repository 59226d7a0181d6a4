#!/usr/bin/env bash
# The LLM aggregators before and after they were made to run as their papers do, side by side on the
# same dev questions with the same aggregator model:
#   - SolAgg / SummAgg: free reasoning and a free answer scored against the gold (`solagg`, `summagg`)
#     against the earlier candidate-constrained form, kept as `solagg_choice` / `summagg_choice` (the two
#     SummAgg forms integrate the same reports, generated once);
#   - the TIPEX judge (`judge_gs`, `judge_tks`): the validity filter first and reasoning before the bare
#     scores, against the code before that change (commit 8210b4c's parent, run from a git worktree).
# docs/baselines.md holds the figures. For the default 20 questions x 8 on 2 cores: about 25 minutes with
# AMX, 90 (56 of them SummAgg's) with AVX-512 but no AMX, hours on AVX2 only. Start no other vLLM engine
# meanwhile (drain the pool job).
#
#   experiments/aggregators_before_after.sh            # runs both, then prints the table
#   DRY_RUN=1 experiments/aggregators_before_after.sh  # prints the commands only
#
# Environment: PYTHON (default .venv/bin/python), QUESTIONS (20), K (8), OUT (runs/aggregators),
# ENGINE (vllm:qwen2.5-coder-1.5b), POOL (data/pools/wikileads-dev.jsonl.gz).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
OUT=${OUT:-runs/aggregators}
POOL=${POOL:-data/pools/wikileads-dev.jsonl.gz}
ENGINE=${ENGINE:-vllm:qwen2.5-coder-1.5b}
BEFORE_JUDGE=8210b4c^  # "TIPEX judge: the validity filter first ... reasons before its bare scores"
SRC=$OUT/judge-before-src
common=(--pool "$POOL" --questions "${QUESTIONS:-20}" --k "${K:-8}" --engine "$ENGINE" --no-budget)

run() { echo "+ $*"; [[ -n ${DRY_RUN:-} ]] || "$@"; }

mkdir -p "$OUT"
# Resumable: a finished results file is kept.
if [[ ! -f $OUT/after.json ]]; then
  run "$PY" -m trace_selector.cli evaluate "${common[@]}" --out "$OUT/after.json" \
    --methods majority,oracle,summagg,summagg_choice,judge_gs,judge_tks
fi
if [[ ! -f $OUT/judge-before.json ]]; then
  git worktree prune
  [[ -d $SRC ]] || run git worktree add -q --detach "$SRC" "$BEFORE_JUDGE"
  # Run from inside the worktree: `python -m` puts the working directory first on sys.path, ahead of
  # PYTHONPATH and of this checkout's editable install, so only there is the old judge the one imported.
  here=$PWD
  [[ -n ${DRY_RUN:-} ]] || (cd "$SRC" && "$here/$PY" -c '
import pathlib, sys, trace_selector
where = pathlib.Path(trace_selector.__file__).resolve().parent
sys.exit(0 if where == pathlib.Path("trace_selector").resolve() else f"error: imports {where}, not the worktree")')
  run bash -c 'cd "$1" && shift && "$@"' _ "$SRC" "$here/$PY" -m trace_selector.cli evaluate \
    --pool "$here/$POOL" "${common[@]:2}" --out "$here/$OUT/judge-before.json" \
    --methods majority,judge_gs,judge_tks
fi
[[ -n ${DRY_RUN:-} ]] && exit 0
"$PY" - "$OUT/after.json" "$OUT/judge-before.json" <<'EOF'
import json, sys

after, before = (json.load(open(p))["methods"] for p in sys.argv[1:3])
rows = [("summagg (before: constrained)", after["summagg_choice"]), ("summagg (after: free)", after["summagg"]),
        ("judge_gs before", before["judge_gs"]), ("judge_gs after", after["judge_gs"]),
        ("judge_tks before", before["judge_tks"]), ("judge_tks after", after["judge_tks"])]
print(f"majority vote {after['majority']['em']:.1f}, oracle {after['oracle']['em']:.1f}\n")
print("| method | EM | vs majority [95% CI] | tokens out | seconds |")
print("|---|---:|---:|---:|---:|")
for name, r in rows:
    if "em" not in r:
        print(f"| {name} | skipped: {r.get('skipped', '?')} | | | |")
        continue
    pair = r.get("vs_majority", {})
    ci = f"{pair['diff']:+.1f} [{pair['low']:+.1f}, {pair['high']:+.1f}]" if pair else ""
    print(f"| {name} | {r['em']:.1f} | {ci} | {r.get('tokens_out', '')} | {r.get('seconds', '')} |")
EOF

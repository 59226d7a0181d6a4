#!/usr/bin/env bash
# Trains, chooses and evaluates the multi-hop (wikihops) selectors, as experiments/ship_wikileads.sh
# does for wikileads, and the comparisons only this setting has. Every step is resumable (finished
# seeds, ablation runs and the encoder cache are reused), so a rerun after a kill continues.
#
#   experiments/ship_wikihops.sh dev       # train `trace` and `trace_grounded` (3 seeds each, best on the dev
#                                          # pool) into checkpoints/, and `trace` with the official TRACE
#                                          # optimiser (a reference row, not shipped); evaluate the dev pool;
#                                          # DivInit against standard sampling on the same 150 dev questions;
#                                          # partial rollout against standard on 40 more (paired by question);
#                                          # transfer both ways with the wikileads selectors; ablations on dev
#   experiments/ship_wikihops.sh prepare   # while the sealed pool grows: the sealed run's ablation trainings
#                                          # and transfer scores, so `sealed` later only scores
#   experiments/ship_wikihops.sh sealed    # the single evaluation of the sealed test pool (final numbers)
#
# `dev` and `prepare` never read the sealed pool. `sealed` refuses to run twice (the committed record
# experiments/results/wikihops-sealed-evaluation.txt) and refuses a sealed pool that is still a snapshot.
# Environment: PYTHON (default .venv/bin/python), SEEDS (default 0,1,2), RUNS (default runs/ship-wikihops),
# NICE (default 5), JOBS (trainings at once; default 1, 2 on an idle 2-core machine), ABLATIONS (default
# 1; 0 skips the dev-pool ablations, 12 more trainings).
set -euo pipefail
cd "$(dirname "$0")/.."

SETTING=wikihops
RUNS=${RUNS:-runs/ship-wikihops}
TRAIN=data/pools/wikihops-train.jsonl.gz
DEV=data/pools/wikihops-dev.jsonl.gz
SEALED=data/pools/wikihops-test-sealed.jsonl.gz
RECORD=experiments/results/wikihops-sealed-evaluation.txt  # committed: the sealed pool is read once, ever
RESULTS=experiments/results/wikihops-sealed  # where the sealed run's files are committed
# The wikileads pools, scored by the multi-hop selectors (the other direction is `from_wikileads`).
TRANSFER=(data/pools/wikileads-dev.jsonl.gz data/pools/wikileads-0.5b-dev.jsonl.gz)
METHODS=single,majority,weighted_token,grounded_vote,fewest_tools,most_tools,trace,oracle
OFFICIAL=$RUNS/trace-official/selector
CKPTS=(--checkpoint trace=checkpoints/wikihops --checkpoint trace_grounded=checkpoints/wikihops-grounded
       --checkpoint trace_official_optimiser="$OFFICIAL")
ABLATION_RECIPE=training/wikihops.yaml
ABLATION_VARIANTS=full,no_gnn,no_cross,no_qformer
STRICT_ABLATIONS=no_cross  # issue 32: full - no cross-trajectory edges > 0 with its interval above 0
# DivInit and standard sampling on the same 150 dev questions (the mixed order's 200-349) at K=8 (grow_wikihops_pools.sh).
DIVINIT=data/pools/wikihops-dev-divinit.jsonl.gz
STANDARD150=data/pools/wikihops-dev-standard150.jsonl.gz
# Partial rollout against standard sampling at N=8 on 40 more dev questions (the mixed order's 350-389):
# the accounting of benchmarks/rollout_strategies.py (stage 6 of grow_wikihops_pools.sh) and its two pools.
PARTIAL_BENCH=benchmarks/rollout_strategies-wikihops.json
PARTIAL_POOLS=experiments/results/wikihops-partial
source experiments/ship_lib.sh

versus_standard() {  # strategy, its pool, standard sampling's pool of the same questions, that run's name, title
  # Every method on both pools, then A minus B paired by question: $RUNS/<strategy>-vs-standard.json.
  local name=$1 pool=$2 standard=$3 standard_run=$4
  evaluate "$pool" "$RUNS/$name"
  evaluate "$standard" "$RUNS/$standard_run"
  say "$5"
  "$PY" experiments/strategy_comparison.py "$RUNS/$name/per_question.jsonl" "$RUNS/$standard_run/per_question.jsonl" \
    --names "$name,standard" --out "$RUNS/$name-vs-standard.json" | tee "$RUNS/$name-vs-standard.txt"
}

matched() {  # DivInit against standard sampling at matched compute
  if [[ ! -f $DIVINIT || ! -f $STANDARD150 ]]; then echo "skip DivInit: its pools do not exist yet"; return; fi
  versus_standard divinit $DIVINIT $STANDARD150 standard150 "DivInit - standard at matched compute (K=8 each)"
}

partial() {  # partial rollout against standard sampling at equal N: the benchmark's two pools
  if [[ ! -f $PARTIAL_POOLS/standard.jsonl.gz || ! -f $PARTIAL_POOLS/partial-exploration.jsonl.gz ]]; then
    echo "skip partial rollout: its pools are not in $PARTIAL_POOLS yet"; return
  fi
  versus_standard partial "$PARTIAL_POOLS/partial-exploration.jsonl.gz" "$PARTIAL_POOLS/standard.jsonl.gz" \
    partial-standard "partial rollout - standard at equal N"
}

dev_strategy_targets() {  # targets.py flags for the rollout strategies' comparisons that exist
  if [[ -f $RUNS/divinit-vs-standard.json ]]; then printf '%s\n' --strategy "$RUNS/divinit-vs-standard.json"; fi
  if [[ -f $PARTIAL_BENCH ]]; then
    printf '%s\n' --partial "$PARTIAL_BENCH"
    if [[ -f $RUNS/partial-vs-standard.json ]]; then printf '%s\n' --partial-pairs "$RUNS/partial-vs-standard.json"; fi
  fi
}

from_wikileads() {  # pool, output folder: the shipped wikileads selectors on a multi-hop pool
  local CKPTS=(--checkpoint trace=checkpoints/wikileads --checkpoint trace_grounded=checkpoints/wikileads-grounded)
  evaluate "$@"
}

case "${1:-}" in
  dev)
    train_and_ship training/wikihops.yaml trace checkpoints/wikihops
    train_and_ship training/wikihops-grounded.yaml trace-grounded checkpoints/wikihops-grounded
    train_run training/wikihops-official.yaml trace-official
    evaluate $DEV "$RUNS/dev"
    matched
    partial
    transfers all
    from_wikileads $DEV "$RUNS/from-wikileads-dev"
    if [[ ${ABLATIONS:-1} != 0 ]]; then ablations $DEV "$RUNS/ablation-dev.json" | tee "$RUNS/ablation-dev.txt"; fi
    # The DivInit and partial-rollout targets are read on dev questions (issue 32 items 3 and 4), so only here.
    mapfile -t strategies < <(dev_strategy_targets)
    targets "$RUNS/dev" "$RUNS/ablation-dev.json" "${strategies[@]}" | tee "$RUNS/targets-dev.txt"
    ;;
  prepare)
    ablations
    transfers missing
    ;;
  sealed)
    open_sealed
    evaluate $SEALED "$RUNS/sealed"
    from_wikileads $SEALED "$RUNS/sealed/from-wikileads"
    ablations $SEALED "$RUNS/sealed/ablation.json" | tee "$RUNS/sealed/ablation.txt"
    transfers missing
    targets "$RUNS/sealed" "$RUNS/sealed/ablation.json" | tee "$RUNS/sealed/targets.txt"
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

#!/usr/bin/env bash
# Trains, chooses and evaluates the two shipped wikileads selectors. Every step is resumable (finished
# seeds, ablation runs and the encoder cache are reused), so a rerun after a kill continues.
#
#   experiments/ship_wikileads.sh dev       # train both (3 seeds each, best on the dev pool), copy them to
#                                           # checkpoints/, evaluate dev and transfer pools, ablations on dev
#   experiments/ship_wikileads.sh prepare   # while the sealed pool grows: the sealed run's ablation trainings
#                                           # and transfer scores, so `sealed` later only scores
#   experiments/ship_wikileads.sh sealed    # the single evaluation of the sealed test pool (final numbers)
#
# `dev` and `prepare` never read the sealed pool. `sealed` refuses to run twice: it writes the committed record
# experiments/results/wikileads-sealed-evaluation.txt, and runs/ship/sealed/ holds its results (committed as
# experiments/results/wikileads-sealed/; delete the record and runs/ship/sealed/ only if the first run did
# not finish); it refuses a sealed pool that is still a rollout snapshot, too.
# Environment: PYTHON (default .venv/bin/python), SEEDS (default 0,1,2), RUNS (default runs/ship),
# NICE (default 5), ABLATIONS (default 1; 0 skips the dev-pool ablations, 9 more trainings).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
TS=("$PY" -m trace_selector.cli)
SEEDS=${SEEDS:-0,1,2}
RUNS=${RUNS:-runs/ship}
NICE=${NICE:-5}
TRAIN=data/pools/wikileads-train.jsonl.gz
DEV=data/pools/wikileads-dev.jsonl.gz
SEALED=data/pools/wikileads-test-sealed.jsonl.gz
RECORD=experiments/results/wikileads-sealed-evaluation.txt  # committed: the sealed pool is read once, ever
RESULTS=experiments/results/wikileads-sealed  # where the sealed run's files are committed
# Pools from the other packaged policy and the other strategy: transfer, never trained on.
TRANSFER=(data/pools/wikileads-0.5b-dev.jsonl.gz data/pools/wikileads-dev-divinit.jsonl.gz)
METHODS=single,majority,weighted_token,grounded_vote,fewest_tools,most_tools,trace,oracle
CKPTS=(--checkpoint trace=checkpoints/wikileads --checkpoint trace_grounded=checkpoints/wikileads-grounded)

say() { printf '\n== %s\n' "$*"; }

train_and_ship() {  # recipe, run name, checkpoint folder
  local recipe=$1 name=$2 dest=$3
  say "train $recipe (seeds $SEEDS) -> $dest"
  nice -n "$NICE" "${TS[@]}" train --config "$recipe" --seeds "$SEEDS" out_dir="$RUNS" name="$name" \
    data.train_pool=$TRAIN data.val_pool=$DEV trainer.threads=1 trainer.progress_bar=false
  # Replace the folder whole, so no file of an older checkpoint survives next to the new weights.
  rm -rf "$dest.new" && cp -r "$RUNS/$name/selector" "$dest.new" && rm -rf "$dest" && mv "$dest.new" "$dest"
  "$PY" -c 'import sys; from trace_selector.model.hub import relocate_card as r
r(sys.argv[1], sys.argv[2], {"trained with": f"`experiments/ship_wikileads.sh dev`: `trace-selector train --config {sys.argv[3]} --seeds {sys.argv[4]}`"})' \
    "$dest" "$RUNS/$name/selector" "$recipe" "$SEEDS" >/dev/null
}

evaluate() {  # pool, output folder, extra flags
  local pool=$1 out=$2; shift 2
  say "evaluate $pool -> $out"
  nice -n "$NICE" "${TS[@]}" evaluate --pool "$pool" "${CKPTS[@]}" --methods $METHODS --reference trace \
    --out "$out/results.json" --plot "$out/budget.png" --per-question "$out/per_question.jsonl" \
    "$@" threads=1
}

ablations() {  # test pool and JSON output, or neither: train the runs only (kept and reused)
  local test=()
  if [[ $# -gt 0 ]]; then
    test=(--test-pool "$1" --out "$2")
    say "ablations of the paper configuration (3 seeds each) scored on $1"
  else
    say "ablations of the paper configuration (3 seeds each): training only"
  fi
  nice -n "$NICE" "$PY" experiments/pool_ablation.py --config training/wikileads.yaml --train-pool $TRAIN \
    --variants full,no_gnn,no_cross --seeds 3 --small-k 8 --keep "$RUNS/ablation" "${test[@]}" data.val_pool=$DEV
}

transfers() {  # all | missing: the transfer pools, each scored by both shipped checkpoints
  local pool out
  for pool in "${TRANSFER[@]}"; do
    out=$RUNS/transfer-$(basename "$pool" .jsonl.gz)
    if [[ ! -f $pool ]]; then echo "skip transfer: $pool does not exist yet"; continue; fi
    # runs/ is not committed: a new machine has no transfer rows for the sealed run's targets.
    if [[ $1 == missing && -f $out/results.json ]]; then continue; fi
    evaluate "$pool" "$out"
  done
}

targets() {  # results folder, ablation JSON (may not exist yet)
  say "targets"
  local extra=() f
  if [[ -f $2 ]]; then extra+=(--ablation "$2"); fi
  for f in "$RUNS"/transfer-*/results.json; do
    if [[ -f $f ]]; then extra+=(--transfer "$f"); fi
  done
  "$PY" experiments/targets.py "$1" "${extra[@]}"
}

case "${1:-}" in
  dev)
    train_and_ship training/wikileads.yaml trace checkpoints/wikileads
    train_and_ship training/wikileads-grounded.yaml trace-grounded checkpoints/wikileads-grounded
    evaluate $DEV "$RUNS/dev"
    transfers all
    if [[ ${ABLATIONS:-1} != 0 ]]; then ablations $DEV "$RUNS/ablation-dev.json" | tee "$RUNS/ablation-dev.txt"; fi
    targets "$RUNS/dev" "$RUNS/ablation-dev.json" | tee "$RUNS/targets-dev.txt"
    ;;
  prepare)
    ablations
    transfers missing
    ;;
  sealed)
    # runs/ is not committed, so the record that the sealed pool was read is: a later session on a
    # fresh clone must see it too.
    if [[ -e $RECORD ]]; then
      echo "error: $RECORD exists: the sealed pool was evaluated already ($(head -1 "$RECORD"))" >&2; exit 1
    fi
    if [[ -e $RESULTS/results.json ]]; then
      echo "error: $RESULTS/results.json exists: the sealed pool has been evaluated already" >&2; exit 1
    fi
    if [[ -e $RUNS/sealed/results.json ]]; then
      echo "error: $RUNS/sealed/results.json exists: the sealed pool has been evaluated already" >&2; exit 1
    fi
    if [[ ! -f $SEALED.meta.json ]]; then
      echo "error: $SEALED.meta.json not found: without its sidecar the sealed pool cannot be checked" >&2; exit 1
    fi
    # Pools written before snapshots existed have no snapshot key: they are finished pools.
    if [[ $("${TS[@]}" validate $SEALED --field extra.snapshot 2>/dev/null || echo false) != false ]]; then
      echo "error: $SEALED is a snapshot of a rollout still in progress; finish it first" >&2; exit 1
    fi
    mkdir -p "$RUNS/sealed"
    date -u +%Y-%m-%dT%H:%MZ > "$RUNS/sealed/date.txt"
    printf '%s: experiments/ship_wikileads.sh sealed at commit %s (checkpoints: %s)\n' "$(cat "$RUNS/sealed/date.txt")" \
      "$(git rev-parse --short HEAD)" "$(cat checkpoints/wikileads*/seeds.json 2>/dev/null | sha256sum | cut -c1-12)" > "$RECORD"
    echo "recorded in $RECORD: commit it with the results (copy $RUNS/sealed/ to $RESULTS/)"
    "${TS[@]}" validate $SEALED
    evaluate $SEALED "$RUNS/sealed"
    ablations $SEALED "$RUNS/sealed/ablation.json" | tee "$RUNS/sealed/ablation.txt"
    transfers missing
    targets "$RUNS/sealed" "$RUNS/sealed/ablation.json" | tee "$RUNS/sealed/targets.txt"
    ;;
  *)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

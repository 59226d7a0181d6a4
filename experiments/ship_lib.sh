# Shared by the per-setting ship scripts (ship_wikileads.sh, ship_wikihops.sh), sourced after they set:
#   SETTING, TRAIN, DEV, SEALED (pools), RUNS (run root), RECORD and RESULTS (the sealed pool's committed
#   record and results folder), METHODS (evaluate's rows), CKPTS (evaluate's --checkpoint flags),
#   TRANSFER (pools scored by this setting's checkpoints, never trained on), ABLATION_RECIPE and
#   ABLATION_VARIANTS (experiments/pool_ablation.py on the paper configuration); optionally STRICT_ABLATIONS
#   (variants whose full-minus-variant interval must lie above 0 to meet their target).
# Environment every script reads: PYTHON (default .venv/bin/python), SEEDS (default 0,1,2), NICE (default 5),
# JOBS (trainings at once, one process and thread each; default 1: set 2 on an idle 2-core machine).
PY=${PYTHON:-.venv/bin/python}
TS=("$PY" -m trace_selector.cli)
SEEDS=${SEEDS:-0,1,2}
NICE=${NICE:-5}

say() { printf '\n== %s\n' "$*"; }

train_run() {  # recipe, run name, extra overrides...: seeds trained and the best kept as $RUNS/<name>/selector
  local recipe=$1 name=$2; shift 2
  say "train $recipe (seeds $SEEDS) -> $RUNS/$name"
  nice -n "$NICE" "${TS[@]}" train --config "$recipe" --seeds "$SEEDS" --jobs "${JOBS:-1}" out_dir="$RUNS" name="$name" \
    data.train_pool="$TRAIN" data.val_pool="$DEV" trainer.threads=1 trainer.progress_bar=false "$@"
}

train_and_ship() {  # recipe, run name, checkpoint folder
  local recipe=$1 name=$2 dest=$3
  train_run "$recipe" "$name"
  # Replace the folder whole, so no file of an older checkpoint survives next to the new weights.
  rm -rf "$dest.new" && cp -r "$RUNS/$name/selector" "$dest.new" && rm -rf "$dest" && mv "$dest.new" "$dest"
  "$PY" -c 'import sys; from trace_selector.model.hub import relocate_card as r
r(sys.argv[1], sys.argv[2], {"trained with": f"`{sys.argv[5]} dev`: `trace-selector train --config {sys.argv[3]} --seeds {sys.argv[4]}`"})' \
    "$dest" "$RUNS/$name/selector" "$recipe" "$SEEDS" "experiments/ship_$SETTING.sh" >/dev/null
  # The confidence temperature of adaptive stopping, fitted on the dev pool the seeds were chosen on.
  "${TS[@]}" calibrate --checkpoint "$dest" --pool "$DEV"
}

evaluate() {  # pool, output folder, extra flags
  local pool=$1 out=$2; shift 2
  say "evaluate $pool -> $out"
  nice -n "$NICE" "${TS[@]}" evaluate --pool "$pool" "${CKPTS[@]}" --methods "$METHODS" --reference trace \
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
  nice -n "$NICE" "$PY" experiments/pool_ablation.py --config "$ABLATION_RECIPE" --train-pool "$TRAIN" \
    --variants "$ABLATION_VARIANTS" --seeds 3 --small-k 8 --jobs "${JOBS:-1}" --keep "$RUNS/ablation" "${test[@]}" \
    data.val_pool="$DEV"
}

transfers() {  # all | missing: the transfer pools, each scored by this setting's checkpoints
  local pool out
  for pool in "${TRANSFER[@]}"; do
    out=$RUNS/transfer-$(basename "$pool" .jsonl.gz)
    if [[ ! -f $pool ]]; then echo "skip transfer: $pool does not exist yet"; continue; fi
    # runs/ is not committed: a new machine has no transfer rows for the sealed run's targets.
    if [[ $1 == missing && -f $out/results.json ]]; then continue; fi
    evaluate "$pool" "$out"
  done
}

targets() {  # results folder, ablation JSON (may not exist yet), then more targets.py flags (optional)
  say "targets"
  local results=$1 ablation=$2 extra=() f
  shift 2
  if [[ -f $ablation ]]; then extra+=(--ablation "$ablation" --interval-above-zero "${STRICT_ABLATIONS:-}"); fi
  extra+=("$@")
  for f in "$RUNS"/transfer-*/results.json; do
    if [[ -f $f ]]; then extra+=(--transfer "$f"); fi
  done
  "$PY" experiments/targets.py "$results" "${extra[@]}"
}

open_sealed() {  # once ever: refuses a second reading of the sealed pool, then records this one
  # runs/ is not committed, so the record that the sealed pool was read is: a later session on a
  # fresh clone must see it too.
  if [[ -e $RECORD ]]; then
    echo "error: $RECORD exists: the sealed pool was evaluated already ($(head -1 "$RECORD"))" >&2; exit 1
  fi
  local done
  for done in "$RESULTS/results.json" "$RUNS/sealed/results.json"; do
    if [[ -e $done ]]; then echo "error: $done exists: the sealed pool has been evaluated already" >&2; exit 1; fi
  done
  if [[ ! -f $SEALED.meta.json ]]; then
    echo "error: $SEALED.meta.json not found: without its sidecar the sealed pool cannot be checked" >&2; exit 1
  fi
  # Pools written before snapshots existed have no snapshot key: they are finished pools.
  if [[ $("${TS[@]}" validate "$SEALED" --field extra.snapshot 2>/dev/null || echo false) != false ]]; then
    echo "error: $SEALED is a snapshot of a rollout still in progress; finish it first" >&2; exit 1
  fi
  mkdir -p "$RUNS/sealed"
  date -u +%Y-%m-%dT%H:%MZ > "$RUNS/sealed/date.txt"
  printf '%s: experiments/ship_%s.sh sealed at commit %s (checkpoints: %s)\n' "$(cat "$RUNS/sealed/date.txt")" \
    "$SETTING" "$(git rev-parse --short HEAD)" "$(cat checkpoints/"$SETTING"*/seeds.json 2>/dev/null | sha256sum | cut -c1-12)" > "$RECORD"
  echo "recorded in $RECORD: commit it with the results (copy $RUNS/sealed/ to $RESULTS/)"
  "${TS[@]}" validate "$SEALED"
}

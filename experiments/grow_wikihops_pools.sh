#!/usr/bin/env bash
# Grow the multi-hop (wikihops) pools of the default policy setup (rollout/wikihops-standard.yaml) to
# their target sizes, in an order that makes each pool usable early:
#   1. train: 256 train questions x K=8 (a first selector can train on it);
#   2. dev: the first 200 dev questions x K=8, so the methods can be judged on held-out questions early
#      (this stage came after 400 train questions until AVX2-only machines, ten times slower, made a
#      usable dev pool the scarcer one);
#   3. train: extended in steps of 100 questions of the mixed order until it holds 850 mixed questions
#      (the target is >= 800; 850 leaves room for the few that are mixed only through a trajectory the
#      graphs leave out), at most 1,700. The first 256 train questions were 50% mixed among bridge and
#      93% among compositional questions, the first 104 dev ones 81% among comparison questions, so
#      about 1,450 questions should do; every 100 fewer saves 800 trajectories, two hours on a machine
#      without AMX, before the sealed pool can start. A rerun whose pool has reached the target skips the
#      stage (the pool stopped at 1,448 questions, 875 mixed). A later run with --limit 2162 extends it;
#   4. dev: extended to K=16;
#   5. DivInit and standard sampling on the same 150 other dev questions (the next 150) x K=8, the
#      matched-compute comparison (no other pool uses these questions);
#   6. not a pool: partial rollout (ParallelMuse's settings) against standard sampling at N = 8 on 40
#      other dev questions (the mixed order's 350-389), benchmarks/rollout_strategies.py, alone on the
#      machine like the pools so that its wall times compare; `collect` copies its JSON to benchmarks/;
#   7. the sealed test pool: 400 test questions x K=16, last, because only the final evaluation reads it.
#      DEFER_PARTIAL=1 (in the environment of `pools_job.sh start`) skips stage 6 in that run: it cannot
#      resume and takes about an hour, which the end of a session may not have; the sealed pool resumes.
#
# The question files list each family in a block (comparison questions last), so stages 2-6 count
# their questions in the mixed order (`order=mixed`): every pool holds each family in its share of
# the split. Stage 1 ran in file order (bridge and compositional questions only); the train pool gets
# its comparison questions in stage 3, and the first dev questions, made in file order before the
# change, are all among the first 200 of the mixed order.
#
# Every stage is resumable and extendable (a killed stage continues from its shard; each stage
# rewrites its pool with everything finished every 15 minutes). experiments/pools_job.sh runs it from a
# worktree at a fixed commit and copies the pools back for committing:
#
#   POOLS_SCRIPT=experiments/grow_wikihops_pools.sh POOLS_NAMES="$(experiments/grow_wikihops_pools.sh --pools)" experiments/pools_job.sh start
#   experiments/pools_job.sh collect      # the grown pools back into data/pools, to commit
#   experiments/pools_job.sh drain        # stop after the chunk in flight, with a snapshot (then collect)
#
# OUT_DIR defaults to data/pools. Extra arguments are rollout overrides for every stage.
set -euo pipefail
if [[ ${1:-} == --pools ]]; then
  echo "wikihops-train wikihops-dev wikihops-dev-divinit wikihops-dev-standard150 wikihops-test-sealed"; exit 0
fi
out=${1:-data/pools}
shift || true
source "$(dirname "${BASH_SOURCE[0]}")/pool_stages.sh"
"$py" -m trace_selector.cli data prepare --setting wikihops >/dev/null
rollout() { retry "$py" -m trace_selector.cli rollout --config rollout/wikihops-standard.yaml "$@"; }
train() { rollout --split train --limit "$1" --k 8 --out "$out/wikihops-train.jsonl.gz" "${@:2}"; }
dev() { rollout --split dev --limit 200 --k "$1" --out "$out/wikihops-dev.jsonl.gz" order=mixed "${@:2}"; }
matched() { rollout --split dev --offset 200 --limit 150 --k 8 --out "$out/wikihops-dev-$1.jsonl.gz" order=mixed "strategy=${2:-$1}" "${@:3}"; }
sealed() { rollout --split test --limit "$1" --k 16 --out "$out/wikihops-test-sealed.jsonl.gz" order=mixed "${@:2}"; }
train_counts() {  # the train pool's questions and mixed questions
  "$py" -m trace_selector.cli validate --json "$out/wikihops-train.jsonl.gz" |
    "$py" -c 'import json, sys; d = json.load(sys.stdin); print(d["questions"], round(d["mixed"] * d["questions"]))'
}
# Stage 3: a step that ends short of its limit was stopped (drained), and so is the stage.
mixed_train() {  # target, most questions, rollout overrides
  local target=$1 most=$2 limit questions mixed
  # A rerun starts at the step the pool had reached, not below it, and a pool that has reached its
  # target is done: finishing the step costs hours on a machine without AMX and adds nothing a target needs.
  read -r questions mixed < <(train_counts)
  if (( mixed >= target )); then echo "train pool: $questions questions, $mixed mixed (target $target reached)"; return; fi
  limit=$(( (questions + 99) / 100 * 100 )); (( limit >= 400 )) || limit=400; (( limit <= most )) || limit=$most
  while :; do
    train "$limit" order=mixed "${@:3}"
    read -r questions mixed < <(train_counts)
    echo "train pool: $questions questions, $mixed mixed (target $target)"
    if (( mixed >= target || questions < limit || limit >= most )); then return; fi
    limit=$(( limit + 100 > most ? most : limit + 100 ))
  done
}
partial_vs_standard() {  # stage 6; the stage script's arguments (it skips the stage while draining)
  local json=$out/benchmarks/rollout_strategies-wikihops.json arg
  [[ -f $json ]] && return
  # Unlike the pools it cannot resume: a run that has less than its hour left defers it and grows the
  # sealed pool instead, and the next run without DEFER_PARTIAL makes it before going on.
  if [[ ${DEFER_PARTIAL:-0} == 1 ]]; then echo "partial-rollout comparison deferred (DEFER_PARTIAL=1)"; return; fi
  for arg in "$@"; do [[ $arg == stop_file=* && -f ${arg#stop_file=} ]] && return; done
  mkdir -p "$out/benchmarks"
  # A benchmark that fails is reported and skipped: the sealed pool must not wait on it.
  retry "$py" benchmarks/rollout_strategies.py --recipe rollout/wikihops-standard.yaml --setting wikihops \
    --offset 350 --limit 40 --k 8 --models qwen2.5-coder-1.5b --parts partial --json "$json" order=mixed ||
    echo "partial-rollout comparison failed; going on with the sealed pool" >&2
}
train 256 "$@"; dev 8 "$@"; mixed_train 850 1700 "$@"; dev 16 "$@"
matched divinit divinit "$@"; matched standard150 standard "$@"
partial_vs_standard "$@"
sealed 400 "$@"

#!/usr/bin/env bash
# Grow the multi-hop (wikihops) pools of the default policy setup (rollout/wikihops-standard.yaml) to
# their target sizes, in an order that makes each pool usable early:
#   1. train: 256 train questions x K=8 (a first selector can train on it);
#   2. dev: the first 200 dev questions x K=8, so the methods can be judged on held-out questions early
#      (this stage came after 400 train questions until AVX2-only machines, ten times slower, made a
#      usable dev pool the scarcer one);
#   3. train: extended to the mixed order's first 1,700 train questions (target: >= 800 mixed questions;
#      of the first 256, 50% of bridge and 93% of compositional questions were mixed, so 1,700 give
#      about 770 before the 280 comparison questions count; all 2,162 would cost 3,700 trajectories more,
#      about 12 hours on a machine without AMX, before the sealed pool could start; a later run with
#      --limit 2162 extends it);
#   4. dev: extended to K=16;
#   5. DivInit and standard sampling on the same 150 other dev questions (the next 150) x K=8, the
#      matched-compute comparison (no other pool uses these questions);
#   6. the sealed test pool: 400 test questions x K=16, last, because only the final evaluation reads it.
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
train 256 "$@"; dev 8 "$@"; train 1700 order=mixed "$@"; dev 16 "$@"
matched divinit divinit "$@"; matched standard150 standard "$@"
sealed 400 "$@"

#!/usr/bin/env bash
# Grow the bundled pools of the default policy setup to their target sizes: the train pool to 1,120
# train questions x K=8 (91.4% of the first 864 are mixed, so about 1,020 mixed; the 1,200 planned
# first were cut when 600 -> 864 questions did not help the selector: docs/results.md), then a
# DivInit pool of 150 other dev questions x K=8 (the transfer pool of another strategy), then the
# sealed test pool to 500 test questions from position 300 x K=16. The sealed pool comes last
# because only the final evaluation reads it: with the train and DivInit pools done,
# `experiments/ship_wikileads.sh dev` (every choice, every transfer row) can run while the sealed pool
# grows. The dev pool (200 x 16) is done.
#
# Every stage is resumable and extendable: within a run a killed stage continues from its shard, and
# each stage rewrites its pool file with everything finished every 15 minutes (`snapshot_minutes`).
# A session's background processes end with it and its uncommitted files may not survive it, so
# the pools are copied into the checkout and committed now and then; the next session starts from
# the committed pools with the same command, which extends them. experiments/pools_job.sh does all of it:
#
#   experiments/pools_job.sh start      # worktree at HEAD, committed pools copied to ../pools, this script started
#   experiments/pools_job.sh collect    # the grown pools back into data/pools, to commit
#   experiments/pools_job.sh drain      # stop after the chunk in flight, with a snapshot (then collect)
#
# OUT_DIR defaults to data/pools. Extra arguments are rollout overrides for every stage. On a
# processor without bfloat16 arithmetic the engine computes in float32 by itself (data/pools/README.md).
set -euo pipefail
out=${1:-data/pools}
shift || true
source "$(dirname "${BASH_SOURCE[0]}")/pool_stages.sh"
rollout() { retry "$py" -m trace_selector.cli rollout --config rollout/wikileads-standard.yaml "$@"; }
train() { rollout --split train --limit "$1" --k 8 --out "$out/wikileads-train.jsonl.gz" "${@:2}"; }
sealed() { rollout --split test --offset 300 --limit "$1" --k 16 --out "$out/wikileads-test-sealed.jsonl.gz" "${@:2}"; }
divinit() { rollout --split dev --offset 200 --limit "$1" --k 8 --out "$out/wikileads-dev-divinit.jsonl.gz" \
              strategy=divinit "${@:2}"; }
train 1120 "$@"; divinit 150 "$@"; sealed 500 "$@"

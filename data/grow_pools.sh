#!/usr/bin/env bash
# Grow the bundled pools of the default policy setup to their target sizes: the train pool to 1,200
# train questions x K=8 (90.7% of the first 600 are mixed, so about 1,090 mixed), then the sealed
# test pool to 500 test questions from position 300 x K=16, then a DivInit pool of 150 other dev
# questions x K=8 (the transfer pool of another strategy). The dev pool (200 x 16) and the first
# 600 train questions are done.
#
# Each pool grows in steps of a few hundred trajectories, and every step finalizes its pool: a
# session's background processes end with the session and its uncommitted files may not survive it,
# so a finished step can be committed and the next session continues from the committed pool with
# the same command (a finished pool is extended, never rewritten from scratch). Within a step a
# killed run continues from its shard. Rerunning this script skips what is done.
#
#   git worktree add --detach ../pools-wt HEAD    # a fixed commit: refactoring cannot break the run
#   cd ../pools-wt && PYTHONPATH=$PWD nohup setsid data/grow_pools.sh OUT_DIR >> OUT_DIR/grow.log 2>&1 &
#
# OUT_DIR defaults to data/pools; copy the pools (with their .meta.json and .config.yaml) into the
# checkout now and then to commit them, and copy committed pools into OUT_DIR before a restart.
# Extra arguments are rollout overrides for every stage.
set -euo pipefail
out=${1:-data/pools}
shift || true
py=${PYTHON:-python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export VLLM_CPU_OMP_THREADS_BIND=${VLLM_CPU_OMP_THREADS_BIND:-0-1} VLLM_CPU_NUM_OF_RESERVED_CPU=${VLLM_CPU_NUM_OF_RESERVED_CPU:-0}
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-4}
# A stage that dies (an engine crash, an OOM kill) is retried from its shard; a bad command line fails
# the same way every time, so three failures in a row end the script.
retry() { for attempt in 1 2 3; do "$@" && return 0; echo "stage failed (attempt $attempt): $*" >&2; sleep 10; done; return 1; }
rollout() { retry "$py" -m trace_selector.cli rollout --config rollout/wikileads-standard.yaml "$@"; }
train() { rollout --split train --limit "$1" --k 8 --out "$out/wikileads-train.jsonl.gz" "${@:2}"; }
dev() { rollout --split dev --limit "$1" --k "$2" --out "$out/wikileads-dev.jsonl.gz" "${@:3}"; }
sealed() { rollout --split test --offset 300 --limit "$1" --k 16 --out "$out/wikileads-test-sealed.jsonl.gz" "${@:2}"; }
divinit() { rollout --split dev --offset 200 --limit "$1" --k 8 --out "$out/wikileads-dev-divinit.jsonl.gz" \
              strategy=divinit "${@:2}"; }
# Questions in a finished pool (0 when there is none yet), from its sidecar.
have() { "$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["accounting"]["questions"])' \
           "$1.meta.json" 2>/dev/null || echo 0; }
# steps STAGE POOL FIRST LAST BY ARGS...: the stage at FIRST, FIRST+BY, ..., LAST questions, skipping
# the steps that POOL has reached already.
steps() { local stage=$1 pool=$2 n=$3 last=$4 by=$5; shift 5
          local done_; done_=$(have "$pool")
          while (( n < last )); do (( n > done_ )) && "$stage" "$n" "$@"; n=$((n + by)); done
          (( last > done_ )) && "$stage" "$last" "$@"; return 0; }
steps train "$out/wikileads-train.jsonl.gz" 700 1200 100 "$@"           # 800 trajectories a step
steps sealed "$out/wikileads-test-sealed.jsonl.gz" 50 500 25 "$@"       # 400 trajectories a step
steps divinit "$out/wikileads-dev-divinit.jsonl.gz" 50 150 50 "$@"      # 400 trajectories a step

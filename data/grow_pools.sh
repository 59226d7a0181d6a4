#!/usr/bin/env bash
# Grow the bundled pools of the default policy setup to their target sizes, in stages that alternate
# between the train pool (1,200 train questions x K=8: 90% of the first 200 were mixed, so about
# 1,080 mixed) and the sealed test pool (500 test questions from position 300 x K=16), so both grow.
# A dev pool (200 dev questions, K=8 extended to K=16) comes first: selectors are validated and chosen
# on it at the sealed pool's K, and it measures how selectors trained at K=8 score at K=16. Every stage is resumable (a killed run continues from its
# shard) and extends what is there, so rerunning this script continues where it stopped.
#
#   git worktree add ../pools-wt HEAD            # a fixed commit: refactoring cannot break the run
#   cd ../pools-wt && PYTHONPATH=$PWD nohup data/grow_pools.sh OUT_DIR > grow.log 2>&1 &
#
# OUT_DIR defaults to data/pools; copy the pools (with their .meta.json and .config.yaml) into the
# checkout now and then to commit them. Extra arguments are rollout overrides for every stage.
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
train() { retry "$py" -m trace_selector.cli rollout --config rollout/wikileads-standard.yaml --split train --limit "$1" \
            --k 8 --out "$out/wikileads-train.jsonl.gz" "${@:2}"; }
dev() { retry "$py" -m trace_selector.cli rollout --config rollout/wikileads-standard.yaml --split dev --limit "$1" \
          --k "$2" --out "$out/wikileads-dev.jsonl.gz" "${@:3}"; }
sealed() { retry "$py" -m trace_selector.cli rollout --config rollout/wikileads-standard.yaml --split test --offset 300 \
             --limit "$1" --k 16 --out "$out/wikileads-test-sealed.jsonl.gz" "${@:2}"; }
# The same policy with DivInit on other dev questions: the transfer pool of issue 15 (other strategy).
divinit() { retry "$py" -m trace_selector.cli rollout --config rollout/wikileads-standard.yaml --split dev --offset 200 \
              --limit "$1" --k 8 --out "$out/wikileads-dev-divinit.jsonl.gz" strategy=divinit "${@:2}"; }
train 200 "$@"; dev 200 8 "$@"; dev 200 16 "$@"; train 600 "$@"; sealed 300 "$@"; train 1200 "$@"; sealed 500 "$@"; divinit 150 "$@"

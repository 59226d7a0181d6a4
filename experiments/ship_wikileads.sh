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
# NICE (default 5), JOBS (trainings at once; default 1, 2 on an idle 2-core machine), ABLATIONS (default
# 1; 0 skips the dev-pool ablations, 9 more trainings).
# The steps themselves are in experiments/ship_lib.sh, shared with experiments/ship_wikihops.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

SETTING=wikileads
RUNS=${RUNS:-runs/ship}
TRAIN=data/pools/wikileads-train.jsonl.gz
DEV=data/pools/wikileads-dev.jsonl.gz
SEALED=data/pools/wikileads-test-sealed.jsonl.gz
RECORD=experiments/results/wikileads-sealed-evaluation.txt  # committed: the sealed pool is read once, ever
RESULTS=experiments/results/wikileads-sealed  # where the sealed run's files are committed
# Pools from the other packaged policy and the other strategy: transfer, never trained on.
TRANSFER=(data/pools/wikileads-0.5b-dev.jsonl.gz data/pools/wikileads-dev-divinit.jsonl.gz)
METHODS=single,majority,weighted_token,grounded_vote,fewest_tools,most_tools,trace,oracle
CKPTS=(--checkpoint trace=checkpoints/wikileads --checkpoint trace_grounded=checkpoints/wikileads-grounded)
ABLATION_RECIPE=training/wikileads.yaml
ABLATION_VARIANTS=full,no_gnn,no_cross
source experiments/ship_lib.sh

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
    open_sealed
    evaluate $SEALED "$RUNS/sealed"
    ablations $SEALED "$RUNS/sealed/ablation.json" | tee "$RUNS/sealed/ablation.txt"
    transfers missing
    targets "$RUNS/sealed" "$RUNS/sealed/ablation.json" | tee "$RUNS/sealed/targets.txt"
    ;;
  *)
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

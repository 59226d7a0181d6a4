#!/usr/bin/env bash
# The background pool job across sessions: experiments/grow_pools.sh runs from a git worktree at a fixed
# commit (so editing the checkout cannot break it) and writes to a folder outside the checkout; the
# pools reach git only through `collect`, and a new machine starts from the committed pools.
#
#   experiments/pools_job.sh start     # worktree at this checkout's HEAD, committed pools copied out, job started
#   experiments/pools_job.sh status    # is it running, the pools' sizes, the log's last line
#   experiments/pools_job.sh collect   # copy every pool the job has grown into data/pools, and any benchmark
#                                      # JSON a stage wrote into benchmarks/ (then git add -A + commit); a pool
#                                      # caught while a stage raises its K goes to data/pools/partial/ instead
#   experiments/pools_job.sh drain     # stop after the chunk in flight, with a snapshot: nothing generated is lost
#   experiments/pools_job.sh stop      # SIGTERM to the job's process group at once: the chunk in flight is lost
#
# Environment: POOLS_DIR (default ../pools), POOLS_WORKTREE (default ../pools-wt), POOLS_DEST (the
# checkout's pools, default data/pools), POOLS_BENCH_DEST (where collect puts benchmark JSON, default
# benchmarks), PYTHON (default this checkout's .venv/bin/python),
# POOLS_SCRIPT (the stages to run, default experiments/grow_pools.sh: the wikileads pools) and POOLS_NAMES
# (the committed pools `start` copies out, default the wikileads ones). Extra arguments to `start` go
# to the stage script (rollout overrides). The multi-hop pools:
#   POOLS_SCRIPT=experiments/grow_wikihops_pools.sh POOLS_NAMES="$(experiments/grow_wikihops_pools.sh --pools)" experiments/pools_job.sh start
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$(realpath -m "${POOLS_DIR:-../pools}")
wt=$(realpath -m "${POOLS_WORKTREE:-../pools-wt}")
py=${PYTHON:-$repo/.venv/bin/python}
dest_dir=${POOLS_DEST:-data/pools}
# A pool caught in the middle of a stage that raises its K (some questions at the new K, the rest at the
# old) is no pool to evaluate: the committed figures would stop reproducing. It is committed here instead,
# so that a new machine resumes it, and the finished pool replaces it.
partial_dir=$dest_dir/partial
bench_dir=${POOLS_BENCH_DEST:-benchmarks}
script=${POOLS_SCRIPT:-experiments/grow_pools.sh}
names=${POOLS_NAMES:-wikileads-train wikileads-test-sealed wikileads-dev-divinit}
pidfile=$out/grow.pid
# Every stage gets stop_file=$drainfile: a rollout that sees it ends between chunks with a snapshot,
# and the stages after it end before they start.
drainfile=$out/drain

running() { [[ -f $pidfile ]] && kill -0 -- "-$(cat "$pidfile")" 2>/dev/null; }  # any process of its group
# trajectories in a pool's sidecar, or -1 when it has none
field() { "$py" -m trace_selector.cli validate "$1" --field "$2"; }  # one sidecar field, as JSON
recorded() { field "$1" accounting.trajectories 2>/dev/null || echo -1; }
lines() { gzip -cd "$1" | wc -l; }
midstage() {  # a snapshot with fewer trajectories than its questions times the K its stage is raising it to
  local k questions
  [[ $(field "$1" extra.snapshot 2>/dev/null) == true ]] || return 1
  k=$(sed -n 's/^k: *\([0-9]*\) *$/\1/p' "$1.config.yaml" 2>/dev/null)
  questions=$(field "$1" accounting.questions 2>/dev/null) || return 1
  [[ -n $k ]] && (( $(recorded "$1") < questions * k ))
}

case "${1:-}" in
  start)
    shift
    if running; then echo "error: the pool job is running already (pid $(cat "$pidfile")); stop it first" >&2; exit 1; fi
    if [[ ! -x $py ]]; then echo "error: $py not found: run make setup first" >&2; exit 1; fi
    # A new machine has no prepared setting (corpus, index, questions) in its home yet; a prepared
    # one is checked and kept, so this costs a few seconds.
    for setting in wikileads wikihops; do "$py" -m trace_selector.cli data prepare --setting $setting >/dev/null; done
    head=$(git rev-parse HEAD)
    git worktree prune  # a worktree folder deleted by hand stays registered until pruned
    if [[ -d $wt ]]; then git -C "$wt" checkout -q --detach "$head"; else git worktree add -q --detach "$wt" "$head"; fi
    mkdir -p "$out"
    # A committed pool replaces the job folder's copy only when it holds more: the folder may be this
    # session's own, newer work.
    for name in $names; do
      pool=$dest_dir/$name.jsonl.gz
      if [[ -f $partial_dir/$name.jsonl.gz ]] && (( $(recorded "$partial_dir/$name.jsonl.gz") > $(recorded "$pool") )); then
        pool=$partial_dir/$name.jsonl.gz
      fi
      [[ -f $pool ]] || continue
      dest=$out/$(basename "$pool")
      if (( $(recorded "$pool") > $(recorded "$dest") )); then
        if [[ -f $dest.shard.jsonl ]]; then
          echo "error: $dest.shard.jsonl is newer work than $dest; remove it or finish it before replacing the pool" >&2; exit 1
        fi
        cp "$pool" "$pool.meta.json" "$pool.config.yaml" "$out/"
        echo "copied $pool ($(recorded "$pool") trajectories) to $out"
      fi
    done
    rm -f "$pidfile" "$drainfile"
    # setsid may fork, so $! would name a process that is gone: the new session leader writes its own pid.
    # The subshell's own output goes to the log too, or it would hold the caller's stdout open.
    (cd "$wt" && PYTHONPATH=$wt PYTHON=$py PIDFILE=$pidfile nohup setsid bash -c 'echo $$ > "$PIDFILE"; exec "$@"' \
       grow "$script" "$out" "stop_file=$drainfile" "$@" &) >> "$out/grow.log" 2>&1 < /dev/null
    for _ in $(seq 50); do [[ -s $pidfile ]] && running && break; sleep 0.1; done
    echo "started (pid $(cat "$pidfile")) at commit ${head:0:7}; log: $out/grow.log"
    ;;
  status)
    if running; then
      echo "running (pid $(cat "$pidfile"))$([[ -f $drainfile ]] && echo "; draining: it stops after the chunk in flight")"
    else echo "not running"; fi
    for pool in "$out"/*.jsonl.gz; do
      [[ -f $pool ]] || continue
      snap=$(field "$pool" extra.snapshot 2>/dev/null || echo false)
      echo "$(basename "$pool"): $(recorded "$pool") trajectories (snapshot: $snap)$([[ -f $pool.shard.jsonl ]] && echo ", shard: $(wc -l < "$pool.shard.jsonl") lines")"
    done
    if [[ -f $out/grow.log ]]; then echo "log: $(tail -c 400 "$out/grow.log" | tr '\r' '\n' | grep . | tail -1)"; fi
    ;;
  collect)
    mkdir -p "$dest_dir"
    for pool in "$out"/*.jsonl.gz; do
      [[ -f $pool ]] || continue
      dest=$dest_dir/$(basename "$pool")
      tmp=$(mktemp -d "$dest_dir/.collect.XXXXXX")
      # A snapshot renames the pool, then its sidecar: copy until a pool and sidecar agree.
      for attempt in 1 2 3 4 5; do
        cp "$pool.meta.json" "$pool.config.yaml" "$tmp/"
        cp "$pool" "$tmp/pool.jsonl.gz"
        [[ $(lines "$tmp/pool.jsonl.gz") == $(recorded "$tmp/$(basename "$pool")") ]] && break
        if (( attempt == 5 )); then echo "error: $pool and its sidecar keep disagreeing" >&2; rm -rf "$tmp"; exit 1; fi
        sleep 1
      done
      where=
      if midstage "$tmp/$(basename "$pool")"; then
        dest=$partial_dir/$(basename "$pool") where=" (mid-stage: $dest_dir keeps the finished pool it extends)"
        mkdir -p "$partial_dir"
      fi
      if (( $(recorded "$tmp/$(basename "$pool")") > $(recorded "$dest") )); then
        mv "$tmp/pool.jsonl.gz" "$dest"
        mv "$tmp/$(basename "$pool").meta.json" "$dest.meta.json"
        mv "$tmp/$(basename "$pool").config.yaml" "$dest.config.yaml"
        echo "collected $dest: $(recorded "$dest") trajectories$where"
        # The finished pool supersedes the mid-stage one.
        if [[ -z $where ]]; then rm -f "$partial_dir/$(basename "$pool")"{,.meta.json,.config.yaml}; fi
      fi
      rm -rf "$tmp"
    done
    # Benchmarks a stage script ran (alone on the machine, like the pools) go to benchmarks/.
    for f in "$out"/benchmarks/*.json; do
      [[ -f $f ]] || continue
      dest=$bench_dir/$(basename "$f")
      if ! cmp -s "$f" "$dest"; then mkdir -p "$bench_dir" && cp "$f" "$dest" && echo "collected $dest"; fi
    done
    ;;
  drain)
    if ! running; then echo "not running"; exit 0; fi
    touch "$drainfile"
    echo "draining: the job writes a snapshot and stops after the chunk in flight (minutes: see the log);" \
         "then run collect"
    ;;
  stop)
    if ! running; then echo "not running"; exit 0; fi
    pid=$(cat "$pidfile")
    kill -TERM -- "-$pid"
    # Wait for the whole group, not its leader: the rollout under it unwinds (and holds the pool's
    # lock) for a few seconds after the script above it is gone.
    for _ in $(seq 60); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 -- "-$pid" 2>/dev/null; then echo "error: process group $pid still runs 60 s after SIGTERM" >&2; exit 1; fi
    rm -f "$pidfile"; echo "stopped"
    ;;
  *)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

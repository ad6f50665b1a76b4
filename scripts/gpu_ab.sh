#!/usr/bin/env bash
# Run ON the GPU machine: the same benchmarks on two trees, on this one machine, so a change can be
# judged against what came before it: the working tree (A: after) and build-base-src/ (B: before),
# a tree of an earlier commit made here and carried:
#   here:   rm -rf build-base-src && mkdir build-base-src && git archive REV | tar -x -C build-base-src
#   device: run(command="bash scripts/gpu_ab.sh", carry=[".deps", "build-base-src"])
# Both trees are built (scripts/gpu_check.sh's build step; GPU_AB_BUILD=base builds only the earlier
# one, =none neither, keeping what a warm machine built), then each benchmark runs before, then after (GPU_AB_ROUNDS times, so drift shows). GPU_AB_BENCH
# picks the benchmarks (a ';'-separated list of commands run from each tree's root). Logs: $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG="${OUT:-/tmp}"
mkdir -p "$LOG"
BASE=build-base-src
[ -d "$BASE" ] || { echo "gpu_ab: no $BASE/ (see the comment at the top)"; exit 2; }
ln -sfn "$PWD/.deps" "$BASE/.deps"
BENCH="${GPU_AB_BENCH:-python3 bench/gpu_bench.py;python3 bench/models.py --only gpt2,llama-block,resnet50}"
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
case "${GPU_AB_BUILD:-both}" in
  both) trees=(. "$BASE") ;;
  base) trees=("$BASE") ;;  # the working tree's build-gpu is already there (make test-gpu)
  *) trees=() ;;
esac
for tree in "${trees[@]}"; do
  (cd "$tree" && OUT="$LOG/build-$(basename "$(realpath "$tree")")" TRIPY_GPU_CHECK_STEPS=build \
    bash scripts/gpu_check.sh > /dev/null 2>&1) || echo "gpu_ab: the build of $tree failed (see $LOG)"
done
IFS=';' read -r -a cmds <<< "$BENCH"
n=0
for cmd in "${cmds[@]}"; do
  n=$((n + 1))
  for round in $(seq "${GPU_AB_ROUNDS:-1}"); do
    for side in before after; do
      tree=$([ $side = before ] && echo "$BASE" || echo .)
      log="$LOG/bench$n-$side-$round.log"
      echo "== $side ($round): $cmd"
      # shellcheck disable=SC2086  # a command line
      (cd "$tree" && PYTHONPATH="$PWD/python" $cmd > "$log" 2>&1) || echo "   exit $? (see $log)"
      tail -n "${GPU_AB_TAIL:-14}" "$log"
    done
  done
done

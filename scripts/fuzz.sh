#!/usr/bin/env bash
# One harness of `make fuzz`: libFuzzer for SECONDS over the seed corpus (core/fuzz/corpus/NAME),
# growing a working corpus in BUILD/corpus/NAME; a crash is saved in BUILD/crashes/NAME/.
#   fuzz.sh BUILD NAME SECONDS
# Prints one line: how many inputs ran and how large the corpus grew. FUZZ_SEED fixes libFuzzer's
# random seed (CI sets it, so a run of a commit meets the same inputs; unset or 0: a new seed).
set -euo pipefail
build=$1 name=$2 seconds=$3
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$build/corpus/$name" crashes="$build/crashes/$name" log="$build/fuzz-$name.log"
mkdir -p "$work" "$crashes"
# Allocations the code under test cannot get are answered with null, as in production, and
# handled there; leaks are bugs.
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
"$build/core/fuzz_$name" -max_total_time="$seconds" -seed="${FUZZ_SEED:-0}" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$crashes/" "$work" "$root/core/fuzz/corpus/$name" > "$log" 2>&1 || status=$?
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
echo "fuzz $name: $runs inputs in $seconds s, working corpus $(ls "$work" | wc -l) files, exit $status"
if [ $status != 0 ]; then
  tail -n 40 "$log"
  exit $status
fi

#!/usr/bin/env bash
# One step of the set-up, quietly: prints "==> LABEL", appends the command's output to the set-up
# log ($TRIPY_LOG, default build/setup.log), and on failure prints the log's tail and fails.
#   step.sh LABEL [--summary REGEX] -- CMD [ARGS...]
# --summary prints the last output line matching REGEX after success (e.g. pytest's counts).
set -uo pipefail
label=$1; shift
summary=""
if [ "${1:-}" = --summary ]; then summary=$2; shift 2; fi
[ "${1:-}" = -- ] && shift
log="${TRIPY_LOG:-build/setup.log}"
mkdir -p "$(dirname "$log")"
echo "==> $label"
start=0; [ -f "$log" ] && start=$(wc -l < "$log")
{ echo; echo "==> $label: $*"; } >> "$log"
"$@" >> "$log" 2>&1
rc=$?
if [ $rc != 0 ]; then
  echo "failed ($rc): $label; the last lines of $log:" >&2
  tail -n +"$((start + 1))" "$log" | tail -n "${TRIPY_LOG_TAIL:-60}" >&2
  exit $rc
fi
if [ -n "$summary" ]; then
  line=$(tail -n +"$((start + 1))" "$log" | grep -E "$summary" | tail -n 1)
  [ -n "$line" ] && echo "    $line"
fi
exit 0

#!/usr/bin/env bash
# GPU triage (run on the GPU machine after scripts/gpu_check.sh's build step): each pytest file in
# its own process, so one crash does not hide the other files' results; then a native backtrace
# of the first crashing test under cuda-gdb.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
LOG="${OUT:-/tmp}"
crashed=()
for f in $(find tests -name 'test_*.py' | sort); do
  python3 -m pytest -q -p no:cacheprovider --timeout=120 "$f" > "$LOG/one.log" 2>&1
  rc=$?
  printf '%-55s rc=%-3s %s\n' "$f" "$rc" "$(grep -E 'passed|failed|error' "$LOG/one.log" | tail -1)"
  [ $rc -ge 128 ] || [ $rc = 139 ] && crashed+=("$f")
  [ $rc = 1 ] && grep -E "^FAILED" "$LOG/one.log" | head -8
  cat "$LOG/one.log" >> "$LOG/pytest_all.log"
done
for f in "${crashed[@]:0:1}"; do
  echo "== backtrace for $f"
  cuda-gdb -batch -ex run -ex bt --args python3 -m pytest -q -x -p no:cacheprovider "$f" 2>&1 | grep -E "^#|signal|FAILED" | head -40
done

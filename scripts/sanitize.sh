#!/usr/bin/env bash
# The test half of `make test-asan` and `make test-tsan`: runs ctest or pytest against the
# instrumented build in build-asan/ or build-tsan/.
#   sanitize.sh asan|tsan ctest|pytest
# Python is not instrumented, so the sanitizer runtime is preloaded into it, and the package is a
# copy of python/tripy (links) beside the instrumented _C in build-KIND/python/tripy.
set -euo pipefail
kind=$1 what=$2
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-$kind"
export TRIPY_SANITIZER=$kind TRIPY_BUILD_DIR="build-$kind"
case $kind in
  asan)
    runtime=$(gcc -print-file-name=libasan.so)
    # CPython's own allocations outlive it, so leaks are checked in the C++ tests only. Allocations
    # too large to serve return null, as in production, where Tripy reports them.
    py_options="detect_leaks=0:allocator_may_return_null=1"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:detect_stack_use_after_return=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    # test_cpp_package builds an application against the installed shared runtime, and the two
    # symbol-table checks read shared libraries, which the lean instrumented build does not make.
    ctest_filter=(-E 'runtime_library_has_no_compiler_symbols|runtime_symbols_check_catches_build_code')
    pytest_args=(tests --ignore=tests/test_cpp_package.py) ;;
  tsan)
    runtime=$(gcc -print-file-name=libtsan.so)
    py_options=""
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp"
    ctest_filter=(-R 'Concurren|Threaded|HostCommunicator') pytest_args=(tests/test_concurrency.py) ;;
  *) echo "sanitize.sh: unknown kind '$kind'" >&2; exit 2 ;;
esac
if [ "$what" = ctest ]; then
  exec ctest --test-dir "$build" --output-on-failure -j2 "${ctest_filter[@]}"
fi
pkg="$build/python/tripy"
mkdir -p "$pkg"
for entry in "$root"/python/tripy/*; do
  case $(basename "$entry") in _C*.so|__pycache__) continue ;; esac
  ln -sfn "$entry" "$pkg/$(basename "$entry")"
done
[ "$kind" = asan ] && export ASAN_OPTIONS="$py_options:abort_on_error=1"
# pytest captures file descriptor 2, so reports go to files, shown here if a run fails.
reports="$build/sanitizer-report"
rm -f "$reports".*
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$reports" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:log_path=$reports"
export TSAN_OPTIONS="${TSAN_OPTIONS:-}:log_path=$reports"
# libstdc++ is preloaded too: the sanitizer's __cxa_throw interceptor looks for the real one when
# it starts, before Python has loaded any C++ (without it the first exception aborts).
export PYTHONPATH="$build/python" LD_PRELOAD="$runtime $(gcc -print-file-name=libstdc++.so)"
cd "$root"
status=0
"$root/.venv/bin/python" -m pytest -q -rfE -p no:cacheprovider "${pytest_args[@]}" || status=$?
if compgen -G "$reports.*" > /dev/null; then
  cat "$reports".* >&2
  [ $status = 0 ] && status=1
fi
exit $status

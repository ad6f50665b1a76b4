#!/usr/bin/env bash
# Run ON the GPU machine from the repo root (make test-gpu): configures with the carried Debian
# packages in .deps/ (scripts/fetch_gpu_deps.sh makes it), builds with Ninja, runs ctest, pytest
# and, if present, bench/gpu_bench.py. Logs go to $OUT when set (the device tool returns them).
#   device tool: run(command="bash scripts/gpu_check.sh", carry=[".deps"], timeout_s=600)
# TRIPY_GPU_CHECK_STEPS picks steps (default "build ctest pytest bench"; "timings" runs the cold
# compile and eager benchmarks right after the build, before the tests load the machine; "llm" runs
# bench/llm.py; "quant" the quantized GEMMs and weight-only products against float16 and the 8B
# model's int4, int8 and float8 decode against bfloat16 (with the logits' error over 256 prompts);
# "multi", on two GPUs or more, the sharding tests and the collectives and 8B decode benchmarks under
# torchrun; "nvrtc-options" the model benchmarks with TRIPY_NVRTC_OPTIONS unset and set to
# --Ofast-compile=mid).
set -uo pipefail
cd "$(dirname "$0")/.."
LOG="${OUT:-/tmp}"
mkdir -p "$LOG"
STEPS="${TRIPY_GPU_CHECK_STEPS:-build ctest pytest bench}"
DEPS="$PWD/.deps/usr"
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TRIPY_CACHE_DIR="${TRIPY_CACHE_DIR:-$PWD/build-gpu/kernel-cache}"
export PYTHONUNBUFFERED=1
# The tests that use the build tree (the C++ package, tripy-run, the guides) look here.
export TRIPY_BUILD_DIR=build-gpu
PY="$(command -v python3)"
status=0
step() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
run() {  # run NAME CMD...: tee into $LOG/NAME.log, remember failure
  local name=$1; shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" 2>&1 | tee "$LOG/$name.log" | tail -n "${TRIPY_GPU_CHECK_TAIL:-25}"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc ($((SECONDS - t0)) s)"
  [ "$rc" = 0 ] || status=1
  return "$rc"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
if step build; then
  [ -d "$DEPS" ] || echo "warning: .deps missing (run scripts/fetch_gpu_deps.sh here and carry .deps)"
  # Always from scratch: the working tree arrives with its own mtimes, so objects left by an
  # earlier call on a warm machine can look newer than changed sources (a stale, mixed build).
  rm -rf build-gpu
  run configure cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$DEPS" -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)" \
    -DPython_EXECUTABLE="$PY" -DPython3_EXECUTABLE="$PY"
  # -k 0: one broken target (work in progress elsewhere) must not hide the others' results.
  run build cmake --build build-gpu -j16 -- -k 0
fi
if step timings; then  # cold compiles (every cache empty) and eager ops, on a quiet machine
  run compile-dynamic env PYTHONPATH="$PWD/python" "$PY" bench/models.py --device gpu --only compile-dynamic
  # compile_s of gpt2-decode: GPT-2's prefill and decode steps compiled cold in one process.
  run compile-decode env PYTHONPATH="$PWD/python" "$PY" bench/models.py --device gpu --only gpt2-decode --no-torch-compile
  run eager env PYTHONPATH="$PWD/python" "$PY" bench/eager.py --device gpu
fi
if step nvrtc-options; then  # kernel speed and cold compiles with NVRTC's fast-compile mode, against the default
  for o in "" "--Ofast-compile=mid"; do
    run "models${o:+-ofast}" env TRIPY_NVRTC_OPTIONS="$o" PYTHONPATH="$PWD/python" "$PY" bench/models.py --device gpu \
      --only gpt2,gpt2-decode,llama-block --no-torch-compile
  done
fi
if step ctest; then
  # enable_testing() lives in core/, so that is where ctest finds the tests.
  run ctest ctest --test-dir build-gpu/core --output-on-failure -j8 --timeout 300
fi
if step pytest; then
  # The ONNX node cases of Debian's libonnx-testdata (fetch_gpu_deps.sh packs them), not the GPU
  # machine's own onnx's: the conformance count is then of the same cases on both devices.
  deb=$(ls .deps/libonnx-testdata_*.deb 2>/dev/null | head -n 1)
  if [ -n "$deb" ]; then
    mkdir -p build-gpu/onnx-testdata && dpkg-deb -x "$deb" build-gpu/onnx-testdata
    export TRIPY_ONNX_TESTDATA="$PWD/build-gpu/onnx-testdata/usr/share/libonnx-testdata/data"
  fi
  # The groups run at once (the GPU machine has cores to spare; one run takes longer than a device
  # call may): each writes $LOG/pytest-N.log, and the step fails if any group does.
  pytest_groups() {
    local P=("$PY" -m pytest -q -rf --tb=short -p no:cacheprovider) pids=() rc=0 i=0
    "$PY" -c "import pytest_timeout" 2>/dev/null && P+=(--timeout=300)
    # tests/frontend/ops alone took ~400 s in one process (NVRTC for every op x dtype case), so
    # it is spread over five groups.
    local ops=tests/frontend/ops
    local groups=(
      "$(ls $ops/test_attention*.py | tr '\n' ' ')"
      # The op matrix alone took ~440 s once constant operands joined it: two groups.
      "$ops/test_op_matrix.py -k compiled_constant_operands"
      "$ops/test_op_matrix.py -k not(compiled_constant_operands)"
      "$ops/test_ops_conformance.py"
      "$(ls $ops/test_*.py | grep -v -e test_attention -e test_op_matrix.py -e test_ops_conformance.py | tr '\n' ' ')"
      "tests/frontend/modules $(ls tests/frontend/test_[a-d]*.py | tr '\n' ' ')"
      "$(ls tests/frontend/test_[e-z]*.py | tr '\n' ' ')"
      "$(ls tests/test_[a-f]*.py | tr '\n' ' ') tests/bench tests/tools tests/utils tests/llm"
      "$(ls tests/test_[g-z]*.py | tr '\n' ' ')"
      # The ONNX node suite's _cuda cases (the GPU conformance count; the _cpu ones are CI's), and
      # the other ONNX tests.
      "tests/onnx/test_backend_conformance.py -k cuda"
      "$(ls tests/onnx/test_*.py | grep -v test_backend_conformance | tr '\n' ' ')")
    # TRIPY_GPU_PYTEST="paths; paths": only these groups (a quick check of what changed). The
    # conformance group's pass count per op type is written to $LOG/onnx-conformance.txt.
    export TRIPY_ONNX_REPORT="$LOG/onnx-conformance.txt"
    [ -n "${TRIPY_GPU_PYTEST:-}" ] && IFS=';' read -r -a groups <<< "$TRIPY_GPU_PYTEST"
    # Each group's end and time go to $LOG/00-pytest-progress.txt as it ends (first of the logs a
    # device call returns, so that a call cut short still says which groups ended).
    local progress="$LOG/00-pytest-progress.txt"
    : > "$progress"
    for g in "${groups[@]}"; do
      i=$((i + 1))
      # shellcheck disable=SC2086  # each group is a list of paths
      (
        t0=$SECONDS
        PYTHONPATH="$PWD/python" "${P[@]}" $g > "$LOG/pytest-$i.log" 2>&1
        group_rc=$?
        echo "group $i ($((SECONDS - t0)) s, exit $group_rc): $(tail -n 1 "$LOG/pytest-$i.log")" >> "$progress"
        exit $group_rc
      ) &
      pids+=($!)
    done
    i=0
    for pid in "${pids[@]}"; do
      i=$((i + 1))
      wait "$pid" || rc=1
      echo "group $i: $(tail -n 1 "$LOG/pytest-$i.log")"
      grep -E '^FAILED|^ERROR' "$LOG/pytest-$i.log" | head -n 20
    done
    return $rc
  }
  run pytest pytest_groups
  # What still runs after the tests: NVRTC ran 3-8x slower right after them once, which timings
  # that follow (bench, llm) would carry.
  echo "== after pytest: load $(cut -d' ' -f1-3 /proc/loadavg)"
  ps -eo pcpu,etimes,comm --sort=-pcpu | head -n 6
fi
if step bench && [ -f bench/gpu_bench.py ]; then
  run bench env PYTHONPATH="$PWD/python" "$PY" bench/gpu_bench.py
fi
if step multi; then  # tensor parallelism: one process per GPU, as torchrun starts them
  export NCCL_NVLS_ENABLE=0  # never NVLink multicast
  TR=("$PY" -m torch.distributed.run --nproc-per-node 2)
  run sharding env PYTHONPATH="$PWD/python" "$PY" -m pytest -q -rf -p no:cacheprovider tests/frontend/test_sharding_gpu.py
  run collectives env PYTHONPATH="$PWD/python" "${TR[@]}" bench/collectives.py
  run collectives-nccl env PYTHONPATH="$PWD/python" "${TR[@]}" bench/collectives.py --nccl
  run llm-2gpu env PYTHONPATH="$PWD/python" "${TR[@]}" bench/llm.py --device gpu --devices 2 --shapes 8b \
    --batches 1,8 --prompts 128 --profile 16 --out "$LOG/llm-2gpu.jsonl"
fi
if step quant; then  # the quantized products as whole calls against float16, and the 8B model's quantized decode
  run quantized env PYTHONPATH="$PWD/python" "$PY" bench/gpu_bench.py --quantized
  run weight-only env PYTHONPATH="$PWD/python" "$PY" bench/gpu_bench.py --weight-only
  run llm-quant env PYTHONPATH="$PWD/python" "$PY" bench/llm.py --device gpu --shapes 8b --batches 1,16 --no-torch \
    --steps 32 --quant int4-weight-only,int8-weight-only,float8 --accuracy 256 --out "$LOG/llm-quant.jsonl"
fi
if step llm; then  # TRIPY_GPU_LLM_ARGS: bench/llm.py's arguments (default: the 1B shape, batch 1)
  # shellcheck disable=SC2086
  run llm env PYTHONPATH="$PWD/python" "$PY" bench/llm.py --device gpu ${TRIPY_GPU_LLM_ARGS:-} --out "$LOG/llm.jsonl"
fi
echo "gpu_check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status

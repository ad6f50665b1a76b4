#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, only those missing, or those of the
# list file given as the argument (scripts/debian-packages-docs.txt, -bench.txt: what `make docs`
# and `make bench` add). apt's output goes to the set-up log ($TRIPY_LOG); the terminal gets one
# line. Where apt-get cannot run (the GPU machine has no network), it says what is missing and
# goes on: the build then uses what that machine has.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The list scripts/check_build_deps.sh checks the build against. libdnnl-dev only Recommends
# ocl-icd-opencl-dev, which oneDNN's CMake config requires; without libopenblas0-pthread Debian's
# numpy falls back to the reference BLAS and comparisons are unfair. python3-regex: the LLM
# tokenizers' pre-tokenizer patterns (\p{L}, \p{N}), which Python's re cannot read. python3-onnx and
# libonnx-testdata: the tests' ONNX models and ONNX's backend conformance cases (tp.onnx itself
# reads .onnx files in C++ without them).
pkgs=(g++ cmake ninja-build ccache python3-dev python3-venv python3-numpy python3-pytest python3-regex
      pybind11-dev nlohmann-json3-dev libgtest-dev libdnnl-dev ocl-icd-opencl-dev libopenblas0-pthread
      python3-onnx libonnx-testdata)
if [ $# -gt 0 ]; then mapfile -t pkgs < <(sed 's/#.*//; /^[[:space:]]*$/d' "$1"); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "${TRIPY_NO_APT:-0}" = 1 ] || ! command -v apt-get >/dev/null; then
  echo "install_deps: not installing (${missing[*]})" >&2
  exit 0
fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
bash "$here/step.sh" "installing ${missing[*]}" -- \
  sh -c "$SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends ${missing[*]}"

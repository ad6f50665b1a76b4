#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, only those missing. Where apt-get cannot
# run (the GPU machine has no network), it says what is missing and goes on: the build then uses
# what that machine has (pip's pybind11, carried oneDNN, or none).
set -euo pipefail
pkgs=(g++ cmake ninja-build ccache python3-dev python3-venv python3-numpy python3-pytest
      pybind11-dev libdnnl-dev nlohmann-json3-dev libgtest-dev libopenblas0-pthread)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "${TRIPY_NO_APT:-0}" = 1 ] || ! command -v apt-get >/dev/null; then
  echo "install_deps: not installing (${missing[*]})" >&2
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

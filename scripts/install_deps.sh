#!/usr/bin/env bash
# Installs the Debian packages of a list that are missing: scripts/debian-packages.txt (the build
# and the tests) unless another list is given as the argument (scripts/debian-packages-docs.txt). apt's output goes to
# the set-up log ($TRIPY_LOG); the terminal gets one line. Where apt-get cannot run (the GPU machine
# has no network), it says what is missing and goes on: the build then uses what that machine has.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
list="${1:-$here/debian-packages.txt}"
mapfile -t pkgs < <(sed 's/#.*//; /^[[:space:]]*$/d' "$list")
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

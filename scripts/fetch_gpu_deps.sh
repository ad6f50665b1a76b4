#!/usr/bin/env bash
# Run HERE (a machine with apt): downloads the Debian packages the GPU machine lacks to build and
# test Tripy (it has no network and no apt), and unpacks them into .deps/ (git-ignored), which the
# device tool carries: run(command="bash scripts/gpu_check.sh", carry=[".deps"]).
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(nlohmann-json3-dev libgtest-dev libdnnl-dev libdnnl2 ocl-icd-libopencl1)
rm -rf .deps
mkdir -p .deps/debs
(cd .deps/debs && apt-get download "${pkgs[@]}" >/dev/null)
for deb in .deps/debs/*.deb; do dpkg-deb -x "$deb" .deps; done
rm -rf .deps/debs .deps/usr/share/doc .deps/usr/share/man .deps/usr/share/lintian
# ONNX's conformance data (the node cases the CPU suite runs), kept packed (40 MB unpacked would
# pass the device tool's carry limit): gpu_check.sh unpacks it there, so both devices run the same cases.
(cd .deps && apt-get download libonnx-testdata >/dev/null)
echo "fetch_gpu_deps: $(du -sh .deps | cut -f1) in .deps (${pkgs[*]})"

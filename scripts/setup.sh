#!/usr/bin/env bash
# Installs what moec needs to build and test on Debian 12, idempotently: packages already present are
# left alone, and `apt-get update` runs only when something is missing.
set -euo pipefail

packages=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools   # LLVM/MLIR 22 (shared libs, tblgen, lit, FileCheck)
  clang-22 lld-22 ninja-build ccache cmake make            # toolchain
  libclang-rt-22-dev                                       # sanitizer and libFuzzer runtimes (make test-asan/test-tsan/fuzz)
  libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev    # libraries
  nlohmann-json3-dev libcli11-dev libxxhash-dev
  python3 python3-psutil                                   # lit (psutil: lit --timeout)
  python3-numpy                                            # NpyTest.InteroperatesWithNumpy
  gnuplot-nox                                              # moec tune: the sweep plots
  python3-dev pybind11-dev libdlpack-dev                   # the Python module (python/)
  python3-pytest python3-torch                             # its tests (torch: DLPack from torch, moec.torch)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

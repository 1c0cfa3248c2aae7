#!/usr/bin/env bash
# On a GPU machine with CMake, a C++20 compiler and a CUDA driver (no LLVM needed): builds the
# runtime-only GPU check and runs it on the bundle bench/gpu/prepare.sh emitted. Prints a table last;
# PREDICT=1 adds the PTX emulator's calibrated estimate next to each measurement (host time: up to an hour,
# on one core: A3's kernels share a workspace, so every block of theirs runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-/tmp/moec-gpu-build}
cuda=${CUDA_ROOT:-/usr/local/cuda}
cmake -S . -B "$build" -DMOEC_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release -DMOEC_CUDA_ROOT="$cuda" \
  -DMOEC_DEPS_INCLUDE="$PWD/.gpu-deps/include" > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target moec-gpu-check
predict=()
[ "${PREDICT:-0}" = 1 ] && predict=(--predict)
"$build/bin/moec-gpu-check" bench/gpu/bundle "${REPS:-20}" "${predict[@]}"

#!/usr/bin/env bash
# The whole device session in one call (the device tool's budget is short): the GPU check (build, validate,
# time; bench/gpu/run.sh), then the same validation under compute-sanitizer's memcheck where the machine
# allows it, then the schedule variants (last: on 2026-12-04 the whole script took over 470 s and they were
# cut). Logs go to $OUT when it is set. Carry: .gpu-deps, bench/gpu/bundle, bench/gpu/variants. Where
# prepare.sh ran with ESTIMATE=1, the table has the emulator's calibrated estimate beside each measurement.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$out/gpu.txt"
export BUILD=/tmp/moec-gpu-build
start=$(date +%s)
bash bench/gpu/run.sh 2>&1 | tee "$out/check.log"
status=${PIPESTATUS[0]}
echo "check and timing: $(( $(date +%s) - start )) s"
# The checked mode: device index tensors checked on the host, kernels' bounds reports read back.
MOEC_CHECK_INDICES=1 "$BUILD/bin/moec-gpu-check" bench/gpu/bundle 0 > "$out/checked.log" 2>&1
echo "MOEC_CHECK_INDICES=1 validation: exit $?, $(tail -1 "$out/checked.log")"
if command -v compute-sanitizer >/dev/null && [ -x "$BUILD/bin/moec-gpu-check" ]; then
  start=$(date +%s)
  timeout "${SANITIZER_TIMEOUT:-150}" compute-sanitizer --tool memcheck --print-limit 20 \
    "$BUILD/bin/moec-gpu-check" bench/gpu/bundle 0 >"$out/memcheck.log" 2>&1
  echo "memcheck exit $? after $(( $(date +%s) - start )) s ($(grep -c 'Invalid' "$out/memcheck.log") invalid accesses):"
  tail -5 "$out/memcheck.log"
fi
# The schedule variants bench/gpu/prepare.sh emitted, each checked and timed the same way.
: > "$out/variants.log"
for variant in bench/gpu/variants/*/; do
  [ -f "$variant/bundle.json" ] || continue
  echo "== variant $(basename "$variant")"
  "$BUILD/bin/moec-gpu-check" "$variant" "${REPS:-20}" 2>&1 | sed -n '/^op /,$p' | tee -a "$out/variants.log"
done
exit "$status"

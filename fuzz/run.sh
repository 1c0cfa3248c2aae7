#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD_DIR for SECONDS seconds on a scratch copy of its seed corpus
# (fuzz/corpus/<target>, plus fuzz/regressions/<target>), then prints executions, coverage and crashes.
# Exits non-zero if any target crashed. Usage: fuzz/run.sh BUILD_DIR SECONDS [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?build dir}; seconds=${2:-60}; shift 2 || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz-dsl fuzz-npy fuzz-cache-meta fuzz-bundle fuzz-run-args fuzz-ptx fuzz-ascend fuzz-tuning)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/moec-fuzz-run.XXXXXX")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allow_user_poisoning=0} # see the Makefile
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0}
failed=()
summary=()
for t in "${targets[@]}"; do
  bin=$build/bin/$t
  [ -x "$bin" ] || { echo "fuzz: $bin is missing (build target moec-fuzzers)"; exit 2; }
  mkdir -p "$scratch/$t/corpus" "$scratch/$t/artifacts"
  cp -r fuzz/corpus/"$t"/. "$scratch/$t/corpus/" 2>/dev/null
  cp -r fuzz/regressions/"$t"/. "$scratch/$t/corpus/" 2>/dev/null
  dict=()
  [ -f "fuzz/${t#fuzz-}.dict" ] && dict=(-dict="fuzz/${t#fuzz-}.dict")
  echo "fuzz: $t for ${seconds}s"
  "$bin" "$scratch/$t/corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$scratch/$t/artifacts/" >"$scratch/$t/log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$t/log" | tail -1 | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$scratch/$t/log" | tail -1)
  artifacts=$(ls "$scratch/$t/artifacts" 2>/dev/null | wc -l)
  line="$t: ${execs:-?} executions, ${cov:-no coverage line}, exit $rc, $artifacts artifact(s)"
  summary+=("$line")
  if [ $rc -ne 0 ] || [ "$artifacts" -ne 0 ]; then
    failed+=("$t")
    echo "fuzz: $t FAILED; the last lines of its log ($scratch/$t/log):"
    tail -40 "$scratch/$t/log"
    ls -l "$scratch/$t/artifacts"
  fi
done
echo "fuzz summary (${seconds}s each):"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: crashes in ${failed[*]}; logs and reproducers in $scratch"
  exit 1
fi
rm -rf "$scratch"

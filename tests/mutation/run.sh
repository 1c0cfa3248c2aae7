#!/usr/bin/env bash
# Mutation run (not part of ctest/CI): each small bug of tests/mutation/mutations.py is applied in turn to a
# scratch copy of this repository's HEAD, built, and the tests chosen for it are run; a table says which
# tests caught it. Slow on few cores: pass mutation names to run only those.
#   tests/mutation/run.sh [name ...]        scratch copy: $MUTATION_DIR (default build/mutation)
set -euo pipefail
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
scratch=${MUTATION_DIR:-$repo/build/mutation}
# The scratch tree mirrors the main tree's layout (src/ + src/build), so with a base dir above both ccache
# sees the same relative compile commands and serves the files the mutation does not touch.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$repo")}
exec python3 "$repo/tests/mutation/run.py" "$repo" "$scratch" "$@"

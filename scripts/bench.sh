#!/usr/bin/env bash
# Runs every benchmark in build/bin/bench_* and prints its figures.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
shopt -s nullglob
for b in "$build"/bin/bench_*; do
  echo "== $(basename "$b")"
  "$b"
done

#!/usr/bin/env bash
# `make bench`: runs every benchmark built from bench/*.cpp (build/bench/NAME) and prints its
# figures. Pass names to run only some: scripts/bench.sh build simulator_accuracy
set -euo pipefail
build=${1:-build}
shift || true
cd "$(dirname "$0")/.."
shopt -s nullglob
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for b in "$build"/bench/*; do [ -x "$b" ] && names+=("$(basename "$b")"); done
fi
if [ ${#names[@]} -eq 0 ]; then
  echo "no benchmarks built yet"
  exit 0
fi
for name in "${names[@]}"; do
  echo "== $name"
  "$build/bench/$name"
  echo
done

#!/usr/bin/env bash
# `make demo`: a coordinator and 4 sailor-node processes on this machine, in 2 emulated zones,
# plan and train the tiny model for 20 iterations through the actor runtime (well under a
# minute on 2 cores). Extra arguments go to `sailor demo` (e.g. --nodes 2 --iterations 10).
set -euo pipefail
build=${BUILD_DIR:-build}
if [[ $# -gt 0 && -d "$1" ]]; then build=$1; shift; fi
cd "$(dirname "$0")/.."
exec "$build/bin/sailor" demo --nodes 4 --zones 2 --iterations 20 "$@"

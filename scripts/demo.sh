#!/usr/bin/env bash
# `make demo`: a coordinator and 4 sailor-node processes on this machine, in 2 emulated zones,
# plan and train a small character-level GPT on real text that needs no download: the English
# quotes of Debian's fortunes-min package (installed by scripts/install-deps.sh), which
# `sailor demo` joins into one corpus. It prints one line per iteration (the validation loss
# every 100), a summary and a sample of the trained model; a few minutes on 2 cores. Extra
# arguments go to `sailor demo` (e.g. --nodes 2 --iterations 100).
set -euo pipefail
build=${BUILD_DIR:-build}
if [[ $# -gt 0 && -d "$1" ]]; then build=$1; shift; fi
cd "$(dirname "$0")/.."
exec "$build/bin/sailor" demo --nodes 4 --zones 2 "$@"

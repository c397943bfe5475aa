#!/usr/bin/env bash
# The main job on its built-in default: the most complete pipeline that is built.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
exec "$build/bin/sailor" validate configs/clusters/gcp-5-zones.yaml configs/models/opt-350m.yaml configs/jobs/max-throughput.yaml

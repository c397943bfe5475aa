#!/usr/bin/env bash
# The checks of a first GPU machine, in one command (issue 41), bounded to 8 minutes:
#   1. configures the CUDA build (SAILOR_WITH_CUDA=ON, the toolkit and NCCL under
#      SAILOR_CUDA_ROOT, default /usr/local/cuda); fetches nothing: the packages of
#      scripts/install-deps.sh must be there already;
#   2. builds comm's unit tests and bench/nccl_check (comm and the CUDA runtime only);
#   3. runs the CUDA and NCCL unit tests (on a GPU they take their device branches);
#   4. runs bench/nccl_check: each device's memory, pinned copies, NCCL all-reduce /
#      broadcast / all-gather checked, all-reduce throughput, send/recv with 2 GPUs or more.
# On a machine without a GPU (or without a driver) steps 1-3 run and step 4 reports why there
# is no device: the "no GPU" mode, exit 0. Model code on CUDA tensors needs a CUDA-enabled
# LibTorch, which Debian lacks: the script says which one it found and checks comm only.
#
#   bash scripts/gpu-check.sh [BUILD_DIR]      (default build/; JOBS=N for the build)
#
# Exit: 0 passed (or no GPU), 1 a check failed, 3 cannot build here (missing tools or toolkit).
set -uo pipefail
cd "$(dirname "$0")/.."

build_dir=${1:-${BUILD_DIR:-build}}
cuda_root=${SAILOR_CUDA_ROOT:-/usr/local/cuda}
jobs=${JOBS:-$(nproc)}
log_dir=$build_dir/gpu-check
started=$SECONDS

say() { echo "gpu-check: $*"; }
elapsed() { echo "$((SECONDS - started)) s"; }
# The time left of the 8 minutes, less `reserve` seconds kept for the steps after this one.
# At least 1: `timeout 0` would mean no bound at all.
left() { local t=$((480 - (SECONDS - started) - $1)); echo $((t > 0 ? t : 1)); }

gpus=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | grep -c '^GPU')
  nvidia-smi -L | sed 's/^/gpu-check:   /'
fi
say "nvidia-smi sees $gpus GPU(s)"

for tool in cmake ninja; do
  command -v "$tool" >/dev/null 2>&1 || { say "missing $tool: install what scripts/install-deps.sh lists first (this script fetches nothing)"; exit 3; }
done
if [[ ! -f $cuda_root/include/cuda_runtime.h || ! -f $cuda_root/include/nccl.h ]]; then
  say "no CUDA toolkit with NCCL under $cuda_root (set SAILOR_CUDA_ROOT)"
  if [[ $gpus -eq 0 ]]; then say "no GPU and no toolkit: nothing to check here"; exit 0; fi
  exit 3
fi

# 1. Configure. Without LibTorch at all, once more without the model and training code.
mkdir -p "$log_dir"
configure() {
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSAILOR_WITH_CUDA=ON \
        -DSAILOR_CUDA_ROOT="$cuda_root" "$@" >"$log_dir/configure.log" 2>&1
}
if ! configure && ! configure -DSAILOR_WITH_TORCH=OFF; then
  say "configuring failed (log: $log_dir/configure.log):"; tail -n 15 "$log_dir/configure.log"; exit 3
fi
summary=$(grep -o 'sailor: LibTorch.*' "$log_dir/configure.log" | tail -n 1)
say "configured $build_dir: ${summary#sailor: }"
if [[ $summary == *"LibTorch ON (CUDA ON)"* ]]; then
  say "a CUDA-enabled LibTorch was found; this script checks comm's CUDA and NCCL paths only"
else
  say "no CUDA-enabled LibTorch (Debian's is CPU only): comm-level checks only, no model on CUDA"
fi

# 2. Build what the checks run (comm, its tests, nccl_check), bounded.
say "building sailor_comm_tests and nccl_check with $jobs job(s) ($(elapsed) so far)"
if ! timeout "$(left 120)" cmake --build "$build_dir" -j "$jobs" --target sailor_comm_tests nccl_check \
       >"$log_dir/build.log" 2>&1; then
  say "build failed or ran out of time (log: $log_dir/build.log):"; tail -n 20 "$log_dir/build.log"; exit 1
fi
say "built ($(elapsed))"

# 3. The CUDA and NCCL unit tests.
if ! timeout 60 "$build_dir/tests/sailor_comm_tests" --test-case='cuda*,nccl*' >"$log_dir/unit.log" 2>&1; then
  say "unit tests failed (log: $log_dir/unit.log):"; tail -n 30 "$log_dir/unit.log"; exit 1
fi
say "unit tests: $(grep -o 'test cases:.*' "$log_dir/unit.log" | tail -n 1)"

# 4. The devices.
timeout "$(left 0)" "$build_dir/bench/nccl_check" --require-gpu 1 2>&1 | tee "$log_dir/nccl_check.log"
rc=${PIPESTATUS[0]}
if [[ $rc -eq 3 ]]; then
  if [[ $gpus -gt 0 ]]; then
    say "nvidia-smi lists $gpus GPU(s) but the CUDA runtime cannot use them (driver too old for CUDA $(grep -o 'release [0-9.]*' <("$cuda_root/bin/nvcc" --version) | cut -d' ' -f2)?)"
    exit 1
  fi
  say "no GPU mode: the CUDA configuration builds and its unit tests pass; device checks skipped ($(elapsed))"
  exit 0
fi
if [[ $rc -ne 0 ]]; then say "device checks failed (exit $rc; log: $log_dir/nccl_check.log)"; exit 1; fi
say "all device checks passed ($(elapsed))"

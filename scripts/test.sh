#!/usr/bin/env bash
# Configures, builds and runs oasr's test suite (the README's test command).
# Uses the `cuda` preset where nvcc exists (CUDA sources are compiled; CUDA
# tests skip themselves without a GPU), else the `cpu` preset. On a machine
# without a GPU the CUDA part is built for one architecture only (sm_90a) to
# keep the build inside CI's budget; OASR_CUDA_ARCHS overrides.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then
  preset=cuda
  archs=${OASR_CUDA_ARCHS:-90a}
  cmake --preset cuda -DCMAKE_CUDA_ARCHITECTURES="$archs" >/dev/null
else
  preset=cpu
  cmake --preset cpu >/dev/null
fi
echo "test: building preset '$preset'"
cmake --build --preset "$preset" -j "$(nproc)"
echo "test: running ctest"
ctest --preset "$preset" -j "$(nproc)" "$@"

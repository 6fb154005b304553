#!/usr/bin/env bash
# Configures, builds and runs oasr's test suite (the README's test command).
# Uses the `cuda` preset where nvcc exists (CUDA sources are compiled; CUDA
# tests skip themselves without a GPU), else the `cpu` preset. On a machine
# without a GPU the CUDA part is built for one architecture only (sm_90a) to
# keep the build inside CI's budget; OASR_CUDA_ARCHS overrides. Then, where
# clang links libFuzzer, the `fuzz` preset's short fuzzing run (below).
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

# Then every input parser under libFuzzer with ASan and UBSan (tests/fuzz,
# docs/testing.md): the `fuzz` preset, built apart in build/fuzz, replays
# each target's corpus and runs a fixed number of mutations. It needs a
# clang++ that links -fsanitize=fuzzer (scripts/setup.sh installs clang-14
# and libclang-rt-14-dev); without one it is skipped, saying so. Arguments
# select tests of the main suite, so with arguments it is skipped too.
fuzz_cxx=""
for cxx in clang++ clang++-14; do
  if command -v "$cxx" >/dev/null 2>&1 &&
     echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
       "$cxx" -x c++ -fsanitize=fuzzer,address,undefined -o /dev/null - >/dev/null 2>&1; then
    fuzz_cxx=$(command -v "$cxx")
    break
  fi
done
if [ "${OASR_SKIP_FUZZ:-0}" = 1 ]; then
  echo "test: fuzz preset skipped (OASR_SKIP_FUZZ=1)"
elif [ $# -gt 0 ]; then
  echo "test: fuzz preset skipped (ctest arguments given; run ctest --preset fuzz for it)"
elif [ -z "$fuzz_cxx" ]; then
  echo "test: fuzz preset skipped: no clang++ that links libFuzzer" \
       "(apt-get install clang-14 libclang-rt-14-dev, or run scripts/setup.sh)"
else
  cmake --preset fuzz -DCMAKE_CXX_COMPILER="$fuzz_cxx" >/dev/null
  echo "test: building preset 'fuzz' ($fuzz_cxx)"
  cmake --build --preset fuzz -j "$(nproc)"
  echo "test: running ctest (fuzz)"
  ctest --preset fuzz -j "$(nproc)"
fi

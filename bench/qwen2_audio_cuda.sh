#!/usr/bin/env bash
# The [W3-Q] device run: the paged / grouped cached-attention and paged KV
# cache bit tests, the Qwen2-Audio oracle tests on CUDA, then `oasr bench
# qwen2-audio` on a random-weight model of Qwen2-Audio-7B's dimensions
# (bench/make_qwen2_audio_random.py) against transformers in the same run.
#
#   bench/qwen2_audio_cuda.sh BIN_DIR FIXTURE_DIR MANIFEST OUT_DIR [LM_LAYERS] [BATCHES]
#
# BIN_DIR holds oasr, test_paged_kv_cache, whisper_kv_cache and qwen2_audio;
# FIXTURE_DIR is the oracle test's generated directory (model/, reference/);
# results go to OUT_DIR (logs, bench.jsonl). Each step runs under its own
# timeout and the next runs whatever it returned.
set -u
BIN=$1 FIX=$2 MANIFEST=$3 OUT=$4 LAYERS=${5:-8} BATCHES=${6:-"1 16"}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
step() {  # name timeout command...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - start)) s" >> "$OUT/summary.txt"
}
step paged 120 "$BIN/test_paged_kv_cache"
step cached 120 "$BIN/whisper_kv_cache" --gtest_filter='CachedAttention*:WhisperKvCache*'
OASR_ORACLE_DIR=$FIX step qwen2_oracle 300 "$BIN/qwen2_audio"
step make_model 240 python3 bench/make_qwen2_audio_random.py --template "$FIX/model" \
  --out /tmp/q7 --lm-layers "$LAYERS" --audio-layers "$LAYERS" --max-new-tokens 64
for b in $BATCHES; do
  step "bench_b$b" 240 "$BIN/oasr" bench qwen2-audio --ckpt-dir /tmp/q7 --device cuda \
    --dtype bfloat16 --max-batch-size "$b" --manifest "$MANIFEST" --utterances 16 \
    --warmup 1 --repeats 3 --baseline-python python3 --peer-args "--modes sdpa,compile"
  grep -h '^{' "$OUT/bench_b$b.log" >> "$OUT/bench.jsonl"
done
for q in "--quantization-option kv_cache=fp8_e4m3" "--quantization int8_w8a8" \
         "--quantization fp8_w8a8"; do
  name=$(echo "$q" | tr -c 'a-z0-9' '_')
  step "quant$name" 120 "$BIN/oasr" bench qwen2-audio --ckpt-dir /tmp/q7 --device cuda \
    --dtype bfloat16 --max-batch-size 16 --manifest "$MANIFEST" --utterances 16 \
    --warmup 1 --repeats 3 --no-baseline $q
  grep -h '^{' "$OUT/quant$name.log" >> "$OUT/bench.jsonl"
done
cat "$OUT/summary.txt"

#!/usr/bin/env bash
# The [W3-N] device run: the FastConformer oracle tests on the GPU
# (tests/oracle/test_fastconformer_cuda.cc), then `oasr bench fastconformer`
# on a random-weight CTC model of a published size
# (bench/make_fastconformer_random.py) against transformers' ParakeetForCTC
# on the same weights in the same run, and oasr's other served recipes.
#
#   bench/fastconformer_cuda.sh BIN_DIR OUT_DIR STEPS [PRESET] [BATCHES] [PEER_MODES]
#
# STEPS, any of (in this order): oracle, fp16 (oasr float16 and the
# baseline's PEER_MODES, default eager,compile_cudagraphs), recipes (oasr
# bfloat16, int8_w8a8, fp8_w8a8; no baseline). BIN_DIR holds oasr and
# fastconformer_cuda; results go to OUT_DIR (logs, bench.jsonl). Each step
# runs under its own timeout and the next runs whatever it returned.
set -u
BIN=$1 OUT=$2 STEPS=$3 PRESET=${4:-parakeet-ctc-0.6b} BATCHES=${5:-1,16,64}
MODES=${6:-eager,compile_cudagraphs}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
step() {  # name timeout command...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - start)) s" >> "$OUT/summary.txt"
}
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has oracle; then
  OASR_ORACLE_DIR=tests/oracle/fastconformer/data step oracle 150 "$BIN/fastconformer_cuda"
fi
if has fp16 || has recipes; then
  step make_model 120 python3 bench/make_fastconformer_random.py \
    --template tests/oracle/fastconformer/data/ctc.nemo --out /tmp/fc.nemo --preset "$PRESET"
fi
if has fp16; then
  step bench_fp16 330 "$BIN/oasr" bench fastconformer --ckpt-dir /tmp/fc.nemo --device cuda \
    --dtype float16 --batch "$BATCHES" --warmup 3 --iters 10 --baseline-python python3 \
    --peer-modes "$MODES"
  grep -h '^{' "$OUT/bench_fp16.log" >> "$OUT/bench.jsonl"
fi
if has recipes; then
  for q in "--dtype bfloat16" "--quantization int8_w8a8" "--quantization fp8_w8a8" \
           "--quantization int8_w8a8 --dtype bfloat16"; do
    name=$(echo "$q" | tr -c 'a-z0-9' '_')
    step "oasr$name" 120 "$BIN/oasr" bench fastconformer --ckpt-dir /tmp/fc.nemo --device cuda \
      --batch "$BATCHES" --warmup 3 --iters 10 --no-baseline $q
    grep -h '^{' "$OUT/oasr$name.log" >> "$OUT/bench.jsonl"
  done
fi
cat "$OUT/summary.txt"

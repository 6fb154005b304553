#!/usr/bin/env bash
# One device run of the native sm90 lane's checks and benchmarks (the
# figures in bench/README.md "The native Hopper lane"), on an H100/H200:
#   1. the bit-equality and invariance tests (native, mma_sync, layers),
#   2. compute-sanitizer memcheck on the native tests' small cases,
#   3. the tuning sweep (every native configuration per shape) -> sweep.jsonl,
#   4. oasr bench scaled-mm against cuBLASLt, torch._scaled_mm, torch._int_mm
#      and torch fp16 F.linear (+ activation), side by side,
#   5. oasr bench encoder, fp16 / int8_w8a8 / fp8_w8a8 at B = 1, 16, 64
#      against torch eager, torch.compile and torch.compile reduce-overhead.
# Usage: bench/hopper_native.sh BIN_DIR OUT_DIR [steps, default 12345]
#   BIN_DIR holds oasr and the CUDA test binaries; OUT_DIR receives the logs.
set -uo pipefail
bin=$1
out=$2
steps=${3:-12345}
mkdir -p "$out"
py=${PYTHON:-python3}
want() { [[ $steps == *$1* ]]; }

if want 1; then
  for t in test_quant_scaled_mm_native test_quant_scaled_mm test_quant_cuda_layers; do
    "$bin/$t" --gtest_brief=1 2>&1 | tail -40 | sed "s/^/[$t] /"
  done | tee "$out/tests.log"
fi
if want 2; then
  compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/test_quant_scaled_mm_native" \
    --gtest_filter='*RefusesWhatItCannotRun*:*LargestExactK*:*E4m3WithinBound*' 2>&1 |
    tail -15 | tee "$out/memcheck.log"
fi
conformer="1,2048,256;1,256,2048;1,768,256"
shapes=""
for m in 1 16 64 250 1000 4000 16000 32768; do
  for kn in "2048,256" "256,2048" "768,256" "1152,384" "384,384" "1536,384" "384,1536"; do
    shapes+="$m,$kn;"
  done
done
if want 3; then
  "$bin/oasr" bench scaled-mm --device cuda --sweep --no-baseline --iters 20 --warmup 5 \
    --shapes "$shapes" > "$out/sweep.jsonl" 2> "$out/sweep.err"
  echo "sweep: $(grep -c native_sweep "$out/sweep.jsonl") native lines"
fi
if want 4; then
  big="250,2048,256;250,256,2048;250,768,256;4000,2048,256;4000,256,2048;4000,768,256"
  big+=";16000,2048,256;16000,256,2048;16000,768,256;32768,2048,256;32768,256,2048"
  big+=";32768,768,256;4000,1152,384;4000,384,384;4000,1536,384;4000,384,1536"
  big+=";16000,1152,384;16000,1536,384;16000,384,1536;8192,8192,8192"
  "$bin/oasr" bench scaled-mm --device cuda --shapes "$big" --baseline-python "$py" \
    --iters 30 > "$out/scaled_mm.jsonl" 2> "$out/scaled_mm.err"
  "$bin/oasr" bench scaled-mm --device cuda --act swish --baseline-python "$py" --iters 30 \
    --shapes "250,2048,256;4000,2048,256;16000,2048,256;32768,2048,256" \
    > "$out/scaled_mm_swish.jsonl" 2> "$out/scaled_mm_swish.err"
  grep compare "$out/scaled_mm.jsonl" "$out/scaled_mm_swish.jsonl" | head -80
fi
if want 5; then
  "$py" tests/oracle/u2pp/make_u2pp_case.py --out /tmp/u2pp_full --size full > /dev/null
  "$bin/oasr" bench encoder --ckpt-dir /tmp/u2pp_full --device cuda --dtype float16 \
    --batch 1,16,64 --seconds 10 --warmup 3 --iters 20 --baseline-python "$py" \
    > "$out/encoder_fp16.jsonl" 2> "$out/encoder_fp16.err"
  for q in int8_w8a8 fp8_w8a8; do
    for lane in auto mma_sync; do
      OASR_SCALED_MM_BACKEND=$lane "$bin/oasr" bench encoder --ckpt-dir /tmp/u2pp_full \
        --device cuda --dtype float16 --batch 1,16,64 --seconds 10 --warmup 3 --iters 20 \
        --quantization "$q" --no-baseline > "$out/encoder_${q}_$lane.jsonl" \
        2> "$out/encoder_${q}_$lane.err"
    done
  done
  cat "$out"/encoder_*.jsonl
fi

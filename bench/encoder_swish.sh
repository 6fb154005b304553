#!/usr/bin/env bash
# One device run behind bench/README.md "The branch-free swish epilogue":
# the same bits as before (the kernel tests compare GPU against host bit for
# bit), measured against the previous binary side by side in the same run:
#   1. the kernel / layer / graph tests that run the swish: host against
#      device (test_cuda_activations), every scaled-GEMM lane against the
#      CPU reference, the CUDA ops, the recorded encoder against eager;
#   2. oasr bench scaled-mm --act swish --sweep over the U2++ FFN w_1 shapes,
#      int8 and fp8, for this binary and for OLD_OASR;
#   3. oasr bench encoder at B = 1, 16, 64 x 10 s: fp16 with the PyTorch
#      baselines; int8_w8a8 and smoothquant_w8a8_fused for this binary and
#      OLD_OASR (CUDA graphs on, the default);
#   4. the bundled model's transcripts (bench/encoder_graphs.sh step 3);
#   5. ncu: GPU time per kernel of one eager B = 64 forward, fp16 and int8_w8a8.
# Usage: bench/encoder_swish.sh BIN_DIR OLD_OASR EVAL_SETS OUT_DIR [steps, default 12345]
set -uo pipefail
bin=$1
old=$2
sets=$3
out=$4
steps=${5:-12345}
mkdir -p "$out"
py=${PYTHON:-python3}
here=$(dirname "$0")
want() { [[ $steps == *$1* ]]; }

if want 1; then
  for t in test_cuda_activations test_quant_scaled_mm test_quant_scaled_mm_native \
    test_quant_kernels test_quant_cuda_layers test_cuda_backend_ops test_cuda_graphs \
    test_cuda_encoder_kernels test_sequence_mask; do
    "$bin/$t" --gtest_brief=1 2>&1 | tail -30 | sed "s/^/[$t] /"
  done | tee "$out/tests.log"
fi
if want 2; then
  shapes="250,2048,256;4000,2048,256;16000,2048,256;32768,2048,256"
  for arm in new old; do
    exe=$bin/oasr
    [[ $arm == old ]] && exe=$old
    "$exe" bench scaled-mm --device cuda --shapes "$shapes" --format all --act swish --sweep \
      --iters 30 $([[ $arm == old ]] && echo --no-baseline) > "$out/scaled_mm_swish_$arm.jsonl" \
      2> "$out/scaled_mm_swish_$arm.err"
  done
fi
if want 3; then
  "$py" tests/oracle/u2pp/make_u2pp_case.py --out /tmp/u2pp_full --size full > /dev/null
  common=(--device cuda --dtype float16 --batch 1,16,64 --seconds 10 --warmup 3 --iters 30)
  "$bin/oasr" bench encoder --ckpt-dir /tmp/u2pp_full "${common[@]}" --baseline-python "$py" \
    > "$out/encoder_fp16.jsonl" 2> "$out/encoder_fp16.err"
  calib=/tmp/u2pp_full_calib/calib.jsonl
  "$py" "$here/make_calib_clips.py"
  "$bin/oasr" quantize /tmp/u2pp_full /tmp/u2pp_full_sq --recipe smoothquant_w8a8_fused \
    --calib-manifest "$calib" --calib-device cuda > "$out/quantize_sq.log" 2>&1
  for arm in new old; do
    exe=$bin/oasr
    [[ $arm == old ]] && exe=$old
    "$exe" bench encoder --ckpt-dir /tmp/u2pp_full "${common[@]}" --no-baseline \
      --quantization int8_w8a8 > "$out/encoder_int8_$arm.jsonl" 2> "$out/encoder_int8_$arm.err"
    "$exe" bench encoder --ckpt-dir /tmp/u2pp_full_sq "${common[@]}" --no-baseline \
      > "$out/encoder_sq_$arm.jsonl" 2> "$out/encoder_sq_$arm.err"
  done
  grep -h 'median' "$out"/encoder_*.jsonl | head -60
fi
want 4 && bash "$here/encoder_graphs.sh" "$bin" "$sets" "$out" 3
if want 5; then
  [[ -d /tmp/u2pp_full ]] ||
    "$py" tests/oracle/u2pp/make_u2pp_case.py --out /tmp/u2pp_full --size full > /dev/null
  for q in none int8_w8a8; do
    qflag=()
    [[ $q != none ]] && qflag=(--quantization "$q")
    OASR_CUDA_GRAPHS=0 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
      "$bin/oasr" bench encoder --ckpt-dir /tmp/u2pp_full --device cuda --dtype float16 \
      --batch 64 --seconds 10 --warmup 0 --iters 1 --no-baseline "${qflag[@]}" \
      > "$out/ncu_$q.csv" 2> "$out/ncu_$q.err"
  done
fi
exit 0

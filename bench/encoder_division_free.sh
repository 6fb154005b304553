#!/usr/bin/env bash
# One device run behind bench/README.md "Division-free swish" ([W3-G]): the
# new sigmoid / swish definition (core/activations.h), measured against the
# previous binary side by side in the same run:
#   1. the tests that run the activations on the device: sigmoid and swish
#      over all 2^32 inputs against the host (bits) and libm (<= 2 ulp), every
#      scaled-GEMM lane against the CPU reference, the CUDA ops and graphs;
#   2. oasr bench scaled-mm --act swish --sweep over the U2++ FFN w_1 shapes,
#      int8 and fp8, this binary and OLD_OASR;
#   3. oasr bench encoder, full-size U2++, B = 1, 16, 64 x 10 s (CUDA graphs
#      on): fp16 with the PyTorch baselines (eager, torch.compile default and
#      reduce-overhead, SDPA); int8_w8a8, fp8_w8a8 and smoothquant_w8a8_fused
#      for this binary and OLD_OASR;
#   4. torchao's int8 dynamic and fp8 rowwise W8A8 under torch.compile
#      mode="reduce-overhead" on the same checkpoint (PYTHONPATH must hold
#      torchao; its eager and default-mode runs were 15-250 ms a call at B = 1
#      on an H100 and are left out to fit the device time);
#   5. ncu: GPU time per kernel of one eager B = 64 int8_w8a8 forward, this
#      binary and OLD_OASR;
#   6. the bundled model's transcripts at max batch 1/8/16/32 per recipe
#      (bench/encoder_graphs.sh step 3 on EVAL_SETS).
# Usage: bench/encoder_division_free.sh BIN_DIR OLD_OASR EVAL_SETS OUT_DIR [steps, default 123456]
set -uo pipefail
bin=$1
old=$2
sets=$3
out=$4
steps=${5:-123456}
mkdir -p "$out"
py=${PYTHON:-python3}
here=$(dirname "$0")
want() { [[ $steps == *$1* ]]; }
full=/tmp/u2pp_full
common=(--device cuda --dtype float16 --batch 1,16,64 --seconds 10 --warmup 3 --iters 30)
make_full() {
  [[ -d $full ]] || "$py" tests/oracle/u2pp/make_u2pp_case.py --out "$full" --size full > /dev/null
}

if want 1; then
  for t in test_cuda_activations test_quant_scaled_mm test_quant_scaled_mm_native \
    test_quant_kernels test_quant_cuda_layers test_cuda_backend_ops test_cuda_graphs \
    test_cuda_encoder_kernels; do
    "$bin/$t" --gtest_brief=1 2>&1 | tail -30 | sed "s/^/[$t] /"
  done | tee "$out/tests.log"
fi
# Step 2 is bench/encoder_swish.sh's step 2 (the same shapes and sweep).
want 2 && bash "$here/encoder_swish.sh" "$bin" "$old" "$sets" "$out" 2
if want 3; then
  make_full
  "$bin/oasr" bench encoder --ckpt-dir "$full" "${common[@]}" --baseline-python "$py" \
    > "$out/encoder_fp16.jsonl" 2> "$out/encoder_fp16.err"
  calib=/tmp/u2pp_full_calib/calib.jsonl
  "$py" "$here/make_calib_clips.py"
  "$bin/oasr" quantize "$full" /tmp/u2pp_full_sq --recipe smoothquant_w8a8_fused \
    --calib-manifest "$calib" --calib-device cuda > "$out/quantize_sq.log" 2>&1
  for arm in new old; do
    exe=$bin/oasr
    [[ $arm == old ]] && exe=$old
    for q in int8_w8a8 fp8_w8a8; do
      "$exe" bench encoder --ckpt-dir "$full" "${common[@]}" --no-baseline --quantization "$q" \
        > "$out/encoder_${q}_$arm.jsonl" 2> "$out/encoder_${q}_$arm.err"
    done
    "$exe" bench encoder --ckpt-dir /tmp/u2pp_full_sq "${common[@]}" --no-baseline \
      > "$out/encoder_sq_$arm.jsonl" 2> "$out/encoder_sq_$arm.err"
  done
  grep -h 'median' "$out"/encoder_*.jsonl | head -60
fi
if want 4; then
  make_full
  for config in int8_dynamic fp8_rowwise; do
    "$py" "$here/u2pp_torch_bench.py" --ckpt-dir "$full" --device cuda --dtype float16 \
      --batch 1,16,64 --seconds 10 --warmup 3 --iters 20 --compile --only-cudagraphs \
      --torchao "$config" \
      > "$out/torchao_$config.jsonl" 2> "$out/torchao_$config.err"
  done
  cat "$out"/torchao_*.jsonl
fi
if want 5; then
  make_full
  for arm in new old; do
    exe=$bin/oasr
    [[ $arm == old ]] && exe=$old
    OASR_CUDA_GRAPHS=0 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
      "$exe" bench encoder --ckpt-dir "$full" --device cuda --dtype float16 --batch 64 \
      --seconds 10 --warmup 0 --iters 1 --no-baseline --quantization int8_w8a8 \
      > "$out/ncu_int8_$arm.csv" 2> "$out/ncu_int8_$arm.err"
  done
fi
want 6 && bash "$here/encoder_graphs.sh" "$bin" "$sets" "$out" 3
exit 0

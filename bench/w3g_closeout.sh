#!/usr/bin/env bash
# The closing device run of [W3-G] (bench/README.md "[W3-G] where it ends"),
# on an H100/H200, in steps that fit one device call each:
#   1. the bit-equality tests of every CUDA lane and op: the activations over
#      all 2^32 inputs against the host, the scaled GEMMs (mma.sync, native
#      sm90, GEMV) and quantize kernels against the CPU reference, the fused
#      producers, the CUDA ops, graphs and encoder kernels;
#   2. oasr bench encoder, full-size U2++, B = 1 / 16 / 64 x 10 s, CUDA graphs
#      on: fp16 with PyTorch beside it in the same call (eager, torch.compile
#      default and mode="reduce-overhead", SDPA), then int8_w8a8, fp8_w8a8 and
#      smoothquant_w8a8_fused (calibrated on the device);
#   3. ncu: GPU time per kernel of one eager B = 64 forward for fp16,
#      int8_w8a8 and smoothquant_w8a8_fused (tools/ncu_kernel_summary.py
#      groups it);
#   4. the bundled model on real_test: transcripts at max batch 1 / 8 / 16 /
#      32 with graphs against max batch 8 eager, for float16, int8_w8a8 and
#      fp8_w8a8 (bench/encoder_graphs.sh's step 3 over every online recipe);
#   5. torchao's int8 dynamic-activation / int8-weight and fp8 rowwise
#      configurations under torch.compile mode="reduce-overhead" on the same
#      checkpoint (PYTHONPATH must hold torchao).
# Usage: bench/w3g_closeout.sh BIN_DIR EVAL_SETS OUT_DIR [steps, default 234]
set -uo pipefail
bin=$1
sets=$2
out=$3
steps=${4:-234}
mkdir -p "$out"
py=${PYTHON:-python3}
here=$(dirname "$0")
full=/tmp/u2pp_full
want() { [[ $steps == *$1* ]]; }
common=(--device cuda --dtype float16 --batch 1,16,64 --seconds 10 --warmup 3 --iters 30)
make_full() {
  [[ -d $full ]] || "$py" tests/oracle/u2pp/make_u2pp_case.py --out "$full" --size full > /dev/null
}
make_sq() {
  make_full
  [[ -d ${full}_sq ]] && return 0
  "$py" "$here/make_calib_clips.py"
  "$bin/oasr" quantize "$full" "${full}_sq" --recipe smoothquant_w8a8_fused \
    --calib-manifest /tmp/u2pp_full_calib/calib.jsonl --calib-device cuda \
    > "$out/quantize_sq.log" 2>&1
}

if want 1; then
  for t in test_cuda_activations test_quant_scaled_mm test_quant_scaled_mm_native \
    test_quant_gemv test_quant_kernels test_quant_cuda_layers test_fused_producers \
    test_cuda_backend_ops test_cuda_graphs test_cuda_encoder_kernels test_sequence_mask; do
    "$bin/$t" --gtest_brief=1 2>&1 | tail -12 | sed "s/^/[$t] /"
  done | tee "$out/tests.log"
fi
if want 2; then
  make_full
  "$bin/oasr" bench encoder --ckpt-dir "$full" "${common[@]}" --baseline-python "$py" \
    > "$out/encoder_fp16.jsonl" 2> "$out/encoder_fp16.err"
  for q in int8_w8a8 fp8_w8a8; do
    "$bin/oasr" bench encoder --ckpt-dir "$full" "${common[@]}" --no-baseline --quantization "$q" \
      > "$out/encoder_$q.jsonl" 2> "$out/encoder_$q.err"
  done
  make_sq && "$bin/oasr" bench encoder --ckpt-dir "${full}_sq" "${common[@]}" --no-baseline \
    > "$out/encoder_sq.jsonl" 2> "$out/encoder_sq.err"
  grep -h 'median' "$out"/encoder_*.jsonl | head -40
fi
if want 3; then
  make_full
  profile() {  # name, ckpt, extra flags...
    local name=$1 ckpt=$2
    shift 2
    OASR_CUDA_GRAPHS=0 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
      "$bin/oasr" bench encoder --ckpt-dir "$ckpt" --device cuda --dtype float16 --batch 64 \
      --seconds 10 --warmup 0 --iters 1 --no-baseline "$@" \
      > "$out/ncu_$name.csv" 2> "$out/ncu_$name.err"
    "$py" tools/ncu_kernel_summary.py "$out/ncu_$name.csv" > "$out/ncu_$name.txt" 2>&1
  }
  profile fp16 "$full"
  profile int8 "$full" --quantization int8_w8a8
  make_sq && profile sq "${full}_sq"
  tail -n 20 "$out"/ncu_*.txt
fi
if want 4; then
  RECIPES="none int8_w8a8 fp8_w8a8" bash "$here/encoder_graphs.sh" "$bin" "$sets" "$out" 3
fi
if want 5; then
  make_full
  for config in int8_dynamic fp8_rowwise; do
    "$py" "$here/u2pp_torch_bench.py" --ckpt-dir "$full" --device cuda --dtype float16 \
      --batch "${TORCHAO_BATCH:-1,16,64}" --seconds 10 --warmup 3 --iters 20 --compile \
      --only-cudagraphs --torchao "$config" \
      > "$out/torchao_$config.jsonl" 2> "$out/torchao_$config.err"
  done
  cat "$out"/torchao_*.jsonl
fi
exit 0

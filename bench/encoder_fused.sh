#!/usr/bin/env bash
# One device run of the fused CUDA encoder's checks and benchmarks (the
# figures in bench/README.md "The fused CUDA encoder"), on an H100/H200:
#   1. the kernel tests: fused attention and channels-last convolution against
#      their definitions and bit-for-bit batch invariance, plus the quantized
#      layer / native lane bit-equality tests the encoder serves through,
#   2. compute-sanitizer memcheck on the new kernels' tests,
#   3. the int8 swish-epilogue GEMM on every lane and configuration, then
#      oasr bench encoder at B = 1, 16, 64 x 10 s: fp16 against torch eager,
#      torch.compile and torch.compile reduce-overhead side by side; fp16,
#      int8_w8a8 and (when calibration works on the synthetic model)
#      smoothquant_w8a8_fused, each with the fused attention on and off,
#   4. the bundled model on real_test / synth_test: WER per configuration and
#      the transcripts at max batch size 1, 8, 16, 32 compared line by line,
#   5. ncu: GPU time per kernel of one B = 64 forward (fp16 and int8_w8a8).
# Usage: bench/encoder_fused.sh BIN_DIR EVAL_SETS OUT_DIR [steps, default 12345]
set -uo pipefail
bin=$1
sets=$2
out=$3
steps=${4:-12345}
mkdir -p "$out"
py=${PYTHON:-python3}
model=models/oasr-u2pp-char-8k
want() { [[ $steps == *$1* ]]; }

if want 1; then
  for t in test_cuda_encoder_kernels test_cuda_activations test_cuda_backend_ops test_quant_kernels test_quant_cuda_layers \
    test_quant_scaled_mm_native; do
    "$bin/$t" --gtest_brief=1 2>&1 | tail -40 | sed "s/^/[$t] /"
  done | tee "$out/tests.log"
fi
if want 2; then
  compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/test_cuda_encoder_kernels" \
    --gtest_filter='*Unmasked*:*Strided*:*FirstSubsampling*' 2>&1 | tail -8 | tee "$out/memcheck.log"
fi
if want 3; then
  # Which lane and configuration serve an int8 GEMM with a swish epilogue best.
  "$bin/oasr" bench scaled-mm --device cuda --act swish --sweep --no-baseline --format int8 \
    --iters 20 --shapes "250,2048,256;4000,2048,256;16000,2048,256" \
    > "$out/swish_sweep.jsonl" 2> "$out/swish_sweep.err"
  "$py" tests/oracle/u2pp/make_u2pp_case.py --out /tmp/u2pp_full --size full > /dev/null
  common=(--device cuda --dtype float16 --batch 1,16,64 --seconds 10 --warmup 3 --iters 20)
  "$bin/oasr" bench encoder --ckpt-dir /tmp/u2pp_full "${common[@]}" --baseline-python "$py" \
    > "$out/encoder_fp16.jsonl" 2> "$out/encoder_fp16.err"
  OASR_FUSED_ATTENTION=0 "$bin/oasr" bench encoder --ckpt-dir /tmp/u2pp_full "${common[@]}" --no-baseline \
    > "$out/encoder_fp16_unfused.jsonl" 2> "$out/encoder_fp16_unfused.err"
  for fused in 1 0; do
    OASR_FUSED_ATTENTION=$fused "$bin/oasr" bench encoder --ckpt-dir /tmp/u2pp_full "${common[@]}" --no-baseline \
      --quantization int8_w8a8 > "$out/encoder_int8_fused$fused.jsonl" \
      2> "$out/encoder_int8_fused$fused.err"
  done
  # The synthetic model (random weights, 16 kHz) only needs activations of a
  # realistic range to set its scales: 16 ten-second clips of tones in noise.
  calib=/tmp/u2pp_full_calib/calib.jsonl
  "$py" bench/make_calib_clips.py
  if "$bin/oasr" quantize /tmp/u2pp_full /tmp/u2pp_full_sq --recipe smoothquant_w8a8_fused \
    --calib-manifest "$calib" --calib-device cuda > "$out/quantize_sq.log" 2>&1; then
    "$bin/oasr" bench encoder --ckpt-dir /tmp/u2pp_full_sq "${common[@]}" --no-baseline \
      > "$out/encoder_sq.jsonl" 2> "$out/encoder_sq.err"
  fi
  grep -h '"compare"\|median' "$out"/encoder_*.jsonl | head -60
fi
if want 4; then
  for set in real_test synth_test; do
    [[ -f $sets/$set.jsonl ]] || continue
    for q in none int8_w8a8; do
      qflag=()
      [[ $q != none ]] && qflag=(--quantization "$q")
      for mb in 1 8 16 32; do
        "$bin/oasr" eval --ckpt-dir "$model" --manifest "$sets/$set.jsonl" --device cuda \
          --dtype float16 --decode-method attention_rescoring --max-batch-size "$mb" \
          --per-utterance "${qflag[@]}" > "$out/eval_${set}_${q}_mb$mb.txt" 2>> "$out/eval.err"
      done
      head -1 "$out/eval_${set}_${q}_mb8.txt" | sed "s/^/[$set $q mb8] /"
      for mb in 1 16 32; do
        same=$(paste <(grep -o 'hyp=.*' "$out/eval_${set}_${q}_mb8.txt") \
          <(grep -o 'hyp=.*' "$out/eval_${set}_${q}_mb$mb.txt") | awk -F'\t' '$1==$2' | wc -l)
        echo "[$set $q] max batch $mb vs 8: $same identical of $(grep -c 'hyp=' \
          "$out/eval_${set}_${q}_mb8.txt")"
      done
    done
    "$bin/oasr" eval --ckpt-dir "$model" --manifest "$sets/$set.jsonl" --device cuda \
      --dtype float16 --decode-method attention_rescoring --chunk-size 16 \
      > "$out/eval_${set}_chunk16.txt" 2>> "$out/eval.err"
    head -1 "$out/eval_${set}_chunk16.txt" | sed "s/^/[$set fp16 chunk16] /"
  done | tee "$out/accuracy.log"
fi
if want 5; then
  [[ -d /tmp/u2pp_full ]] ||
    "$py" tests/oracle/u2pp/make_u2pp_case.py --out /tmp/u2pp_full --size full > /dev/null
  for q in none int8_w8a8; do
    qflag=()
    [[ $q != none ]] && qflag=(--quantization "$q")
    ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
      "$bin/oasr" bench encoder --ckpt-dir /tmp/u2pp_full --device cuda --dtype float16 \
      --batch 64 --seconds 10 --warmup 0 --iters 1 --no-baseline "${qflag[@]}" \
      > "$out/ncu_$q.csv" 2> "$out/ncu_$q.err"
  done
  # Where the fused attention kernel's time goes (throughput, occupancy, stalls).
  ncu -k regex:rel_position_attention -c 2 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section LaunchStats "$bin/oasr" bench encoder \
    --ckpt-dir /tmp/u2pp_full --device cuda --dtype float16 --batch 64 --seconds 10 \
    --warmup 0 --iters 1 --no-baseline > "$out/ncu_attention.txt" 2>&1
fi

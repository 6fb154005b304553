#!/usr/bin/env bash
# One device run of Whisper on CUDA (the figures in bench/README.md "Whisper
# on the GPU"), on an H100/H200:
#   1. the CUDA tests: the KV cache's device stores equal the host float32
#      store bit for bit; the search with its candidates ranked on the
#      device against HF generate() (the whisper_search oracle) and the
#      ranking op against its CPU body; tiny.en served on CUDA in float32 /
#      float16 / bfloat16 against transformers' logits (the
#      whisper_model_tiny_en oracle). ORACLE_DIR holds the two oracles'
#      folders as the build machine's ctest wrote them: search/ and
#      model_tiny_en/;
#   2. `oasr eval --output-format json` on MANIFEST per configuration
#      (hypotheses included, so they can be compared with the CPU's);
#   3. `oasr bench whisper` (median of REPEATS timed calls, default 5) at
#      batch 1 and 16, greedy and 5 beams, float16 / int8_w8a8 / fp8_w8a8 /
#      the fp8 KV cache, with transformers on the same weights and audio in
#      the same run (bench/transformers_whisper_bench.py: SDPA, eager,
#      torch.compile with a static cache in the default mode and with
#      mode="reduce-overhead");
#   4. the in-place decoder attention (ops/cached_attention.h) against the
#      unfused products in the same run: oasr bench whisper at batch 16,
#      greedy and 5 beams, float16 and the fp8 KV cache, with
#      OASR_FUSED_ATTENTION=1 and =0;
#   5. `oasr quantize` recipes (CALIB: a 16 kHz calibration manifest, e.g.
#      tools/data/resample_manifest.py's copy of the eval sets' calib.jsonl),
#      calibrated on the GPU in float32: each checkpoint's `oasr eval` on
#      MANIFEST (float16, greedy; beam 5 for the fused one) and `oasr bench
#      whisper` at batch 16 and 1, greedy, beside float16 and online
#      int8_w8a8 in the same step; online int8_w8a8 with the fused producers
#      off (OASR_QUANT_FUSION=0) must give the same hypotheses as with them on.
# Usage: bench/whisper_cuda.sh BIN_DIR MODEL_DIR MANIFEST ORACLE_DIR OUT [steps, default 123]
#   Step 3's grid narrows with BATCHES (default "16 1"), METHODS
#   ("greedy_search beam_search"), SCHEMES ("none int8_w8a8 fp8_w8a8 kv_fp8")
#   and GREEDY_COMPILE (the peer's compile modes at greedy,
#   "none,default,reduce-overhead").
#   BIN_DIR holds oasr, whisper_kv_cache, whisper_search and whisper_model_tiny_en; MODEL_DIR
#   the Hugging Face directory `oasr convert` wrote (the oracle's metadata
#   names its path); OUT receives the logs and JSON lines.
set -uo pipefail
bin=$1
model=$2
manifest=$3
oracle=$4
out=$5
steps=${6:-123}
utterances=${UTTERANCES:-40}
mkdir -p "$out"
status=0
want() { [[ $steps == *$1* ]]; }

if want 1; then
  {
    "$bin/whisper_kv_cache" --gtest_brief=1 --gtest_filter='*Device*:*Cuda*'
    OASR_ORACLE_DIR=$oracle/search "$bin/whisper_search" --gtest_brief=1
    OASR_ORACLE_DIR=$oracle/model_tiny_en "$bin/whisper_model_tiny_en" --gtest_brief=1
  } 2>&1 | tee "$out/tests.log"
fi

if want 2; then
  run_eval() {  # name, then flags
    local name=$1
    shift
    local start=$SECONDS
    "$bin/oasr" eval --ckpt-dir "$model" --manifest "$manifest" --output-format json "$@" \
      > "$out/eval_$name.json" 2> "$out/eval_$name.err"
    echo "eval $name: exit $? in $((SECONDS - start)) s: $(head -c 300 "$out/eval_$name.json")"
  }
  run_eval cuda_fp32_greedy --device cuda --dtype float32
  run_eval cuda_fp16_greedy --device cuda --dtype float16
  run_eval cuda_bf16_greedy --device cuda --dtype bfloat16
  run_eval cuda_fp16_beam5 --device cuda --dtype float16 --decode-method beam_search
  run_eval cuda_fp16_greedy_timestamps --device cuda --dtype float16 --timestamps
  run_eval cuda_int8_greedy --device cuda --dtype float16 --quantization int8_w8a8
  run_eval cuda_fp8_greedy --device cuda --dtype float16 --quantization fp8_w8a8
  run_eval cuda_fp16_greedy_kv_fp8 --device cuda --dtype float16 \
    --quantization-option kv_cache=fp8_e4m3
  run_eval cuda_fp16_beam5_kv_fp8 --device cuda --dtype float16 --decode-method beam_search \
    --quantization-option kv_cache=fp8_e4m3
  run_eval cuda_fp32_greedy_batch1 --device cuda --dtype float32 --max-batch-size 1
fi

if want 3; then
  peer=(--baseline-python "${PYTHON:-python3}" --baseline-script bench/transformers_whisper_bench.py
        --peer-model-dir "$model" --peer-compute-types float16)
  for batch in ${BATCHES:-16 1}; do
    for method in ${METHODS:-greedy_search beam_search}; do
      beams=1
      [[ $method == beam_search ]] && beams=5
      compile=none
      # reduce-overhead last: where it crashes the peer, the others are in.
      [[ $method == greedy_search ]] && compile=${GREEDY_COMPILE:-none,default,reduce-overhead}
      for scheme in ${SCHEMES:-none int8_w8a8 fp8_w8a8 kv_fp8}; do
        quant=()
        baseline=("${peer[@]}" "--peer-args=--device cuda --batch-size $batch --num-beams $beams --compile $compile")
        case $scheme in
          none) ;;
          kv_fp8) quant=(--quantization-option kv_cache=fp8_e4m3) && baseline=(--no-baseline) ;;
          *) quant=(--quantization "$scheme") && baseline=(--no-baseline) ;;
        esac
        "$bin/oasr" bench whisper --ckpt-dir "$model" --manifest "$manifest" \
          --utterances "$utterances" --warmup 2 --repeats "${REPEATS:-5}" --device cuda \
          --dtype float16 --max-batch-size "$batch" \
          --decode-method "$method" "${quant[@]}" "${baseline[@]}" \
          2>> "$out/bench.err" | tee -a "$out/bench.jsonl"
      done
    done
  done
fi

if want 4; then
  for method in greedy_search beam_search; do
    for fused in 1 0; do
      for kv in "" kv_cache=fp8_e4m3; do
        OASR_FUSED_ATTENTION=$fused "$bin/oasr" bench whisper --ckpt-dir "$model" \
          --manifest "$manifest" --utterances "$utterances" --warmup 2 \
          --repeats "${REPEATS:-5}" --device cuda --dtype float16 --max-batch-size 16 --decode-method "$method" --no-baseline \
          ${kv:+--quantization-option "$kv"} 2>> "$out/bench.err" |
          sed "s/^{/{\"fused_attention\":$fused,/" | tee -a "$out/bench_fused.jsonl"
      done
    done
  done
fi

if want 5; then
  calib=${CALIB:?step 5 needs CALIB, a 16 kHz calibration manifest}
  quantized=${QUANTIZED_DIR:-$out/quantized}
  mkdir -p "$quantized"
  recipes=(
    "sq_w8a8_fused --recipe smoothquant_w8a8_fused"
    "sq_w8a8_fused_conv1d --recipe smoothquant_w8a8_fused --module-types linear,conv1d"
    "sq_w8a8 --recipe smoothquant_w8a8"
    "int8_rtn --recipe int8_w8a8_rtn"
    "sq_fp8_fused --recipe smoothquant_fp8_w8a8_fused"
    "fp8_rtn --recipe fp8_w8a8_rtn"
  )
  for entry in "${recipes[@]}"; do
    read -r name flags <<< "$entry"
    calib_flags=(--calib-manifest "$calib" --calib-device cuda)
    [[ $name == *rtn && $flags != *conv1d* ]] && calib_flags=()
    start=$SECONDS
    # shellcheck disable=SC2086
    if ! "$bin/oasr" quantize "$model" "$quantized/$name" $flags "${calib_flags[@]}" --force \
      > "$out/quantize_$name.log" 2>&1; then
      echo "quantize $name: FAILED (see quantize_$name.log)"
      status=1
      continue
    fi
    echo "quantize $name: ok in $((SECONDS - start)) s"
    start=$SECONDS
    "$bin/oasr" eval --ckpt-dir "$quantized/$name" --manifest "$manifest" --output-format json \
      --device cuda --dtype float16 > "$out/eval_q_$name.json" 2> "$out/eval_q_$name.err"
    echo "eval $name: exit $? in $((SECONDS - start)) s: $(tail -c 200 "$out/eval_q_$name.json")"
  done
  "$bin/oasr" eval --ckpt-dir "$quantized/sq_w8a8_fused" --manifest "$manifest" \
    --output-format json --device cuda --dtype float16 --decode-method beam_search \
    > "$out/eval_q_sq_w8a8_fused_beam5.json" 2> "$out/eval_q_sq_w8a8_fused_beam5.err"
  for fusion in 1 0; do
    OASR_QUANT_FUSION=$fusion "$bin/oasr" eval --ckpt-dir "$model" --manifest "$manifest" \
      --output-format json --device cuda --dtype float16 --quantization int8_w8a8 \
      > "$out/eval_int8_fusion$fusion.json" 2> "$out/eval_int8_fusion$fusion.err"
  done
  if cmp -s "$out/eval_int8_fusion1.json" "$out/eval_int8_fusion0.json"; then
    echo "online int8_w8a8: fused producers on == off (identical eval JSON)"
  else
    echo "online int8_w8a8: FAILED: fused producers on != off"
    status=1
  fi
  for batch in 16 1; do
    for target in "fp16 $model" "int8_online $model --quantization int8_w8a8" \
                  "sq_w8a8_fused $quantized/sq_w8a8_fused" \
                  "sq_w8a8_fused_conv1d $quantized/sq_w8a8_fused_conv1d" \
                  "sq_fp8_fused $quantized/sq_fp8_fused"; do
      read -r name dir extra <<< "$target"
      # shellcheck disable=SC2086
      "$bin/oasr" bench whisper --ckpt-dir "$dir" --manifest "$manifest" \
        --utterances "$utterances" --warmup 2 --repeats "${REPEATS:-5}" --device cuda \
        --dtype float16 --max-batch-size "$batch" --decode-method greedy_search --no-baseline \
        $extra 2>> "$out/bench.err" | sed "s/^{/{\"checkpoint\":\"$name\",/" |
        tee -a "$out/bench_quantized.jsonl"
    done
  done
fi
exit $status

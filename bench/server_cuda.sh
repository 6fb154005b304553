#!/usr/bin/env bash
# One device run of oasr-server's GPU path (the figures in the [W2-S] note):
# for fp16 and int8_w8a8 on CUDA, `oasr transcribe` of each prompt alone is
# the reference; 3 x N concurrent curl requests through the server must give
# the same texts (dynamic batching on the device), each prompt streamed over
# the WebSocket must give `oasr transcribe --chunk-size 16`'s text, then
# /metrics (batch sizes, device memory), /v1/quantization and a SIGTERM
# drain (exit 0); last, bench/server_load.py: CLIENTS (256) concurrent
# clients x REQUESTS (2) x 2 rounds on int8_w8a8, batched and one at a time.
# Usage: bench/server_cuda.sh BIN_DIR WAV_DIR OUT_DIR
set -uo pipefail
bin=$1
wavs=$2
out=$3
mkdir -p "$out"
model=models/oasr-u2pp-char-8k
files=("$wavs"/*.wav)
for scheme in none int8_w8a8; do
  flags=(--device "${DEVICE:-cuda}" --dtype "${DTYPE:-float16}" --max-batch-size 8)
  [ "$scheme" != none ] && flags+=(--quantization "$scheme")
  : > "$out/cli_$scheme.txt"
  for f in "${files[@]}"; do
    "$bin/oasr" transcribe --ckpt-dir "$model" "${flags[@]}" "$f" >> "$out/cli_$scheme.txt"
  done
  "$bin/oasr-server" --ckpt-dir "$model" "${flags[@]}" --port 0 --max-batch-delay-ms 20 \
    > "$out/server_$scheme.out" 2> "$out/server_$scheme.log" &
  pid=$!
  port=""
  for _ in $(seq 100); do
    port=$(grep -o "listening on http://127.0.0.1:[0-9]*" "$out/server_$scheme.log" | grep -o "[0-9]*$")
    [ -n "$port" ] && break
    sleep 0.2
  done
  url=http://127.0.0.1:$port
  start=$(date +%s.%N)
  pids=()
  for round in 1 2 3; do
    for f in "${files[@]}"; do
      (printf '%s\t' "$f"; curl -s -F "file=@$f" -F model=oasr-u2pp-char-8k \
        -F response_format=text "$url/v1/audio/transcriptions") > "$out/r_${scheme}_${round}_$(basename "$f").txt" &
      pids+=($!)
    done
  done
  wait "${pids[@]}"
  end=$(date +%s.%N)
  echo "$scheme: $((3 * ${#files[@]})) concurrent requests in $(awk "BEGIN {print $end - $start}") s" | tee -a "$out/summary.txt"
  cat "$out"/r_${scheme}_*.txt | sed '/^$/d' | sort | uniq > "$out/server_$scheme.txt"
  sort "$out/cli_$scheme.txt" > "$out/cli_sorted_$scheme.txt"
  if diff "$out/cli_sorted_$scheme.txt" "$out/server_$scheme.txt" > "$out/diff_$scheme.txt"; then
    echo "$scheme: server texts == oasr transcribe texts ($(wc -l < "$out/server_$scheme.txt") files)" | tee -a "$out/summary.txt"
  else
    echo "$scheme: DIFFERENT (see diff_$scheme.txt)" | tee -a "$out/summary.txt"
  fi
  # The WebSocket path on the same device: each prompt streamed in uneven
  # pieces must give `oasr transcribe --chunk-size 16`'s text.
  : > "$out/cli_chunked_$scheme.txt"
  for f in "${files[@]}"; do
    "$bin/oasr" transcribe --ckpt-dir "$model" "${flags[@]}" --chunk-size 16 "$f" \
      >> "$out/cli_chunked_$scheme.txt"
  done
  "${PYTHON:-python3}" bench/stream_client.py --url "ws://127.0.0.1:$port/v1/audio/stream" \
    --chunk-size 16 "${files[@]}" > "$out/stream_$scheme.txt" 2>> "$out/summary.txt"
  if diff <(cut -f1,2 "$out/stream_$scheme.txt" | sort) <(sort "$out/cli_chunked_$scheme.txt") \
    > "$out/stream_diff_$scheme.txt"; then
    echo "$scheme: WebSocket streams == oasr transcribe --chunk-size 16 ($(wc -l < "$out/stream_$scheme.txt") files)" | tee -a "$out/summary.txt"
  else
    echo "$scheme: WebSocket streams DIFFER (see stream_diff_$scheme.txt)" | tee -a "$out/summary.txt"
  fi
  curl -s "$url/metrics" > "$out/metrics_$scheme.txt"
  grep -E "^oasr_batch_size_(count|sum)|^oasr_device_memory|^oasr_rtfx|^oasr_requests_total" "$out/metrics_$scheme.txt" | tee -a "$out/summary.txt"
  curl -s "$url/v1/quantization" | head -c 300 >> "$out/summary.txt"; echo >> "$out/summary.txt"
  kill -TERM "$pid"
  wait "$pid"
  echo "$scheme: server exit $? after SIGTERM" | tee -a "$out/summary.txt"
  rm -f "$out"/r_${scheme}_*.txt
done

# Load: a warm-up round and two timed rounds of CLIENTS concurrent clients x
# REQUESTS requests on int8_w8a8, with dynamic batching (--max-batch-size 32)
# and without (1), in the same run.
"${PYTHON:-python3}" bench/server_load.py --server "$bin/oasr-server" --ckpt-dir "$model" \
  --clients "${CLIENTS:-256}" --requests "${REQUESTS:-2}" --rounds 2 --max-batch-size 32 \
  --compare-unbatched --rss-bound-mib 128 --log-dir "$out/load" \
  --server-args "--device ${DEVICE:-cuda} --dtype ${DTYPE:-float16} --quantization int8_w8a8" \
  "${files[@]}" 2>&1 | tee "$out/load.jsonl"

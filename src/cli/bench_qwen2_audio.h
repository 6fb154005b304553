// `oasr bench qwen2-audio`: end-to-end transcription time of a Qwen2-Audio
// model on the first N utterances of a manifest (model loaded and audio
// decoded before timing; iteration-level batching at --max-batch-size),
// with the generated tokens per second, against transformers'
// Qwen2AudioForConditionalGeneration on the same directory and audio
// (bench/qwen2_audio_torch_bench.py as a subprocess: SDPA eager, and
// static-cache generation under torch.compile) in the same run. JSON lines
// on stdout; the peer's lines carry its tokens agreement with oasr's.
#pragma once

#include <CLI/CLI.hpp>

namespace oasr::cli {

void add_bench_qwen2_audio_command(CLI::App& bench);
// Runs the benchmark when `bench qwen2-audio` was parsed; false otherwise.
bool run_bench_qwen2_audio_if_parsed();

}  // namespace oasr::cli

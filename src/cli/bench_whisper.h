// `oasr bench whisper`: end-to-end transcription time of a Whisper model on
// the first N utterances of a manifest (audio decoded before timing, model
// loaded before timing), with the WER of what it wrote, against
// faster-whisper (bench/faster_whisper_bench.py, run as a subprocess on the
// same audio files and the same CTranslate2 weights) in the same run; both
// sides are scored with oasr's one English normalizer. JSON lines on stdout.
#pragma once

#include <CLI/CLI.hpp>

namespace oasr::cli {

// Adds the `whisper` subcommand to the `bench` app.
void add_bench_whisper_command(CLI::App& bench);

// Runs the benchmark when `bench whisper` was the parsed command line and
// returns true; false (nothing run) otherwise (see run_bench_scaled_mm_if_parsed).
bool run_bench_whisper_if_parsed();

}  // namespace oasr::cli

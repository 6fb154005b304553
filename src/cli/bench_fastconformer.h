// `oasr bench fastconformer`: wall-clock time of a NeMo FastConformer CTC
// model (encoder, CTC head and log-softmax, the log-probabilities back on
// the host) on random log-mel input, one JSON line per batch size, then the
// same measurement by transformers' ParakeetForCTC loaded with the same
// .nemo weights (bench/fastconformer_torch_bench.py as a subprocess: SDPA
// eager, torch.compile, torch.compile(mode="reduce-overhead")) and one
// comparison line per batch size. Timing only: the oracle tests compare
// outputs.
#pragma once

#include <CLI/CLI.hpp>

namespace oasr::cli {

void add_bench_fastconformer_command(CLI::App& bench);
// Runs the benchmark when `bench fastconformer` was parsed; false otherwise.
bool run_bench_fastconformer_if_parsed();

}  // namespace oasr::cli

// `oasr bench scaled-mm`: kernel timing of the CUDA scaled GEMMs
// (quant/kernels/cuda/scaled_mm_cuda.h) against PyTorch's int8 / fp8 / fp16
// GEMMs (bench/torch_scaled_mm_bench.py), JSON lines on stdout.
#pragma once

#include <CLI/CLI.hpp>

namespace oasr::cli {

// Adds the `scaled-mm` subcommand to the `bench` app.
void add_bench_scaled_mm_command(CLI::App& bench);

// Runs the benchmark when `bench scaled-mm` was the parsed command line and
// returns true; false (nothing run) otherwise. Call it from the bench
// command's action, after parsing, so an oasr::Error reaches main's handler
// (a CLI11 callback would throw from inside app.parse()).
bool run_bench_scaled_mm_if_parsed();

}  // namespace oasr::cli

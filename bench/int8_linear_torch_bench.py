"""PyTorch baseline for bench/int8_gemm_bench.cc: times PyTorch's dynamic int8
Linear (torch.ao.quantization.quantize_dynamic on nn.Linear, the quantization
WeNet's own export applies; on Debian's torch 1.13 the engine is oneDNN, as
fbgemm is not built in) on fp32 input [M, K] -> fp32 [M, N].

It is a coprocess, so that the C++ bench can interleave its own measurements
with PyTorch's in one run on a shared machine: each stdin line
    K N M THREADS ITERS
is answered with one JSON line {"seconds": [ITERS per-call wall times],
"cpu_seconds": [the same calls' process CPU times, all threads]}.
The quantized module for a shape is built once and reused; two warm-up calls
precede each timed batch. EOF ends the process.
"""

import argparse
import json
import sys
import time

import torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    modules = {}
    inputs = {}
    print(json.dumps({"ready": True, "torch": torch.__version__,
                      "engine": torch.backends.quantized.engine}), flush=True)
    with torch.inference_mode():
        for line in sys.stdin:
            fields = line.split()
            if not fields:
                continue
            k, n, m, threads, iters = (int(value) for value in fields)
            torch.set_num_threads(threads)
            if (k, n) not in modules:
                linear = torch.nn.Sequential(torch.nn.Linear(k, n))
                modules[(k, n)] = torch.ao.quantization.quantize_dynamic(
                    linear, {torch.nn.Linear}, dtype=torch.qint8)
            if (m, k) not in inputs:
                inputs[(m, k)] = torch.randn(m, k)
            module, x = modules[(k, n)], inputs[(m, k)]
            for _ in range(2):
                module(x)
            seconds, cpu_seconds = [], []
            for _ in range(iters):
                cpu_start = time.process_time()
                start = time.perf_counter()
                module(x)
                seconds.append(time.perf_counter() - start)
                cpu_seconds.append(time.process_time() - cpu_start)
            print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""PyTorch baseline for `oasr bench scaled-mm --device cpu`: the layers a
PyTorch user has for the same linear on the CPU, each timed with
time.perf_counter around one call (median over --iters after --warmup), one
JSON line each:

  torch_dynamic_int8_onednn   torch.ao.quantization.quantize_dynamic's int8
                              Linear (per-tensor dynamic activation scale,
                              int8 weight) on the oneDNN engine
  torch_dynamic_int8_qnnpack  the same on QNNPACK (skipped where absent)
  torch_fp32_linear           F.linear in float32 (the unquantized layer)

Each is the whole layer: float32 input in, float32 output out, as oasr's
"linear" time (per-token quantize + GEMM). Shapes are M,N,K: x [M, K],
W [N, K]. GOPS = 2 M N K / time. --threads sets torch.set_num_threads.
"""

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def parse_shapes(text):
    return [tuple(int(v) for v in part.split(",")) for part in text.split(";") if part]


def time_us(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def emit(impl, m, n, k, threads, median_us=None, skipped=None):
    line = {"bench": "scaled_mm", "device": "cpu", "impl": impl, "m": m, "n": n, "k": k,
            "threads": threads, "torch": torch.__version__}
    if skipped is not None:
        line["skipped"] = skipped
    else:
        line["median_us"] = round(median_us, 3)
        line["gops"] = round(2.0 * m * n * k / (median_us * 1e3), 3)
    print(json.dumps(line), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", required=True)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    torch.manual_seed(0)
    engines = torch.backends.quantized.supported_engines
    for m, n, k in parse_shapes(args.shapes):
        x = torch.randn(m, k)
        linear = torch.nn.Linear(k, n)
        with torch.no_grad():
            for engine, impl in (("onednn", "torch_dynamic_int8_onednn"),
                                 ("qnnpack", "torch_dynamic_int8_qnnpack")):
                if engine not in engines:
                    emit(impl, m, n, k, threads, skipped=f"engine {engine} not in {engines}")
                    continue
                torch.backends.quantized.engine = engine
                model = torch.ao.quantization.quantize_dynamic(
                    torch.nn.Sequential(linear), {torch.nn.Linear}, dtype=torch.qint8)
                emit(impl, m, n, k, threads, time_us(lambda: model(x), args.iters, args.warmup))
            weight, bias = linear.weight, linear.bias
            emit("torch_fp32_linear", m, n, k, threads,
                 time_us(lambda: F.linear(x, weight, bias), args.iters, args.warmup))


if __name__ == "__main__":
    main()

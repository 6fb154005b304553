#!/usr/bin/env python3
"""PyTorch baseline for `oasr bench scaled-mm`: the GEMMs a PyTorch user has
for the same quantized linear layer, timed per launch sequence with CUDA
events (median over --iters after --warmup), one JSON line each:

  torch_int_mm_dequant  torch._int_mm (int8 x int8 -> int32) followed by a
                        separate dequant in PyTorch: (acc * a_scale * w_scale
                        + bias) -> float16 (what oasr fuses into its epilogue)
  torch_scaled_mm       torch._scaled_mm, fp8 e4m3 with row-wise scales,
                        float16 output and bias (sm_89+)
  torch_fp16_linear     F.linear in float16 with bias (the unquantized layer)

--act swish|relu applies the activation after each (F.silu / F.relu, a
separate kernel in eager PyTorch, as oasr's epilogue applies it in place).

Shapes are M,N,K: A [M, K], W [N, K], out [M, N]. TOPS = 2 M N K / time.
"""

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def parse_shapes(text):
    shapes = []
    for part in text.split(";"):
        if part:
            m, n, k = (int(v) for v in part.split(","))
            shapes.append((m, n, k))
    return shapes


def time_us(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def emit(impl, fmt, m, n, k, median_us=None, skipped=None):
    line = {"bench": "scaled_mm", "impl": impl, "format": fmt, "m": m, "n": n, "k": k}
    if skipped is not None:
        line["skipped"] = skipped
    else:
        line["median_us"] = round(median_us, 3)
        line["tops"] = round(2.0 * m * n * k / (median_us * 1e-6) / 1e12, 3)
    print(json.dumps(line), flush=True)


ACTIVATIONS = {"none": lambda y: y, "swish": F.silu, "relu": F.relu}


def bench_int8(m, n, k, device, args):
    a = torch.randint(-127, 128, (m, k), dtype=torch.int8, device=device)
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device=device)
    a_scale = torch.rand(m, 1, device=device) * 1e-2
    w_scale = torch.rand(1, n, device=device) * 1e-2
    bias = torch.rand(n, device=device)
    w_t = w.t()  # [K, N] column-major view: what _int_mm wants for B

    def run():
        acc = torch._int_mm(a, w_t)
        return ACTIVATIONS[args.act](acc.float() * a_scale * w_scale + bias).half()

    try:
        emit("torch_int_mm_dequant", "int8", m, n, k, time_us(run, args.iters, args.warmup))
    except RuntimeError as error:  # e.g. shapes _int_mm refuses
        emit("torch_int_mm_dequant", "int8", m, n, k, skipped=str(error).splitlines()[0])


def bench_fp8(m, n, k, device, args):
    if torch.cuda.get_device_capability(device) < (8, 9) or not hasattr(torch, "float8_e4m3fn"):
        emit("torch_scaled_mm", "fp8", m, n, k, skipped="needs sm_89+ and torch.float8_e4m3fn")
        return
    a = (torch.randn(m, k, device=device) * 4).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device=device) * 4).to(torch.float8_e4m3fn)
    a_scale = torch.rand(m, 1, device=device) * 1e-2
    w_scale = torch.rand(1, n, device=device) * 1e-2
    bias = torch.rand(n, device=device).half()
    w_t = w.t()

    def run():
        return ACTIVATIONS[args.act](
            torch._scaled_mm(a, w_t, scale_a=a_scale, scale_b=w_scale, bias=bias,
                             out_dtype=torch.float16))

    try:
        emit("torch_scaled_mm", "fp8", m, n, k, time_us(run, args.iters, args.warmup))
    except RuntimeError as error:
        emit("torch_scaled_mm", "fp8", m, n, k, skipped=str(error).splitlines()[0])


def bench_fp16(m, n, k, device, args):
    x = torch.randn(m, k, device=device, dtype=torch.float16)
    w = torch.randn(n, k, device=device, dtype=torch.float16)
    bias = torch.randn(n, device=device, dtype=torch.float16)
    emit("torch_fp16_linear", "fp16", m, n, k,
         time_us(lambda: ACTIVATIONS[args.act](F.linear(x, w, bias)), args.iters, args.warmup))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", required=True, help="M,N,K;M,N,K;...")
    parser.add_argument("--format", default="all", choices=["int8", "fp8", "all"])
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--act", default="none", choices=sorted(ACTIVATIONS))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("torch_scaled_mm_bench: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    device = torch.device(args.device)
    torch.manual_seed(0)
    for m, n, k in parse_shapes(args.shapes):
        if args.format in ("int8", "all"):
            bench_int8(m, n, k, device, args)
        if args.format in ("fp8", "all"):
            bench_fp8(m, n, k, device, args)
        bench_fp16(m, n, k, device, args)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

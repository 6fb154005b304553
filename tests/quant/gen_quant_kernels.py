#!/usr/bin/env python3
"""Independent oracle for the 8-bit numerics (DESIGN.md §3), written from the
definition in PyTorch / NumPy float32, not from oasr's C++.

Writes OUT/cases.safetensors with tensors "<group>/<case>/<role>":
  token/<case>/{x, smooth_inv?, q, scale}      per-token dynamic int8 quantize
  static/<case>/{x, input_scale, smooth_inv?, q} static int8 quantize
  gemm/<case>/{a, a_scale, w, w_scale, bias?, out}  int8 scaled GEMM + epilogue
  e4m3_token/<case>/{x, q, scale}              per-token float8_e4m3fn quantize (bits as uint8)
  e4m3_gemm/<case>/{a, a_scale, w, w_scale, bias?, out}  e4m3 GEMM, fp32 sum in K order
  linear/<case>/{x, weight, bias?, weight_q, weight_scale, y}  a whole quantized Linear
  conv2d/<case>/{x, weight, bias?, input_scale, weight_q, weight_scale, y}  quantized Conv2d
Metadata "cases" (JSON): per group, case -> params (activation, stride, padding, scheme).
"""

import argparse
import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

Q_INT8 = 127.0
Q_E4M3 = 448.0
AMAX_FLOOR = 1e-8

ACT = {
    "none": lambda t: t,
    "relu": F.relu,
    "swish": F.silu,
    "gelu": lambda t: F.gelu(t, approximate="none"),
}


def f32(value):
    return torch.tensor(value, dtype=torch.float32)


# ---- int8, as DESIGN.md §3 writes it, every step a float32 op -----------------


def quantize_token_int8(x, smooth_inv=None):
    xs = x * smooth_inv if smooth_inv is not None else x
    amax = xs.abs().amax(dim=-1).clamp(min=AMAX_FLOOR)
    m = f32(Q_INT8) / amax
    q = torch.clamp(torch.round(xs * m[:, None]), -Q_INT8, Q_INT8).to(torch.int8)
    scale = amax / f32(Q_INT8)
    return q, scale


def static_multiplier(input_scale, k, smooth_inv=None):
    inv = f32(1.0) / input_scale  # [1]
    smooth = smooth_inv if smooth_inv is not None else torch.ones(k, dtype=torch.float32)
    return smooth * inv


def quantize_static_int8(x, multiplier):
    return torch.clamp(torch.round(x * multiplier[None, :]), -Q_INT8, Q_INT8).to(torch.int8)


def int8_gemm(a, a_scale, w, w_scale, bias, act):
    # Exact integer products and sums (int64), then one conversion to float32.
    acc = (a.to(torch.int64) @ w.to(torch.int64).T).to(torch.float32)
    t = w_scale[None, :] * acc
    t = a_scale[:, None] * t
    if bias is not None:
        t = t + bias[None, :]
    return ACT[act](t)


# ---- float8_e4m3fn from its definition (torch 1.13 has no float8 dtype) --------


def e4m3_table():
    values = []
    for code in range(0x7F):  # 0x7f is NaN
        exponent, mantissa = code >> 3, code & 7
        if exponent == 0:
            values.append(mantissa * 2.0**-9)
        else:
            values.append((1 + mantissa / 8.0) * 2.0 ** (exponent - 7))
    return np.array(values, dtype=np.float64)


E4M3_VALUES = e4m3_table()


def to_e4m3_bits(x):
    """Round to nearest e4m3, ties to the even code; saturate to ±448."""
    x = np.asarray(x, dtype=np.float32)
    magnitude = np.abs(x).astype(np.float64)
    out = np.zeros(x.shape, dtype=np.uint8)
    flat_m, flat_o = magnitude.reshape(-1), out.reshape(-1)
    for i, v in enumerate(flat_m):
        if v >= 448.0:
            code = 0x7E
        else:
            hi = int(np.searchsorted(E4M3_VALUES, v))  # first value >= v
            lo = max(hi - 1, 0)
            d_lo, d_hi = v - E4M3_VALUES[lo], E4M3_VALUES[hi] - v
            if d_lo < d_hi:
                code = lo
            elif d_hi < d_lo:
                code = hi
            else:
                code = lo if lo % 2 == 0 else hi
        flat_o[i] = code
    out |= np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    return out


def e4m3_bits_to_f32(bits):
    bits = np.asarray(bits, dtype=np.uint8)
    values = E4M3_VALUES[bits & 0x7F].astype(np.float32)
    return np.where(bits & 0x80, -values, values).astype(np.float32)


def quantize_token_e4m3(x):
    x = x.numpy()
    amax = np.maximum(np.abs(x).max(axis=-1), np.float32(AMAX_FLOOR)).astype(np.float32)
    m = (np.float32(Q_E4M3) / amax).astype(np.float32)
    q = to_e4m3_bits((x * m[:, None]).astype(np.float32))
    scale = (amax / np.float32(Q_E4M3)).astype(np.float32)
    return torch.from_numpy(q), torch.from_numpy(scale)


def e4m3_gemm(a_bits, a_scale, w_bits, w_scale, bias, act):
    a = e4m3_bits_to_f32(a_bits.numpy())
    w = e4m3_bits_to_f32(w_bits.numpy())
    acc = np.zeros((a.shape[0], w.shape[0]), dtype=np.float32)
    for j in range(a.shape[1]):  # K order; each e4m3 product is exact in float32
        acc = (acc + (a[:, j, None] * w[None, :, j]).astype(np.float32)).astype(np.float32)
    t = torch.from_numpy(acc)
    t = w_scale[None, :] * t
    t = a_scale[:, None] * t
    if bias is not None:
        t = t + bias[None, :]
    return ACT[act](t)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gen = torch.Generator().manual_seed(20240611)
    tensors, meta = {}, {}

    def put(group, case, params=None, **roles):
        meta.setdefault(group, {})[case] = params or {}
        for role, value in roles.items():
            if value is not None:
                tensors[f"{group}/{case}/{role}"] = value.contiguous()

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float32) * scale

    def rand_int8(*shape):
        return torch.randint(-127, 128, shape, generator=gen, dtype=torch.int8)

    # per-token int8
    token_cases = {
        "small": (randn(5, 48), None),
        "wide_range": (randn(7, 64) * torch.logspace(-4, 3, 64), None),
        "smoothed": (randn(9, 32, scale=3.0), randn(32).abs() + 0.1),
        "zero_row_and_single_peak": (torch.cat([torch.zeros(1, 32), randn(2, 32)]), None),
        # Values landing exactly on .5 steps after scaling (ties to even).
        "ties": (torch.tensor([[127.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5] * 2]), None),
        "long_k": (randn(3, 2048), None),
    }
    token_cases["zero_row_and_single_peak"][0][1, 3] = 1e6
    for case, (x, smooth) in token_cases.items():
        q, scale = quantize_token_int8(x, smooth)
        put("token", case, x=x, smooth_inv=smooth, q=q, scale=scale)

    # static int8
    for case, (x, input_scale, smooth) in {
        "plain": (randn(6, 32, scale=2.0), f32([0.013]), None),
        "clipping": (randn(4, 48, scale=10.0), f32([0.02]), None),
        "smoothed": (randn(5, 16), f32([0.007]), randn(16).abs() + 0.5),
    }.items():
        q = quantize_static_int8(x, static_multiplier(input_scale, x.shape[1], smooth))
        put("static", case, x=x, input_scale=input_scale, smooth_inv=smooth, q=q)

    # int8 scaled GEMM
    gemm_cases = {
        "tiny": (1, 16, 8, True, "none"),
        "odd_rows": (7, 48, 24, True, "relu"),
        "no_bias": (33, 64, 40, False, "none"),
        "swish": (5, 32, 16, True, "swish"),
        "gelu": (4, 32, 16, True, "gelu"),
    }
    for case, (m, k, n, has_bias, act) in gemm_cases.items():
        a, w = rand_int8(m, k), rand_int8(n, k)
        a_scale = randn(m).abs() * 0.01 + 1e-4
        w_scale = randn(n).abs() * 0.01 + 1e-4
        bias = randn(n) if has_bias else None
        out = int8_gemm(a, a_scale, w, w_scale, bias, act)
        put("gemm", case, {"activation": act}, a=a, a_scale=a_scale, w=w, w_scale=w_scale,
            bias=bias, out=out)
    # The largest accumulators: every product +-127*127 over a long K.
    m, k, n = 3, 16384, 8
    a = torch.full((m, k), 127, dtype=torch.int8)
    a[1] = -127
    w = torch.full((n, k), 127, dtype=torch.int8)
    w[1::2] = -127
    a_scale, w_scale = randn(m).abs() + 0.5, randn(n).abs() + 0.5
    bias = randn(n)
    put("gemm", "extreme_long_k", {"activation": "none"}, a=a, a_scale=a_scale, w=w,
        w_scale=w_scale, bias=bias, out=int8_gemm(a, a_scale, w, w_scale, bias, "none"))

    # e4m3
    for case, x in {
        "small": randn(4, 32),
        "wide_range": randn(5, 48) * torch.logspace(-6, 2, 48),
    }.items():
        q, scale = quantize_token_e4m3(x)
        put("e4m3_token", case, x=x, q=q, scale=scale)
    for case, (m, k, n, has_bias, act) in {
        "plain": (5, 32, 16, True, "none"),
        "relu_no_bias": (3, 64, 8, False, "relu"),
    }.items():
        a_bits, a_scale = quantize_token_e4m3(randn(m, k))
        w_bits, w_scale = quantize_token_e4m3(randn(n, k, scale=0.1))
        bias = randn(n) if has_bias else None
        out = e4m3_gemm(a_bits, a_scale, w_bits, w_scale, bias, act)
        put("e4m3_gemm", case, {"activation": act}, a=a_bits, a_scale=a_scale, w=w_bits,
            w_scale=w_scale, bias=bias, out=out)

    # A whole quantized Linear (int8_w8a8): per-channel weights, per-token input.
    for case, (m, k, n, has_bias, act) in {
        "linear": (6, 64, 24, True, "none"),
        "linear_relu": (9, 32, 16, True, "relu"),
        "linear_no_bias": (4, 48, 8, False, "none"),
        "linear_swish": (5, 32, 16, True, "swish"),
    }.items():
        x, weight = randn(m, k), randn(n, k, scale=0.2)
        bias = randn(n) if has_bias else None
        weight_q, weight_scale = quantize_token_int8(weight)
        xq, x_scale = quantize_token_int8(x)
        y = int8_gemm(xq, x_scale, weight_q, weight_scale, bias, act)
        put("linear", case, {"activation": act}, x=x, weight=weight, bias=bias,
            weight_q=weight_q, weight_scale=weight_scale, y=y)

    # A quantized Conv2d (int8_w8a8_static): weights per output channel over
    # (kh, kw, cin) in KRSC order, input quantized with the static scale.
    for case, (shape, cout, kernel, stride, padding) in {
        "stride2": ((2, 16, 9, 11), 8, (3, 3), (2, 2), (0, 0)),
        "padded": ((1, 16, 6, 5), 16, (3, 2), (1, 1), (1, 1)),
    }.items():
        x = randn(*shape)
        weight = randn(cout, shape[1], *kernel, scale=0.1)
        bias = randn(cout)
        input_scale = f32([float(x.abs().max()) / 100.0])  # clips the largest inputs
        krsc = weight.permute(0, 2, 3, 1).reshape(cout, -1)
        weight_q, weight_scale = quantize_token_int8(krsc)
        xq = torch.clamp(torch.round(x * static_multiplier(input_scale, 1)[0]), -127, 127)
        wq = weight_q.reshape(cout, kernel[0], kernel[1], shape[1]).permute(0, 3, 1, 2)
        # Integer sums are exact in float64 (|sum| < 2^53).
        acc = F.conv2d(xq.double(), wq.double(), None, stride, padding).float()
        t = weight_scale[None, :, None, None] * acc
        t = input_scale * t
        y = t + bias[None, :, None, None]
        put("conv2d", case, {"stride": list(stride), "padding": list(padding),
                             "kernel": list(kernel)},
            x=x, weight=weight, bias=bias, input_scale=input_scale,
            weight_q=weight_q.reshape(cout, kernel[0], kernel[1], shape[1]),
            weight_scale=weight_scale, y=y)

    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(meta)})
    print(f"wrote {len(tensors)} tensors to {args.out}")


if __name__ == "__main__":
    main()

"""Oracle for `oasr quantize --recipe int8_w8a8_rtn|fp8_w8a8_rtn`: an
independent PyTorch re-computation of the weight rule of the numerics contract
(src/quant/numerics.h: "weights, per output channel: the per-token rule, on
the host in fp32"), from the full-precision checkpoint the u2pp_engine
generator writes (WeNet's final.pt, read with torch.load):

    amax[n]  = max(max_k |w[n, k]|, 1e-8)            fp32
    m[n]     = Q / amax[n]                            fp32 division
    q[n, k]  = clamp(round_half_even(w[n, k] * m[n]), -Q, Q)   (int8)
             = e4m3_rne_satfinite(w[n, k] * m[n])               (fp8, Q = 448)
    scale[n] = amax[n] / Q                            fp32 division

Every tensor op is a single fp32 IEEE operation in torch (CPU, no fma), in
that order. e4m3 rounding is by brute force over the table of all 127
non-negative e4m3 values (ties to the even code, saturating at 448), since
torch 1.13 has no float8 dtype.

Writes OUT/cases.safetensors with, for every weight that a GEMM layer could
hold (2-d, or 3-d [N, K, 1] for a pointwise conv) "<name>/int8" int8,
"<name>/int8_scale" f32 [N], "<name>/fp8" uint8 (e4m3 bits), "<name>/fp8_scale"
f32 [N] (int8/fp8 in the weight's own shape), and "source/<name>" for every
tensor of the checkpoint as stored. Metadata "checkpoint": the path read.
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file


def e4m3_table():
    values = []
    for code in range(0x7F):  # 0x7F is NaN
        exponent, mantissa = code >> 3, code & 7
        if exponent == 0:
            values.append(mantissa / 8.0 * 2.0 ** -6)
        else:
            values.append((1 + mantissa / 8.0) * 2.0 ** (exponent - 7))
    return torch.tensor(values, dtype=torch.float64)


E4M3 = e4m3_table()


def e4m3_bits(v):
    """Nearest e4m3 code of each float32 value (ties to even), saturating."""
    a = v.abs().double().clamp(max=448.0)
    hi = torch.searchsorted(E4M3, a).clamp(max=len(E4M3) - 1)
    lo = (hi - 1).clamp(min=0)
    d_lo = a - E4M3[lo]
    d_hi = E4M3[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = torch.where(pick_hi, hi, lo)
    sign = torch.signbit(v).to(torch.int64) << 7
    return (code | sign).to(torch.uint8)


def rtn(weight, q_max):
    w = weight.float().reshape(weight.shape[0], -1)
    amax = torch.maximum(w.abs().amax(dim=1), torch.tensor(1e-8, dtype=torch.float32))
    q = torch.tensor(q_max, dtype=torch.float32)
    m = q / amax
    scaled = w * m[:, None]
    scale = amax / q
    return scaled, scale


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", required=True, help="WeNet final.pt (full precision)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    state = torch.load(args.checkpoint, map_location="cpu")
    tensors = {}
    count = 0
    for name, tensor in state.items():
        tensors[f"source/{name}"] = tensor.contiguous()
        is_gemm_weight = name.endswith(".weight") and tensor.is_floating_point() and (
            tensor.dim() == 2 or (tensor.dim() == 3 and tensor.shape[-1] == 1))
        if not is_gemm_weight:
            continue
        scaled, scale = rtn(tensor, 127.0)
        tensors[f"{name}/int8"] = torch.round(scaled).clamp(-127, 127).to(torch.int8) \
            .reshape(tensor.shape).contiguous()
        tensors[f"{name}/int8_scale"] = scale.contiguous()
        scaled, scale = rtn(tensor, 448.0)
        tensors[f"{name}/fp8"] = e4m3_bits(scaled).reshape(tensor.shape).contiguous()
        tensors[f"{name}/fp8_scale"] = scale.contiguous()
        count += 1
    assert count > 10, f"only {count} GEMM weights in {args.checkpoint}"
    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"checkpoint": json.dumps(os.path.abspath(args.checkpoint))})


if __name__ == "__main__":
    main()

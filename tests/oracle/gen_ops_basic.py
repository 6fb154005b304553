#!/usr/bin/env python3
"""PyTorch oracle for the basic full-precision ops (src/ops: gemm, layer_norm,
rms_norm, softmax, glu, elementwise, embedding).

Writes OUT/cases.safetensors. Tensors are named "<case>/<role>"; the metadata
key "cases" holds a JSON list of {"name", "op", ...parameters} in file order.
Every expected value comes from PyTorch's own functions (F.linear,
F.layer_norm, torch.softmax, F.glu, F.embedding, +, *) and transformers'
Qwen2RMSNorm, never from oasr.
"""

import argparse
import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

CASES = []
TENSORS = {}


def f32(value):
    """A Python float holding exactly the float32 nearest `value`, so the C++
    side (which takes float) and PyTorch (which casts scalars to float32)
    multiply by the same number."""
    return float(np.float32(value))


def add_case(name, op, params, **tensors):
    CASES.append({"name": name, "op": op, **params})
    for role, tensor in tensors.items():
        if tensor.dtype == torch.bool:
            tensor = tensor.to(torch.uint8)  # oasr masks are uint8
        TENSORS[f"{name}/{role}"] = tensor.detach().contiguous().clone()


def randn(*shape, scale=1.0, offset=0.0):
    return torch.randn(shape, dtype=torch.float32) * scale + offset


# ---- gemm --------------------------------------------------------------------


def linear_cases():
    # (name, x shape, out_features, with bias). Odd K, one row, K = 0, M = 0,
    # a 3-D input and a long K; biases are nonzero so dropping one fails.
    specs = [
        ("linear_rows1_k1", (1, 1), 4, True),
        ("linear_k3", (5, 3), 7, True),
        ("linear_k17_3d", (2, 3, 17), 9, True),
        ("linear_k257", (4, 257), 33, True),
        ("linear_k2048", (3, 2048), 16, True),
        ("linear_nobias", (6, 10), 3, False),
        ("linear_m0", (0, 8), 5, True),
        ("linear_m0_3d", (2, 0, 8), 5, True),
        ("linear_k0", (3, 0), 4, True),
        ("linear_k0_nobias", (2, 0), 3, False),
    ]
    for name, x_shape, n, with_bias in specs:
        k = x_shape[-1]
        x = randn(*x_shape)
        weight = randn(n, k)
        bias = randn(n) if with_bias else None
        tensors = {"x": x, "weight": weight, "expected": F.linear(x, weight, bias)}
        if with_bias:
            tensors["bias"] = bias
        add_case(name, "linear", {}, **tensors)


def matmul_cases():
    # (name, a shape, b shape, transpose_b)
    specs = [
        ("matmul_2d", (5, 7), (7, 3), False),
        ("matmul_2d_tb", (4, 17), (6, 17), True),
        ("matmul_3d", (2, 5, 33), (2, 33, 4), False),
        ("matmul_3d_tb", (3, 4, 64), (3, 9, 64), True),
        ("matmul_4d_tb", (2, 2, 3, 8), (2, 2, 5, 8), True),
        ("matmul_k0", (2, 3, 0), (2, 0, 4), False),
        ("matmul_m0", (0, 5), (5, 3), False),
        ("matmul_1x1", (1, 1), (1, 1), False),
    ]
    for name, a_shape, b_shape, transpose_b in specs:
        a = randn(*a_shape)
        b = randn(*b_shape)
        expected = torch.matmul(a, b.transpose(-1, -2) if transpose_b else b)
        add_case(name, "matmul", {"transpose_b": transpose_b}, a=a, b=b, expected=expected)


# ---- layer norm --------------------------------------------------------------


def layer_norm_cases():
    # (name, x, affine, eps). D = 1 and D = 3 make a biased/unbiased variance
    # mix-up obvious; the offset rows (|mean| = 1e4 >> std) break a one-pass
    # E[x^2] - E[x]^2 in float32.
    specs = [
        ("ln_d1", randn(3, 1), True, 1e-5),
        ("ln_d3", randn(4, 3), True, 1e-5),
        ("ln_d17_3d", randn(2, 3, 17), True, 1e-5),
        ("ln_d256", randn(5, 256, scale=3.0), True, 1e-5),
        ("ln_d256_offset", randn(5, 256, offset=1e4), True, 1e-5),
        ("ln_d64_large", randn(3, 64, scale=1e3, offset=-5e3), True, 1e-5),
        ("ln_no_affine", randn(3, 8), False, 1e-5),
        ("ln_eps_large", randn(2, 5, scale=0.01), True, 1e-2),
        ("ln_eps_tiny", randn(2, 5), True, 1e-12),
        ("ln_rows0", randn(0, 8), True, 1e-5),
    ]
    for name, x, affine, eps in specs:
        d = x.shape[-1]
        weight = randn(d, scale=0.5, offset=1.0) if affine else None
        bias = randn(d) if affine else None
        expected = F.layer_norm(x, (d,), weight, bias, eps)
        tensors = {"x": x, "expected": expected}
        if affine:
            tensors.update(weight=weight, bias=bias)
        add_case(name, "layer_norm", {"eps": eps}, **tensors)


def add_layer_norm_cases():
    # alpha None: add_layer_norm (residual + x); else residual + alpha * x.
    specs = [
        ("add_ln_3d", (2, 5, 16), None, 1e-5),
        ("add_ln_d3", (1, 3), None, 1e-5),
        ("add_scaled_ln_half", (2, 4, 32), 0.5, 1e-5),
        ("add_scaled_ln_tenth", (3, 7), 0.1, 1e-12),
        ("add_scaled_ln_offset", (2, 128), 0.5, 1e-5),
    ]
    for name, shape, alpha, eps in specs:
        offset = 1e4 if name.endswith("offset") else 0.0
        x = randn(*shape)
        residual = randn(*shape, offset=offset)
        d = shape[-1]
        weight = randn(d, scale=0.5, offset=1.0)
        bias = randn(d)
        if alpha is None:
            total = residual + x
            params = {"eps": eps}
        else:
            alpha = f32(alpha)
            total = residual + alpha * x
            params = {"eps": eps, "alpha": alpha}
        expected = F.layer_norm(total, (d,), weight, bias, eps)
        add_case(name, "add_layer_norm", params, x=x, residual=residual, weight=weight,
                 bias=bias, expected_sum=total, expected=expected)


# ---- softmax -----------------------------------------------------------------


def softmax_cases():
    specs = [
        ("softmax_row1", randn(1, 5), -1),
        ("softmax_len1", randn(3, 1), -1),
        ("softmax_3d", randn(2, 3, 17), -1),
        ("softmax_dim1", randn(2, 7, 3), 1),
        ("softmax_dim0", randn(4, 3), 0),
        ("softmax_offset", randn(3, 33, offset=1e4), -1),
        ("softmax_neg_offset", randn(2, 9, offset=-1e4), -1),
        ("softmax_wide_spread", randn(4, 257, scale=30.0), -1),
        ("softmax_rows0", randn(0, 6), -1),
    ]
    for name, x, dim in specs:
        add_case(name, "softmax", {"dim": dim}, x=x, expected=torch.softmax(x, dim=dim))


def wenet_masked_softmax(scores, keep, dim):
    """WeNet's attention: fill masked scores with -inf, softmax, then zero the
    masked positions (which also clears the NaNs of a fully masked row)."""
    masked = ~keep
    probs = torch.softmax(scores.masked_fill(masked, float("-inf")), dim=dim)
    return probs.masked_fill(masked, 0.0)


def masked_softmax_cases():
    # Key padding over [B, H, T1, T2] with a [B, 1, 1, T2] mask; batch 1 has
    # only 4 valid keys.
    keep_pad = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    keep_pad[1, :, :, 4:] = False
    # A [B, 1, T1, T2] mask with a fully masked row (and a fully masked query
    # in the other batch) to pin down the all-zeros rule.
    keep_rows = torch.rand(2, 1, 4, 6) > 0.4
    keep_rows[0, 0, 2, :] = False
    keep_rows[1, 0, 0, :] = False
    # Causal mask [T, T] broadcast over a missing batch dimension.
    keep_causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    # Same-shape mask, one row empty.
    keep_same = torch.rand(3, 9) > 0.5
    keep_same[1, :] = False
    keep_same[0, 3] = True
    # Softmax along dim 1 with a mask broadcast over the trailing dimension.
    keep_dim1 = torch.rand(2, 5, 1) > 0.3
    keep_dim1[0, :, 0] = False
    specs = [
        ("masked_key_padding", randn(2, 3, 4, 6), keep_pad, -1),
        ("masked_rows", randn(2, 2, 4, 6), keep_rows, -1),
        ("masked_causal", randn(2, 5, 5), keep_causal, -1),
        ("masked_same_shape", randn(3, 9), keep_same, -1),
        ("masked_dim1", randn(2, 5, 3), keep_dim1, 1),
        ("masked_offset", randn(2, 1, 4, 6, offset=1e4), keep_rows, -1),
    ]
    for name, x, keep, dim in specs:
        expected = wenet_masked_softmax(x, keep, dim)
        add_case(name, "masked_softmax", {"dim": dim}, x=x, mask=keep, expected=expected)


# ---- glu, elementwise, embedding ----------------------------------------------


def glu_cases():
    specs = [
        ("glu_last", randn(3, 8), -1),
        ("glu_conformer", randn(2, 10, 7), 1),
        ("glu_dim0", randn(2, 3), 0),
        ("glu_half1", randn(5, 2), -1),
        ("glu_saturated", randn(4, 6, scale=40.0), -1),
    ]
    for name, x, dim in specs:
        add_case(name, "glu", {"dim": dim}, x=x, expected=F.glu(x, dim=dim))


def elementwise_cases():
    # (name, op, a shape, b shape, alpha). b shapes: same, a suffix, a suffix
    # with leading 1s, and scalars ([] and [1]).
    binary = [
        ("add_same", "add", (3, 4), (3, 4), None),
        ("add_suffix", "add", (2, 3, 5), (5,), None),
        ("add_suffix2", "add", (2, 3, 5), (3, 5), None),
        ("add_lead1", "add", (4, 6), (1, 6), None),
        ("add_scalar0d", "add", (3, 4), (), None),
        ("add_empty", "add", (0, 4), (4,), None),
        ("mul_same", "mul", (2, 7), (2, 7), None),
        ("mul_suffix", "mul", (3, 2, 5), (5,), None),
        ("mul_scalar1", "mul", (5,), (1,), None),
        ("add_scaled_half", "add_scaled", (3, 6), (3, 6), 0.5),
        ("add_scaled_tenth", "add_scaled", (4, 6), (4, 6), 0.1),
        ("add_scaled_tenth_suffix", "add_scaled", (8, 16, 32), (32,), 0.1),
    ]
    for name, op, a_shape, b_shape, alpha in binary:
        a = randn(*a_shape, scale=10.0)
        b = randn(*b_shape, scale=10.0)
        params = {}
        if op == "add":
            expected = a + b
        elif op == "mul":
            expected = a * b
        else:
            alpha = f32(alpha)
            expected = a + alpha * b  # two roundings, like oasr (not torch.add(alpha=), an fma)
            params["alpha"] = alpha
        add_case(name, op, params, a=a, b=b, expected=expected)
    for name, shape, factor in [("scale_tenth", (4, 5), 0.1), ("scale_neg", (7,), -3.0)]:
        factor = f32(factor)
        x = randn(*shape)
        add_case(name, "scale", {"factor": factor}, x=x, expected=x * factor)


def embedding_cases():
    specs = [
        ("embedding_i64", torch.randint(0, 11, (2, 5)), (11, 7)),
        ("embedding_i32", torch.randint(0, 4, (6,), dtype=torch.int32), (4, 3)),
        ("embedding_edges", torch.tensor([0, 9, 0, 9, 4]), (10, 2)),
        ("embedding_scalar", torch.tensor(3), (5, 4)),
        ("embedding_empty", torch.zeros(0, dtype=torch.int64), (5, 4)),
    ]
    for name, ids, table_shape in specs:
        table = randn(*table_shape)
        expected = F.embedding(ids.long(), table)
        add_case(name, "embedding", {}, ids=ids, table=table, expected=expected)


# ---- RMS norm ------------------------------------------------------------------


def rms_norm_cases():
    # transformers' Qwen2RMSNorm (the Qwen2-Audio LM's norm) is the definition.
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm
    # The offset rows (mean 1e3 >> std) tell RMS from LayerNorm at once.
    specs = [
        ("rms_d1", randn(3, 1), True, 1e-6),
        ("rms_d3", randn(4, 3), True, 1e-6),
        ("rms_d17_3d", randn(2, 3, 17), True, 1e-6),
        ("rms_d256", randn(5, 256, scale=3.0), True, 1e-6),
        ("rms_d896_offset", randn(4, 896, offset=1e3), True, 1e-6),
        ("rms_d64_large", randn(3, 64, scale=1e3), True, 1e-5),
        ("rms_no_weight", randn(3, 8), False, 1e-6),
        ("rms_eps_large", randn(2, 5, scale=0.01), True, 1e-2),
        ("rms_zero_row", torch.zeros(2, 6), True, 1e-6),
        ("rms_rows0", randn(0, 8), True, 1e-6),
    ]
    for name, x, affine, eps in specs:
        d = x.shape[-1]
        norm = Qwen2RMSNorm(d, eps=eps)
        weight = randn(d, scale=0.5, offset=1.0) if affine else torch.ones(d)
        with torch.no_grad():
            norm.weight.copy_(weight)
            expected = norm(x)
        tensors = {"x": x, "expected": expected}
        if affine:
            tensors["weight"] = weight
        add_case(name, "rms_norm", {"eps": f32(eps)}, **tensors)


# ---- rotary position embedding ----------------------------------------------------


def rotary_cases():
    # transformers' Qwen2RotaryEmbedding (rope_type "default") and
    # apply_rotary_pos_emb; oasr's layout is [B, T, heads, head_dim].
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding, apply_rotary_pos_emb
    specs = [  # name, B, T, heads, head_dim, theta, positions (None: 0..T-1 per row)
        ("rope_small", 2, 5, 3, 8, 10000.0, None),
        ("rope_qwen_head", 1, 7, 2, 128, 1000000.0, None),
        ("rope_far_positions", 2, 3, 2, 64, 10000.0,
         torch.tensor([[0, 1, 4095], [8191, 30000, 7]])),
        ("rope_decode_step", 3, 1, 4, 16, 10000.0, torch.tensor([[17], [0], [1234]])),
    ]
    for name, b, t, heads, d, theta, positions in specs:
        if positions is None:
            positions = torch.arange(t).expand(b, t).contiguous()
        rotary = Qwen2RotaryEmbedding(dim=d, base=theta)
        x = randn(b, t, heads, d, scale=2.0)
        q = x.transpose(1, 2)  # [B, heads, T, D], as the model calls it
        cos, sin = rotary(q, positions)
        q_embed, _ = apply_rotary_pos_emb(q, q, cos, sin)
        add_case(name, "rotary_embedding", {"theta": theta}, x=x, positions=positions.to(torch.int64),
                 inv_freq=rotary.inv_freq.to(torch.float32),
                 expected=q_embed.transpose(1, 2).contiguous())


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory to write cases.safetensors to")
    args = parser.parse_args()
    torch.manual_seed(20240611)
    linear_cases()
    matmul_cases()
    layer_norm_cases()
    add_layer_norm_cases()
    rms_norm_cases()
    rotary_cases()
    softmax_cases()
    masked_softmax_cases()
    glu_cases()
    elementwise_cases()
    embedding_cases()
    os.makedirs(args.out, exist_ok=True)
    save_file(TENSORS, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(CASES)})


if __name__ == "__main__":
    main()

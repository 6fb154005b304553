"""Oracle for oasr's NVFP4 format (src/quant/nvfp4.h), written from the
format's definition, not from the C++:

  * E2M1 / e4m3 rounding by brute force: the nearest entry of the table of
    every representable magnitude, ties to the even code, saturating at the
    largest (6 for E2M1, 448 for e4m3);
  * fp32 arithmetic through numpy float32 (each operation rounded to
    nearest even), in the op order nvfp4.h documents;
  * the 128x4 scale layout through torch view/permute of the padded scale
    matrix ([R/128, 4, 32, C/4, 4] -> [R/128, C/4, 32, 4, 4]), i.e. rows
    r, r+32, r+64, r+96 of a 128-row tile share one 16-byte line.

Writes OUT/cases.safetensors. Per quantization case "<case>":
  weight f32 [N, K], packed u8 [N, K/2], scale_linear u8 [N, K/16] (e4m3
  bits), scale_128x4 u8 [R, C], global_scale f32 [1], dequant f32 [N, K].
Per layout-only case "<case>": linear u8 [N, B] (random bytes), swizzled
u8 [R, C]. Metadata "quant_cases" and "layout_cases": JSON name lists.
"""
import argparse
import json
import os

import numpy as np
import torch
from safetensors.torch import save_file

E2M1_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)


def e4m3_magnitudes():
    """Every finite non-negative float8_e4m3fn value, indexed by its code."""
    values = []
    for code in range(0x7F):  # 0x7F is NaN
        exponent, mantissa = code >> 3, code & 7
        if exponent == 0:
            values.append(mantissa / 8.0 * 2.0 ** -6)
        else:
            values.append((1 + mantissa / 8.0) * 2.0 ** (exponent - 7))
    return np.array(values, dtype=np.float64)


E4M3_MAGNITUDES = e4m3_magnitudes()


def nearest_code(magnitude, table):
    """Index of the nearest table entry (ties to the even index)."""
    distance = np.abs(table.astype(np.float64) - float(magnitude))
    best = np.min(distance)
    candidates = np.nonzero(distance == best)[0]
    if len(candidates) == 1:
        return int(candidates[0])
    even = [c for c in candidates if c % 2 == 0]
    return int(even[0])


def to_e4m3_code(value):
    assert value >= 0 and np.isfinite(value)
    return nearest_code(value, E4M3_MAGNITUDES)  # beyond 448: 448 (saturates)


def to_e2m1_code(value):
    sign = 8 if np.signbit(value) else 0
    return sign | nearest_code(abs(value), E2M1_MAGNITUDES)


def quantize(weight):
    f32 = np.float32
    n, k = weight.shape
    amax = max(f32(np.max(np.abs(weight))), f32(1e-8))
    global_scale = f32(amax / f32(2688.0))
    blocks = k // 16
    scales = np.zeros((n, blocks), dtype=np.uint8)
    codes = np.zeros((n, k), dtype=np.uint8)
    dequant = np.zeros((n, k), dtype=np.float32)
    for row in range(n):
        for block in range(blocks):
            x = weight[row, block * 16:(block + 1) * 16]
            block_amax = f32(np.max(np.abs(x)))
            ratio = f32(f32(block_amax / f32(6.0)) / global_scale)
            code = to_e4m3_code(ratio)
            scales[row, block] = code
            step = f32(f32(E4M3_MAGNITUDES[code]) * global_scale)
            for i, value in enumerate(x):
                c = 0 if step == 0 else to_e2m1_code(f32(value / step))
                codes[row, block * 16 + i] = c
                magnitude = E2M1_MAGNITUDES[c & 7]
                dequant[row, block * 16 + i] = f32((-magnitude if c & 8 else magnitude) * step)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed, scales, global_scale, dequant


def swizzle(linear):
    rows, cols = linear.shape
    padded_rows = (rows + 127) // 128 * 128
    padded_cols = (cols + 3) // 4 * 4
    padded = torch.zeros((padded_rows, padded_cols), dtype=torch.uint8)
    padded[:rows, :cols] = torch.from_numpy(linear)
    tiles = padded.view(padded_rows // 128, 4, 32, padded_cols // 4, 4)
    return tiles.permute(0, 3, 2, 1, 4).reshape(padded_rows, padded_cols).contiguous()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(20240611)
    tensors = {}

    weights = {
        "small_normal": rng.standard_normal((3, 32)).astype(np.float32),
        "tile_edge_130x80": rng.standard_normal((130, 80)).astype(np.float32) * 0.02,
        "outliers_9x64": (rng.standard_normal((9, 64)) *
                          np.where(rng.random((9, 64)) < 0.05, 50.0, 1.0)).astype(np.float32),
        "wide_range_5x48": (rng.standard_normal((5, 48)) *
                            10.0 ** rng.integers(-6, 3, (5, 48))).astype(np.float32),
    }
    zero_rows = rng.standard_normal((4, 32)).astype(np.float32)
    zero_rows[1, :] = 0.0  # an all-zero row: every block scale 0
    zero_rows[2, 16:] = -0.0
    weights["zero_blocks_4x32"] = zero_rows
    # Blocks far below the tensor's largest: subnormal and zero e4m3 scales.
    block_gain = np.repeat(np.array([1.0, 3e-5, 1e-5, 1e-7], dtype=np.float32), 16)
    weights["tiny_blocks_2x64"] = (rng.standard_normal((2, 64)) * block_gain).astype(np.float32)
    # Every E2M1 magnitude and every rounding midpoint, both signs, in one
    # block whose largest value is 6 (so the block step is about 1).
    grid = np.array([0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 6],
                    dtype=np.float32)
    weights["grid_2x32"] = np.stack([np.concatenate([grid, -grid]), np.concatenate([-grid, grid])])

    quant_cases = []
    for name, weight in weights.items():
        packed, scales, global_scale, dequant = quantize(weight)
        tensors[f"{name}/weight"] = torch.from_numpy(weight.copy())
        tensors[f"{name}/packed"] = torch.from_numpy(packed)
        tensors[f"{name}/scale_linear"] = torch.from_numpy(scales)
        tensors[f"{name}/scale_128x4"] = swizzle(scales)
        tensors[f"{name}/global_scale"] = torch.tensor([global_scale], dtype=torch.float32)
        tensors[f"{name}/dequant"] = torch.from_numpy(dequant)
        quant_cases.append(name)

    layout_cases = []
    for rows, cols in [(1, 1), (5, 3), (32, 4), (127, 5), (128, 4), (129, 8), (300, 7), (256, 12)]:
        name = f"layout_{rows}x{cols}"
        linear = rng.integers(1, 256, (rows, cols), dtype=np.uint8)  # non-zero: padding shows
        tensors[f"{name}/linear"] = torch.from_numpy(linear)
        tensors[f"{name}/swizzled"] = swizzle(linear)
        layout_cases.append(name)

    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"quant_cases": json.dumps(quant_cases),
                        "layout_cases": json.dumps(layout_cases)})


if __name__ == "__main__":
    main()

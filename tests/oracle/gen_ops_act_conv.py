#!/usr/bin/env python3
"""PyTorch oracle for ops/activation, ops/conv2d and ops/depthwise_conv1d.

Writes OUT/cases.safetensors:
  act/x                   float32 inputs: random values at several scales, a
                          dense grid over [-20, 20], large magnitudes, the
                          under/overflow edges of exp, ±inf, NaN, ±0
  act/<name>              PyTorch's float32 result for each activation name
                          (relu, swish, gelu, gelu_tanh, sigmoid, tanh)
  conv2d/<case>/{x, weight, bias?, expected}
  dwconv1d/<case>/{x, weight, bias?, expected}
Metadata "cases" (JSON): the activation names and each conv case's options.
"""

import argparse
import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

ACTIVATIONS = {
    "relu": F.relu,
    "swish": F.silu,
    "gelu": lambda x: F.gelu(x, approximate="none"),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}

# name: (x shape [N, Cin, H, W], Cout, (KH, KW), (stride_h, stride_w), (pad_h, pad_w), bias)
CONV2D_CASES = {
    # WeNet Conv2dSubsampling4: 1 -> C, 3x3 stride 2, then C -> C, 3x3 stride 2.
    "subsampling_first": ((2, 1, 37, 80), 8, (3, 3), (2, 2), (0, 0), True),
    "subsampling_second": ((2, 8, 18, 39), 8, (3, 3), (2, 2), (0, 0), True),
    # Conv2dSubsampling6's second conv: 5x5 stride 3.
    "kernel5_stride3": ((1, 8, 19, 39), 8, (5, 5), (3, 3), (0, 0), True),
    "odd_sizes_padding": ((1, 3, 11, 7), 5, (3, 5), (1, 2), (1, 2), True),
    "no_bias_padding": ((1, 4, 40, 23), 6, (5, 3), (2, 1), (2, 1), False),
    "pointwise": ((2, 6, 5, 9), 4, (1, 1), (1, 1), (0, 0), True),
    "pointwise_stride_padding": ((2, 6, 5, 9), 4, (1, 1), (2, 2), (1, 1), True),
    "kernel_equals_input": ((3, 2, 3, 4), 5, (3, 4), (1, 1), (0, 0), True),
    # K = 64*3*3 = 576 and 398 output rows of width 40: the im2col buffer
    # (4M floats) holds 182 rows, so this runs in three bands.
    "several_bands": ((1, 64, 400, 42), 4, (3, 3), (1, 1), (0, 0), True),
}

# name: (B, C, T, K, pad_left, pad_right, bias)
DWCONV1D_CASES = {
    "causal_k15": (2, 16, 50, 15, 14, 0, True),
    "symmetric_k15": (2, 16, 50, 15, 7, 7, True),
    "asymmetric_k15": (1, 8, 33, 15, 3, 9, True),
    "pointwise_k1": (2, 5, 17, 1, 0, 0, True),
    "single_step_causal": (1, 16, 1, 15, 14, 0, True),
    "single_step_symmetric": (1, 4, 1, 15, 7, 7, False),
    "no_bias_k7": (3, 6, 20, 7, 3, 3, False),
    "padding_wider_than_kernel": (1, 3, 6, 5, 8, 2, True),
    "no_padding": (2, 4, 30, 5, 0, 0, True),
}


def uniform(shape, bound, generator):
    return (torch.rand(shape, generator=generator) * 2.0 - 1.0) * bound


def activation_inputs(generator):
    inf, nan = math.inf, math.nan
    special = torch.tensor(
        [inf, -inf, nan, 0.0, -0.0, 1e-30, -1e-30, 1e-40, -1e-40, 1e30, -1e30, 3e38, -3e38,
         88.5, 88.72, 89.0, -87.0, -88.5, -89.0, -100.0, -104.0, -110.0, 9.0, 9.5, -9.5, 10.0,
         0.625, -0.625, 1.0, -1.0, 1.4142135, -1.4142135, 3.92, -3.92, 5.54, -5.54, 20.0, -20.0],
        dtype=torch.float32)
    return torch.cat([
        special,
        torch.linspace(-20.0, 20.0, 40001),
        torch.randn(8192, generator=generator),
        torch.randn(4096, generator=generator) * 10.0,
        uniform((2048,), 120.0, generator),
        torch.randn(1024, generator=generator) * 1e-3,
    ]).contiguous()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(20240611)

    tensors = {}
    meta = {"activations": list(ACTIVATIONS), "conv2d": {}, "dwconv1d": {}}

    x = activation_inputs(generator)
    tensors["act/x"] = x
    for name, fn in ACTIVATIONS.items():
        tensors[f"act/{name}"] = fn(x).contiguous()

    for name, (x_shape, out_channels, kernel, stride, padding, has_bias) in CONV2D_CASES.items():
        in_channels = x_shape[1]
        fan_in = in_channels * kernel[0] * kernel[1]
        bound = 1.0 / math.sqrt(fan_in)  # nn.Conv2d's default initialisation range
        xs = torch.randn(x_shape, generator=generator)
        weight = uniform((out_channels, in_channels) + kernel, bound, generator)
        bias = uniform((out_channels,), bound, generator) if has_bias else None
        expected = F.conv2d(xs, weight, bias, stride=stride, padding=padding)
        prefix = f"conv2d/{name}"
        tensors[f"{prefix}/x"] = xs
        tensors[f"{prefix}/weight"] = weight
        if has_bias:
            tensors[f"{prefix}/bias"] = bias
        tensors[f"{prefix}/expected"] = expected.contiguous()
        meta["conv2d"][name] = {"stride": list(stride), "padding": list(padding),
                                "fan_in": fan_in}

    for name, (batch, channels, length, kernel, left, right, has_bias) in DWCONV1D_CASES.items():
        bound = 1.0 / math.sqrt(kernel)
        xs = torch.randn((batch, channels, length), generator=generator)
        weight = uniform((channels, 1, kernel), bound, generator)
        bias = uniform((channels,), bound, generator) if has_bias else None
        expected = F.conv1d(F.pad(xs, (left, right)), weight, bias, groups=channels)
        prefix = f"dwconv1d/{name}"
        tensors[f"{prefix}/x"] = xs
        tensors[f"{prefix}/weight"] = weight
        if has_bias:
            tensors[f"{prefix}/bias"] = bias
        tensors[f"{prefix}/expected"] = expected.contiguous()
        meta["dwconv1d"][name] = {"pad_left": left, "pad_right": right, "fan_in": kernel}

    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(meta)})


if __name__ == "__main__":
    main()

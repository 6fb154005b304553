#!/usr/bin/env python3
"""Interoperability oracle for oasr's safetensors reader and writer.

Generate (--out DIR): writes files with the PyPI `safetensors` library
(safetensors.torch.save_file) and, independently of that format, the values
they hold in DIR/expected.json:
  DIR/cases.safetensors            several dtypes, special values, metadata
  DIR/sharded/model-0000{1,2}-of-00002.safetensors + model.safetensors.index.json
  DIR/expected.json                {"files": {relative path: {"metadata": {...},
                                    "tensors": {name: {"dtype", "shape", "bits", "values"}}}}}
"bits" are the raw elements as unsigned integers of the element's width, so
the C++ test can compare bytes exactly without trusting any conversion;
"values" are the numbers (null where JSON has no spelling: NaN, infinities).

Check (--check FILE --expected JSON): loads FILE, written by oasr's writer,
with safetensors.torch.load_file and compares it with JSON, which the C++ test
wrote from its own definition of the values. Prints "interop check: ok" and
exits 0 on agreement, else prints the differences and exits 1.
"""
import argparse
import json
import math
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

SAFETENSORS_NAME = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.int32: "I32",
    torch.int64: "I64",
}
DTYPE_OF_NAME = {name: dtype for dtype, name in SAFETENSORS_NAME.items()}
# The same-width integer type used to read an element's raw bits.
BITS_VIEW = {
    torch.float32: (torch.int32, 32),
    torch.float16: (torch.int16, 16),
    torch.bfloat16: (torch.int16, 16),
    torch.int8: (torch.int8, 8),
    torch.uint8: (torch.uint8, 8),
    torch.int32: (torch.int32, 32),
    torch.int64: (torch.int64, 64),
}


def describe(tensor):
    view_dtype, width = BITS_VIEW[tensor.dtype]
    flat = tensor.contiguous().reshape(-1)
    bits = [b & ((1 << width) - 1) for b in flat.view(view_dtype).tolist()]
    if tensor.dtype.is_floating_point:
        values = [v if math.isfinite(v) else None for v in flat.float().tolist()]
    else:
        values = flat.tolist()
    return {
        "dtype": SAFETENSORS_NAME[tensor.dtype],
        "shape": list(tensor.shape),
        "bits": bits,
        "values": values,
    }


def interop_cases():
    gen = torch.Generator().manual_seed(20240611)
    inf, nan = float("inf"), float("nan")
    return {
        "encoder.embed.weight": torch.randn(4, 6, generator=gen),
        "encoder.special": torch.tensor([0.0, -0.0, inf, -inf, nan, 1e-45, 3.4028234e38]),
        "encoder.layers.0.attn.q.weight": torch.randn(3, 5, generator=gen).to(torch.float16),
        "encoder.half_extremes": torch.tensor([65504.0, -65504.0, 6e-8, 0.5], dtype=torch.float16),
        "encoder.layers.0.ffn.w1.weight": torch.randn(2, 3, 2, generator=gen).to(torch.bfloat16),
        "encoder.bf16_extremes": torch.tensor([3.3895e38, -1.0e-38, 1.0], dtype=torch.bfloat16),
        "decoder.tokens": torch.tensor(
            [-(2**63), 2**63 - 1, 0, -1, 2**53 + 1], dtype=torch.int64),
        "decoder.step": torch.tensor(7, dtype=torch.int64),  # 0-d
        "quant.weight": torch.randint(-128, 128, (5, 4), generator=gen, dtype=torch.int8),
        "quant.zero_point": torch.arange(0, 256, 17, dtype=torch.uint8),
        "quant.counts": torch.tensor([[2**31 - 1, -(2**31)], [5, -5]], dtype=torch.int32),
        "empty.rows": torch.zeros(0, 3),
    }


def generate(out):
    os.makedirs(os.path.join(out, "sharded"), exist_ok=True)
    expected = {"files": {}}

    cases = interop_cases()
    metadata = {"format": "pt", "producer": "gen_safetensors_interop", "note": "\u00e9t\u00e9"}
    save_file(cases, os.path.join(out, "cases.safetensors"), metadata=metadata)
    expected["files"]["cases.safetensors"] = {
        "metadata": metadata,
        "tensors": {name: describe(t) for name, t in cases.items()},
    }

    gen = torch.Generator().manual_seed(7)
    shards = {
        "model-00001-of-00002.safetensors": {
            "encoder.layers.0.norm.weight": torch.rand(8, generator=gen),
            "encoder.layers.0.norm.bias": torch.rand(8, generator=gen).to(torch.bfloat16),
        },
        "model-00002-of-00002.safetensors": {
            "decoder.out.weight": torch.randn(3, 8, generator=gen).to(torch.float16),
            "decoder.out.ids": torch.arange(3, dtype=torch.int64),
        },
    }
    weight_map = {}
    for shard, tensors in shards.items():
        save_file(tensors, os.path.join(out, "sharded", shard), metadata={"format": "pt"})
        for name in tensors:
            weight_map[name] = shard
        expected["files"]["sharded/" + shard] = {
            "metadata": {"format": "pt"},
            "tensors": {name: describe(t) for name, t in tensors.items()},
        }
    total = sum(t.numel() * t.element_size() for s in shards.values() for t in s.values())
    with open(os.path.join(out, "sharded", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, allow_nan=False)


def check(path, expected_path):
    with open(expected_path) as f:
        expected = json.load(f)
    problems = []
    try:
        loaded = load_file(path)
        with safe_open(path, framework="pt") as handle:
            metadata = handle.metadata() or {}
    except Exception as error:  # the reference library refused our file
        print(f"interop check: safetensors could not read {path}: {error}")
        return 1
    if metadata != expected["metadata"]:
        problems.append(f"metadata {metadata} != {expected['metadata']}")
    if sorted(loaded) != sorted(expected["tensors"]):
        problems.append(f"names {sorted(loaded)} != {sorted(expected['tensors'])}")
    for name, want in expected["tensors"].items():
        if name not in loaded:
            continue
        got = loaded[name]
        dtype = DTYPE_OF_NAME[want["dtype"]]
        if got.dtype != dtype:
            problems.append(f"{name}: dtype {got.dtype} != {dtype}")
            continue
        if list(got.shape) != want["shape"]:
            problems.append(f"{name}: shape {list(got.shape)} != {want['shape']}")
            continue
        reference = torch.tensor(want["values"], dtype=dtype).reshape(want["shape"])
        if not torch.equal(got, reference):
            problems.append(f"{name}: values {got.flatten().tolist()} != {want['values']}")
    for problem in problems:
        print("interop check:", problem)
    if problems:
        return 1
    print(f"interop check: ok ({len(loaded)} tensors)")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="directory to generate the oracle files into")
    parser.add_argument("--check", help="a .safetensors file written by oasr")
    parser.add_argument("--expected", help="JSON with the values --check must find")
    args = parser.parse_args()
    if args.check:
        if not args.expected:
            parser.error("--check needs --expected")
        return check(args.check, args.expected)
    if not args.out:
        parser.error("give --out DIR (generate) or --check FILE --expected JSON")
    generate(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

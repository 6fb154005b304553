#!/usr/bin/env python3
"""Writes OUT_DIR/model.safetensors with the PyPI safetensors library and
prints, as one JSON line, what the library's own reader (safe_open) sees in
it: {"tensors": {name: {"dtype": "F32", "shape": [...], "bytes": n}}}.
The oasr CLI test compares `oasr info` with that listing."""
import json
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    gen = torch.Generator().manual_seed(11)
    tensors = {
        "encoder.embed.conv.0.weight": torch.randn(16, 1, 3, 3, generator=gen),
        "encoder.layers.0.self_attn.linear_q.weight": torch.randn(16, 16, generator=gen).half(),
        "encoder.layers.0.self_attn.linear_q.bias": torch.randn(16, generator=gen).bfloat16(),
        "encoder.layers.0.feed_forward.w_1.weight": torch.randint(
            -127, 128, (32, 16), generator=gen, dtype=torch.int8),
        "encoder.layers.0.feed_forward.w_1.weight_scale": torch.rand(32, generator=gen),
        "encoder.global_cmvn.count": torch.tensor(1000, dtype=torch.int64),
        "decoder.token_ids": torch.arange(10, dtype=torch.int64),
        "decoder.lookup": torch.arange(20, dtype=torch.uint8),
        "ctc.ctc_lo.weight": torch.randn(10, 16, generator=gen),
        "ctc.empty": torch.zeros(0, 16),
    }
    path = os.path.join(out_dir, "model.safetensors")
    save_file(tensors, path, metadata={"format": "pt"})
    listing = {}
    with safe_open(path, framework="pt") as handle:
        for name in handle.keys():
            view = handle.get_slice(name)
            listing[name] = {"dtype": view.get_dtype(), "shape": view.get_shape(),
                             "bytes": tensors[name].numel() * tensors[name].element_size()}
    print(json.dumps({"tensors": listing}))


if __name__ == "__main__":
    main()

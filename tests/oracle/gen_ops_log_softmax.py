#!/usr/bin/env python3
"""PyTorch oracle for ops::log_softmax (src/ops/log_softmax.h).

Writes OUT/cases.safetensors: "<case>/x" and "<case>/expected" =
torch.log_softmax(x, dim); metadata "cases" is a JSON list of {"name", "dim"}.
"""

import argparse
import json
import os

import torch
from safetensors.torch import save_file


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(20240611)

    specs = []  # (name, x, dim)
    specs.append(("row1", torch.randn(1, 7), -1))
    specs.append(("ctc_like", torch.randn(3, 40, 61) * 4.0, -1))  # [B, T, V]
    specs.append(("vocab5002", torch.randn(2, 5002) * 3.0, 1))
    specs.append(("middle_dim", torch.randn(4, 9, 5), 1))  # stride != 1
    specs.append(("first_dim", torch.randn(6, 3), 0))
    specs.append(("large_offset", torch.randn(5, 33) + 1.0e4, -1))  # needs the max shift
    with_neg_inf = torch.randn(4, 12)
    with_neg_inf[:, 3] = -float("inf")  # a masked logit: its log-prob is -inf
    specs.append(("with_neg_inf", with_neg_inf, -1))
    specs.append(("length1", torch.randn(3, 1), -1))  # log_softmax of one value is 0

    cases, tensors = [], {}
    for name, x, dim in specs:
        x = x.float().contiguous()
        cases.append({"name": name, "dim": dim})
        tensors[f"{name}/x"] = x
        tensors[f"{name}/expected"] = torch.log_softmax(x, dim=dim).contiguous()
    os.makedirs(args.out, exist_ok=True)
    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(cases)})


if __name__ == "__main__":
    main()

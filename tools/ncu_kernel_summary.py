#!/usr/bin/env python3
"""Sums `ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv`
output into kernel groups, per forward: the GPU time behind the per-kernel
tables of bench/README.md. Usage: ncu_kernel_summary.py NCU.csv [forwards]
(forwards: how many encoder forwards the profiled process ran; default: the
number of rel-position attention launches / 12, the Conformer's blocks)."""
import csv
import re
import sys

GROUPS = [  # (group, regex on the kernel name), first match wins
    ("attention (fused rel-pos)", r"rel_position_attention"),
    ("int8/fp8 GEMM, mma.sync", r"scaled_mm_mma"),
    ("fp16 GEMM (cuBLASLt)", r"nvjet|cublas|sm80_xmma|ampere"),
    ("int8/fp8 GEMM, native sm90", r"cutlass|sm90|GemmUniversal|device_kernel"),
    ("LayerNorm (+ quantize)", r"layer_norm|norm_quant"),
    ("per-token quantize", r"quantize"),
    ("activation pass (16-bit table / formula)", r"table_kernel|activation|swish"),
    ("GLU + depthwise conv", r"glu|depthwise"),
    ("subsampling (conv, columns, flatten)", r"conv2d|im2col|column|flatten|nhwc"),
    ("elementwise / residual", r"binary_kernel|elementwise|add|scale|residual"),
    ("copies / transposes / masks", r"copy|transpose|mask|zero_tail|convert|fill|memset"),
]


def main() -> None:
    lines = open(sys.argv[1]).read().splitlines()
    # ncu prints the profiled program's own output and ==PROF== lines first.
    start = next(i for i, line in enumerate(lines) if line.startswith('"Process ID"'))
    rows = list(csv.DictReader(lines[start:]))
    totals, calls = {}, {}
    attention_calls = 0
    for row in rows:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"]
        n = int(row["Invocations"].replace(",", ""))
        ns = float(row["Average"].replace(",", "")) * n
        if "all_bit_patterns" in name:  # the 16-bit tables' one-time build
            continue
        if re.search("rel_position_attention", name):
            attention_calls += n
        group = next((g for g, rx in GROUPS if re.search(rx, name, re.I)), "other: " + name[:60])
        totals[group] = totals.get(group, 0.0) + ns
        calls[group] = calls.get(group, 0) + n
    numbers = [a for a in sys.argv[2:] if a.isdigit()]
    forwards = int(numbers[0]) if numbers else max(1, attention_calls // 12)
    print(f"forwards: {forwards}; per forward: "
          f"{sum(totals.values()) / forwards / 1e6:.2f} ms in {sum(calls.values()) // forwards} launches")
    for group, ns in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {group:42s} {ns / forwards / 1e6:7.3f} ms  {calls[group] / forwards:6.1f} launches")
    if "-v" in sys.argv:
        for row in rows:
            if row.get("Metric Name") == "gpu__time_duration.sum":
                n = int(row["Invocations"].replace(",", ""))
                ns = float(row["Average"].replace(",", "")) * n
                print(f"{ns / forwards / 1e6:8.3f} ms {n:5d}x  {row['Kernel Name'][:110]}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Independent oracle for SmoothQuant's scales and the static clip search,
written from the SmoothQuant definition ("SmoothQuant", "Fewer quantize
launches": observer=mse) in NumPy float64, not from oasr's C++.

Writes OUT/cases.safetensors:
  scales/<case>/{act, weight, producer?, s}
      s_j = max|X_j|^alpha / max|W_j|^(1 - alpha), s_j = 1 where max|X_j| or
      max|W_j| is 0; then clamped to [max(1e-5, producer_j / 65504),
      min(1e5, 65504 / max|W_j|)] (s_j = 1 when that interval is empty).
  clip/<case>/{samples, error}
      error[i - 16] = sum over samples of (x - fake_int8(x, c_i))^2 with
      c_i = max|x| * i / 256, i = 16..256, fake_int8 = clamp(rint(x * 127 /
      c), -127, 127) * c / 127 (rint: half to even). The brute-force search
      over the raw samples, against which the histogram search is judged.
Metadata "cases" (JSON): scales case -> alpha; clip case -> distribution.
"""

import argparse
import json
import os

import numpy as np
import torch
from safetensors.torch import save_file

FP16_MAX = 65504.0


def smoothing(act, weight, alpha, producer=None):
    act = act.astype(np.float64)
    weight = weight.astype(np.float64)
    s = np.ones_like(act)
    for j in range(act.size):
        a, w = act[j], weight[j]
        if not (a > 0 and w > 0):
            continue
        raw = a**alpha / w ** (1.0 - alpha)
        lo = 1e-5
        hi = min(1e5, FP16_MAX / w)
        if producer is not None:
            lo = max(lo, float(producer[j]) / FP16_MAX)
        s[j] = min(max(raw, lo), hi) if lo <= hi else 1.0
    return s.astype(np.float32)


def brute_force_errors(samples):
    x = samples.astype(np.float64)
    amax = np.abs(x).max()
    errors = []
    for i in range(16, 257):
        c = amax * i / 256.0
        q = np.clip(np.rint(x * 127.0 / c), -127, 127)
        errors.append(((x - q * c / 127.0) ** 2).sum())
    return np.array(errors, dtype=np.float32)  # oasr tensors have no float64


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(20261130)
    tensors = {}
    meta = {"scales": {}, "clip": {}}

    def put(name, array):
        tensors[name] = torch.from_numpy(np.array(array, copy=True))

    # Activation maxima with outlier channels, as LayerNorm outputs have.
    k = 256
    act = np.abs(rng.standard_normal(k)).astype(np.float32) * 3
    act[rng.choice(k, 8, replace=False)] *= 40.0
    act[[3, 77]] = 0.0  # never active
    weight = (np.abs(rng.standard_normal(k)) * 0.2 + 0.01).astype(np.float32)
    weight[5] = 0.0  # an all-zero column
    for alpha in (0.5, 0.8, 0.25, 0.0, 1.0):
        case = f"alpha{alpha}"
        meta["scales"][case] = alpha
        put(f"scales/{case}/act", act)
        put(f"scales/{case}/weight", weight)
        put(f"scales/{case}/s", smoothing(act, weight, alpha))
    # Clamps: huge weights cap s from above, huge producer entries from below.
    act_c = np.full(16, 1e4, dtype=np.float32)
    weight_c = np.full(16, 1e-3, dtype=np.float32)
    act_c[:4] = 1e7
    weight_c[:4] = 1e3  # raw s = 1e7^0.5 / 1e3^0.5 = 100 > 65504 / 1e3: capped
    producer = np.full(16, 1.0, dtype=np.float32)
    producer[8:12] = 6e4  # s >= 6e4 / 65504
    act_c[12:16] = 1e-6  # raw s = 0.03 < 6e4 / 65504: the producer bound lifts it
    producer[12:16] = 6e4
    meta["scales"]["clamped"] = 0.5
    put("scales/clamped/act", act_c)
    put("scales/clamped/weight", weight_c)
    put("scales/clamped/producer", producer)
    put("scales/clamped/s", smoothing(act_c, weight_c, 0.5, producer))

    distributions = {
        "gaussian": rng.standard_normal(200_000),
        "laplace": rng.laplace(size=200_000),
        "student_t3": rng.standard_t(3, size=200_000),
        "swish_like": np.maximum(rng.standard_normal(200_000) * 2, -0.28)
        + (rng.random(200_000) < 0.001) * 30.0,
    }
    for name, samples in distributions.items():
        samples = samples.astype(np.float32)
        meta["clip"][name] = name
        put(f"clip/{name}/samples", samples)
        put(f"clip/{name}/error", brute_force_errors(samples))

    save_file(tensors, os.path.join(args.out, "cases.safetensors"), metadata={"cases": json.dumps(meta)})


if __name__ == "__main__":
    main()

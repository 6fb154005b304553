"""PyTorch baseline for `oasr bench encoder`: times the oracle U2++ encoder
(tests/oracle/u2pp/u2pp_model.py, full attention, fp32, inference mode) on
the same synthetic input shape and prints one JSON line per batch size, in
the shape oasr prints its own lines.

    u2pp_torch_bench.py --ckpt-dir DIR [--seconds 10] [--batch 1,4]
                        [--warmup 2] [--iters 5] [--threads N] [--seed 0]
                        [--dynamic-int8]

--dynamic-int8 applies PyTorch's dynamic int8 quantization to every
nn.Linear (torch.ao.quantization.quantize_dynamic: int8 weights per tensor,
activations quantized per batch at run time), the baseline for oasr's
int8_w8a8 on CPU.

DIR is a WeNet experiment directory (train.yaml, final.pt, units.txt,
global_cmvn), e.g. one written by tests/oracle/u2pp/make_u2pp_case.py.
The input values are random like oasr's (normal, fixed seed) but not the same
numbers: the encoder's cost does not depend on them.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

ORACLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle",
                          "u2pp")
sys.path.insert(0, ORACLE_DIR)

from u2pp_reference import load_model_dir  # noqa: E402

FRAMES_PER_SECOND = 100  # 10 ms fbank frame shift


def batch_sizes(text: str):
    sizes = [int(part) for part in text.split(",") if part.strip()]
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"--batch '{text}' must list positive integers")
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=batch_sizes, default=[1, 4])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="0: torch's default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dynamic-int8", action="store_true")
    args = parser.parse_args()
    if args.iters < 1 or args.warmup < 0 or args.seconds <= 0:
        parser.error("need --iters >= 1, --warmup >= 0, --seconds > 0")

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model, _, _ = load_model_dir(args.ckpt_dir)
    model.eval()
    if args.dynamic_int8:
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                       dtype=torch.qint8)
    frames = int(round(args.seconds * FRAMES_PER_SECOND))
    generator = torch.Generator().manual_seed(args.seed)
    for batch in args.batch:
        feats = torch.randn(batch, frames, model.cfg.input_dim, generator=generator,
                            dtype=torch.float32)
        lengths = torch.full((batch,), frames, dtype=torch.int64)
        times_ms = []
        with torch.inference_mode():
            for run in range(args.warmup + args.iters):
                start = time.perf_counter()
                model.encode(feats, lengths)  # full attention (chunk_size -1)
                elapsed_ms = (time.perf_counter() - start) * 1e3
                if run >= args.warmup:
                    times_ms.append(elapsed_ms)
        median_ms = statistics.median(times_ms)
        print(json.dumps({
            "bench": "encoder", "impl": "pytorch", "device": "cpu", "batch": batch,
            "seconds": args.seconds, "median_ms": round(median_ms, 3),
            "min_ms": round(min(times_ms), 3),
            "rtfx": round(batch * args.seconds / (median_ms / 1e3), 3),
            "threads": torch.get_num_threads(),
            "quantization": "dynamic_int8_linear" if args.dynamic_int8 else "none",
        }, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

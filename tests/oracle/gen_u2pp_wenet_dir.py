#!/usr/bin/env python3
"""Oracle data for test_u2pp_wenet_dir.cc: a random-weight WeNet U2++
directory with its reference outputs, written by the independent PyTorch
oracle tests/oracle/u2pp/make_u2pp_case.py (tiny size: the U2++ widths,
d = 256, FFN 2048, 4 heads, with 2 encoder blocks and 1 + 1 decoder blocks;
real Kaldi fbank of synthetic audio).

Writes OUT/model/ (the WeNet directory, see tests/oracle/u2pp/README.md) and
OUT/cases.safetensors (a copy of OUT/model/reference/reference.safetensors,
whose metadata "summary" holds the decoding results).
"""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    model_dir = os.path.join(args.out, "model")
    if os.path.exists(model_dir):
        shutil.rmtree(model_dir)
    os.makedirs(args.out, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(HERE, "u2pp", "make_u2pp_case.py"),
                    "--out", model_dir, "--size", "tiny"], check=True)
    shutil.copyfile(os.path.join(model_dir, "reference", "reference.safetensors"),
                    os.path.join(args.out, "cases.safetensors"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks that device dispatch stays in one place (docs/architecture.md, "Devices").

Two rules over src/:
  1. No preprocessor line reads OASR_WITH_CUDA outside core/device_dispatch.h
     and the CUDA bodies' own folders (any path with a `cuda/` folder): a
     front picks its body with on_device() / kBuiltWithCuda instead.
  2. layers/, models/ and decode/ never name the CUDA device (`is_cuda()`,
     `DeviceType::kCUDA`, `Device::cuda(`): which device serves a step is
     the op fronts' and the quantization lanes' business. Asking whether a
     tensor is on the host (`is_cpu()`) is data locality and allowed.

    tools/check_device_dispatch.py [--src DIR]   (default: src/ beside this script)

Exit 0: clean; 1: violations (each printed as path:line: why); 2: no src/.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cuh", ".inc"}
PREPROCESSOR_CUDA = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif|define|undef)\b.*\bOASR_WITH_CUDA\b")
NAMES_CUDA = re.compile(r"\bis_cuda\(\)|\bDeviceType::kCUDA\b|\bDevice::cuda\(")
DISPATCH_HEADER = Path("core/device_dispatch.h")
DEVICE_BLIND = ("layers", "models", "decode")


def strip_comment(line: str) -> str:
    """The code of a line: without a // comment (string literals kept)."""
    out, in_string = [], False
    i = 0
    while i < len(line):
        c = line[i]
        if c == '"' and (i == 0 or line[i - 1] != "\\"):
            in_string = not in_string
        if not in_string and line.startswith("//", i):
            break
        out.append(c)
        i += 1
    return "".join(out)


def violations(src: Path) -> list[str]:
    found = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        relative = path.relative_to(src)
        in_cuda_folder = "cuda" in relative.parts[:-1]
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if (PREPROCESSOR_CUDA.search(line) and relative != DISPATCH_HEADER and
                    not in_cuda_folder):
                found.append(f"{relative}:{number}: reads OASR_WITH_CUDA in the preprocessor; "
                             "pick the body with on_device() or kBuiltWithCuda "
                             "(core/device_dispatch.h)")
            if relative.parts[0] in DEVICE_BLIND and NAMES_CUDA.search(strip_comment(line)):
                found.append(f"{relative}:{number}: {relative.parts[0]}/ names the CUDA device; "
                             "let the op front or the quantization lane choose the body")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    args = parser.parse_args()
    if not (args.src / "core").is_dir():
        print(f"check_device_dispatch: {args.src} is not oasr's src/ (no core/ in it)")
        return 2
    found = violations(args.src)
    for line in found:
        print(line)
    if found:
        print(f"check_device_dispatch: {len(found)} violation(s)")
        return 1
    print("check_device_dispatch: device dispatch stays in the op fronts, the lanes and "
          "core/device_dispatch.h")
    return 0


if __name__ == "__main__":
    sys.exit(main())

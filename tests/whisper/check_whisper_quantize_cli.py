#!/usr/bin/env python3
"""`oasr quantize` on the real Whisper tiny.en (the whisper_tiny_en fixture).

  check_whisper_quantize_cli.py --oasr BIN --work DIR

  1. Calibration audio at another rate is refused naming the rate.
  2. smoothquant_w8a8_fused with --module-types linear,conv1d on 4 Asterisk
     prompts resampled to 16 kHz by torchaudio (tools/data/resample_manifest.py):
     the written directory is a Whisper directory with oasr_config.json
     format_version 2 whose spec lists every GEMM and both convolutions
     (conv1 / conv2 and every fc2 with a static int8 input scale, the
     cross-attention k/v and fc2 runtime-smoothed), the tied head left out and
     kept full precision; model.safetensors holds int8 weights with fp32
     scales, no proj_out.weight, and the folded norms; the report lists the
     layout's 44 smoothing groups (4 + 7 per encoder / decoder layer).
  3. Served with no flag, the quantized directory transcribes two other
     prompts (100 words) within 8 word edits of the full-precision
     directory's transcripts, which are transformers' (tests/whisper's
     tiny_en oracle checks those).
  4. Refusals: quantizing it again, `oasr convert` of it, and serving it as
     another scheme; naming its own scheme is accepted.
Skips (exit 77) when the fixture had no tiny.en to convert.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import find_tiny_en  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALLISON = "/usr/share/asterisk/sounds/en_US_f_Allison"
CALIB = ["vm-minutes", "all-circuits-busy-now", "conf-getpin", "vm-goodbye"]
PROMPTS = ["demo-echotest", "demo-abouttotry"]

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True)


def safetensors_header(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(length))


def words_apart(a, b):
    """Word-level edit distance."""
    a, b = a.lower().split(), b.lower().split()
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[len(b)]


def transcripts(oasr, ckpt, extra=()):
    r = run([oasr, "transcribe", "--ckpt-dir", ckpt, "--output-format", "json", *extra] +
            [os.path.join(ALLISON, p + ".wav") for p in PROMPTS])
    if r.returncode != 0:
        return None, r.stderr
    texts = [json.loads(line)["text"] for line in r.stdout.splitlines() if line.strip()]
    if len(texts) != len(PROMPTS):
        return None, f"{len(texts)} transcripts for {len(PROMPTS)} files; " + r.stderr
    return texts, r.stderr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oasr", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    tiny = find_tiny_en.converted_dir_or_skip()
    missing = [p for p in CALIB + PROMPTS if not os.path.isfile(os.path.join(ALLISON, p + ".wav"))]
    if missing:
        print(f"the Asterisk prompts {missing} are not installed (asterisk-core-sounds-en-wav); "
              "skipped")
        return 77
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    manifest8k = os.path.join(args.work, "calib.jsonl")
    with open(manifest8k, "w") as f:
        for name in CALIB:
            f.write(json.dumps({"id": name, "audio": os.path.join(ALLISON, name + ".wav")}) + "\n")
    dst = os.path.join(args.work, "q")

    # 1. 8 kHz calibration audio is refused, naming the rate.
    r = run([args.oasr, "quantize", tiny, dst, "--recipe", "smoothquant_w8a8_fused",
             "--calib-manifest", manifest8k])
    check(r.returncode != 0 and "16000 Hz" in r.stderr and "calib.jsonl line" in r.stderr
          and not os.path.exists(dst), "8 kHz calibration audio refused naming the rate: " +
          r.stderr.strip()[-200:])

    # 2. The fused recipe with the conv front-end.
    r = run([sys.executable, os.path.join(REPO, "tools/data/resample_manifest.py"), manifest8k,
             os.path.join(args.work, "calib16k")])
    check(r.returncode == 0, "resample_manifest.py: " + (r.stdout + r.stderr).strip())
    manifest16k = os.path.join(args.work, "calib16k", "calib.jsonl")
    r = run([args.oasr, "quantize", tiny, dst, "--recipe", "smoothquant_w8a8_fused",
             "--module-types", "linear,conv1d", "--calib-manifest", manifest16k])
    check(r.returncode == 0, "oasr quantize smoothquant_w8a8_fused + conv1d: " +
          (r.stdout + r.stderr).strip()[-400:])
    if r.returncode != 0:
        return 1
    config = json.load(open(os.path.join(dst, "oasr_config.json")))
    check(config.get("architecture") == "whisper" and config.get("format_version") == 2,
          "oasr_config.json: whisper, format_version 2")
    spec = config["quantization"]
    layers = spec["layers"]  # {path: {kind, scheme, smooth_inv?}}
    check(len(layers) == 66, f"66 quantized layers (64 GEMMs + conv1 + conv2), got {len(layers)}")
    static = sorted(p for p, e in layers.items() if e["scheme"].endswith("_static"))
    expected_static = sorted(["model.encoder.conv1", "model.encoder.conv2"] +
                             [f"model.{side}.layers.{i}.fc2" for side in ("encoder", "decoder")
                              for i in range(4)])
    check(static == expected_static, f"static input scales on conv1, conv2 and every fc2: {static}")
    runtime = sorted(p for p, e in layers.items() if e.get("smooth_inv"))
    expected_runtime = sorted([f"model.{side}.layers.{i}.fc2" for side in ("encoder", "decoder")
                               for i in range(4)] +
                              [f"model.decoder.layers.{i}.encoder_attn.{p}_proj"
                               for i in range(4) for p in ("k", "v")])
    check(runtime == expected_runtime, f"runtime smoothers on fc2 and the cross k/v: {runtime}")
    header = safetensors_header(os.path.join(dst, "model.safetensors"))
    q = header.get("model.encoder.layers.0.self_attn.q_proj.weight", {})
    scale = header.get("model.encoder.layers.0.self_attn.q_proj.weight_scale", {})
    conv = header.get("model.encoder.conv1.weight", {})
    check(q.get("dtype") == "I8" and q.get("shape") == [384, 384] and scale.get("dtype") == "F32",
          f"q_proj stored int8 [384, 384] with fp32 scales: {q.get('dtype')} {q.get('shape')}")
    check(conv.get("dtype") == "I8", f"conv1 stored int8: {conv.get('dtype')}")
    check("proj_out.weight" not in header, "no proj_out.weight (tied to embed_tokens)")
    report = json.load(open(os.path.join(dst, "quantization_report.json")))
    check("proj_out" not in layers and any(s["path"] == "proj_out" for s in report["skipped"]),
          "proj_out kept full precision (the tied head)")
    groups = report["smoothquant"]["groups"]
    check(len(groups) == 44, f"44 smoothing groups in the report, got {len(groups)}")
    folds = sorted({g["fold"] for g in groups})
    check(folds == ["norm_affine", "runtime", "v_to_o"], f"folds used: {folds}")

    # 3. Served with no flag, close to full precision.
    reference, err = transcripts(args.oasr, tiny)
    check(reference is not None, "full-precision transcripts: " + err.strip()[-200:])
    quantized, err = transcripts(args.oasr, dst)
    check(quantized is not None, "quantized transcripts: " + err.strip()[-200:])
    if reference and quantized:
        # Measured: 1 + 4 of 100 words ("an inter-astorisk" -> "and enter asterisk",
        # "Digium" -> "Dijym"); a broken layer garbles every sentence.
        total = sum(words_apart(a, b) for a, b in zip(reference, quantized))
        words = sum(len(a.split()) for a in reference)
        check(total <= 8 and all(len(b.split()) > 10 for b in quantized),
              f"{total} of {words} words apart from full precision: {quantized}")
    same, _ = transcripts(args.oasr, dst, ["--quantization", "int8_w8a8_static"])
    check(same is not None and same == quantized,
          "--quantization int8_w8a8_static (its own scheme) serves the same")

    # 4. Refusals.
    r = run([args.oasr, "quantize", dst, os.path.join(args.work, "again"), "--recipe",
             "int8_w8a8_rtn"])
    check(r.returncode != 0 and "already quantized" in r.stderr, "quantizing it again refused: " +
          r.stderr.strip()[-160:])
    r = run([args.oasr, "convert", dst, os.path.join(args.work, "converted")])
    check(r.returncode != 0 and "quantized by oasr quantize" in r.stderr,
          "oasr convert of it refused: " + r.stderr.strip()[-160:])
    refused, err = transcripts(args.oasr, dst, ["--quantization", "fp8_w8a8"])
    check(refused is None and "cannot be served as fp8_w8a8" in err,
          "serving it as fp8_w8a8 refused: " + err.strip()[-200:])
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

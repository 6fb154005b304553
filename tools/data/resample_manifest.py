#!/usr/bin/env python3
"""Writes a copy of a jsonl manifest whose audio is resampled to another rate.

`oasr quantize` calibrates on audio at the model's own sample rate and
refuses any other rather than resample it (the spec's rule: calibrate on what
you serve). The eval sets' calibration prompts are 8 kHz telephone speech;
Whisper takes 16 kHz. This resamples them with torchaudio (windowed sinc,
torchaudio.functional.resample's defaults), writes 16-bit PCM WAVs under
OUT_DIR/audio/ and OUT_DIR/<name of IN>, every other field kept.

  resample_manifest.py IN.jsonl OUT_DIR [--rate 16000] [--limit N]

Audio paths are resolved as oasr resolves them: relative to the manifest's
folder. The output is written to OUT_DIR.tmp-* and renamed into place, so an
interrupted run leaves no half-written manifest.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import wave

import numpy as np
import torch
import torchaudio


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            sys.exit(f"{path}: {8 * w.getsampwidth()}-bit samples; this script reads 16-bit PCM")
        frames = w.readframes(w.getnframes())
        channels = w.getnchannels()
        rate = w.getframerate()
    samples = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return samples, rate


def write_wav(path, samples, rate):
    pcm = np.clip(np.round(samples * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifest")
    parser.add_argument("out_dir")
    parser.add_argument("--rate", type=int, default=16000)
    parser.add_argument("--limit", type=int, default=0, help="the first N lines only (0: all)")
    args = parser.parse_args()
    if args.rate <= 0:
        sys.exit(f"--rate must be positive, got {args.rate}")
    base = os.path.dirname(os.path.abspath(args.manifest))
    out_dir = os.path.abspath(args.out_dir)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=os.path.basename(out_dir) + ".tmp-", dir=parent)
    try:
        os.makedirs(os.path.join(staging, "audio"))
        lines = []
        with open(args.manifest, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    audio = entry["audio"]
                    uid = entry["id"]
                except (ValueError, KeyError, TypeError) as e:
                    sys.exit(f"{args.manifest} line {number}: not a {{id, audio, ...}} object ({e})")
                path = audio if os.path.isabs(audio) else os.path.join(base, audio)
                samples, rate = read_wav(path)
                if rate != args.rate:
                    samples = torchaudio.functional.resample(
                        torch.from_numpy(samples), rate, args.rate).numpy()
                name = "".join(c if c.isalnum() or c in "-_." else "_" for c in uid) + ".wav"
                write_wav(os.path.join(staging, "audio", name), samples, args.rate)
                entry["audio"] = "audio/" + name
                lines.append(json.dumps(entry))
                if args.limit and len(lines) == args.limit:
                    break
        with open(os.path.join(staging, os.path.basename(args.manifest)), "w",
                  encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.rename(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(f"wrote {len(lines)} utterances at {args.rate} Hz to "
          f"{os.path.join(out_dir, os.path.basename(args.manifest))}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a copy of a jsonl manifest whose audio is resampled to another rate.

`oasr quantize` calibrates on audio at the model's own sample rate and
refuses any other rather than resample it (calibrate on what you serve;
README "Quantization"). The eval sets' calibration prompts are 8 kHz telephone speech;
Whisper takes 16 kHz. This resamples them with torchaudio (windowed sinc,
torchaudio.functional.resample's defaults), writes 16-bit PCM WAVs under
OUT_DIR/audio/ and OUT_DIR/<name of IN>, every other field kept.

  resample_manifest.py IN.jsonl OUT_DIR [--rate 16000] [--limit N] [--audio-root DIR]
                       [--force]

Audio paths are resolved as oasr resolves them: relative to --audio-root,
default the manifest's folder. OUT_DIR must not exist (--force replaces one
this script wrote: it holds only audio/ and the manifest) and must not hold
the input. The output is written to OUT_DIR.tmp-* and renamed into place, so
an interrupted run leaves no half-written manifest.
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
    parser.add_argument("--audio-root", help="where relative audio paths start (default: the "
                        "manifest's folder)")
    parser.add_argument("--force", action="store_true",
                        help="replace OUT_DIR when it is an earlier output of this script")
    args = parser.parse_args()
    if args.rate <= 0:
        sys.exit(f"--rate must be positive, got {args.rate}")
    if args.limit < 0:
        sys.exit(f"--limit must be 0 (all) or positive, got {args.limit}")
    base = os.path.abspath(args.audio_root or os.path.dirname(os.path.abspath(args.manifest)))
    out_dir = os.path.abspath(args.out_dir)
    name = os.path.basename(args.manifest)
    if os.path.commonpath([out_dir, os.path.abspath(args.manifest)]) == out_dir:
        sys.exit(f"{args.out_dir}: holds the input manifest; choose an output folder of its own")
    if os.path.exists(out_dir):
        ours = os.path.isdir(out_dir) and set(os.listdir(out_dir)) <= {"audio", name}
        if not args.force or not ours:
            sys.exit(f"{args.out_dir}: exists; " + (
                "pass --force to replace it" if ours else
                "it is not an output of this script (it holds more than audio/ and "
                f"{name}), so it is never replaced; choose another folder"))
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
                # The line number keeps two ids that map to one file name apart.
                wav = f"{len(lines):05d}-" + "".join(
                    c if c.isalnum() or c in "-_." else "_" for c in str(uid)) + ".wav"
                write_wav(os.path.join(staging, "audio", wav), samples, args.rate)
                entry["audio"] = "audio/" + wav
                lines.append(json.dumps(entry))
                if args.limit and len(lines) == args.limit:
                    break
        with open(os.path.join(staging, name), "w", encoding="utf-8") as f:
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

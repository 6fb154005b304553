#!/usr/bin/env python3
"""Writes one long recording of real speech and its manifest, for Whisper's
long-form benchmark (bench/whisper_long_form.sh step 1).

The eval sets' real prompts (real_test, then real_dev, then real_train of
tools/data/make_eval_sets.sh's folder; 8 kHz Asterisk telephone prompts) are
resampled to 16 kHz with torchaudio (torchaudio.functional.resample's
defaults) and joined with GAP seconds of silence until SECONDS are reached;
the reference is their texts joined with spaces. Writes OUT_DIR/NAME.wav
(16-bit PCM, mono, 16 kHz) and OUT_DIR/NAME.jsonl (one entry, audio path
relative to OUT_DIR).

  make_long_form.py EVAL_SETS OUT_DIR [--seconds 600] [--gap 0.6] [--name long10min]

The bench's 10-minute file (602.2 s, 149 prompts, 1272 reference words
after oasr's normalisation) is this script's default output.
"""

import argparse
import json
import os
import sys
import wave

import numpy as np
import torch
import torchaudio

RATE = 16000
SPLITS = ("real_test.jsonl", "real_dev.jsonl", "real_train.jsonl")


def read_pcm16(path):
    with wave.open(path) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise SystemExit(f"{path}: expected mono 16-bit PCM")
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return pcm.astype(np.float32) / 32768.0, w.getframerate()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("eval_sets")
    parser.add_argument("out_dir")
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--gap", type=float, default=0.6)
    parser.add_argument("--name", default="long10min")
    args = parser.parse_args()
    if args.seconds <= 0 or args.gap < 0:
        raise SystemExit("--seconds must be > 0 and --gap >= 0")
    items = []
    for split in SPLITS:
        path = os.path.join(args.eval_sets, split)
        if not os.path.isfile(path):
            raise SystemExit(f"{path} is missing: build the eval sets first "
                             "(tools/data/make_eval_sets.sh EVAL_SETS)")
        with open(path) as f:
            items += [json.loads(line) for line in f if line.strip()]
    gap = np.zeros(int(round(args.gap * RATE)), dtype=np.float32)
    pieces, texts, total = [], [], 0.0
    for item in items:
        audio = item["audio"]
        if not os.path.isabs(audio):
            audio = os.path.join(args.eval_sets, audio)
        samples, rate = read_pcm16(audio)
        if rate != RATE:
            samples = torchaudio.functional.resample(torch.from_numpy(samples), rate, RATE).numpy()
        pieces += [samples, gap]
        texts.append(item["text"])
        total += (len(samples) + len(gap)) / RATE
        if total >= args.seconds:
            break
    if total < args.seconds:
        print(f"warning: only {total:.1f} s of prompts", file=sys.stderr)
    pcm = np.clip(np.round(np.concatenate(pieces) * 32767), -32768, 32767).astype("<i2")
    os.makedirs(args.out_dir, exist_ok=True)
    wav_path = os.path.join(args.out_dir, args.name + ".wav")
    with wave.open(wav_path + ".tmp", "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.tobytes())
    os.replace(wav_path + ".tmp", wav_path)
    entry = {"id": args.name, "audio": args.name + ".wav", "text": " ".join(texts),
             "duration": len(pcm) / RATE}
    manifest = os.path.join(args.out_dir, args.name + ".jsonl")
    with open(manifest + ".tmp", "w") as f:
        f.write(json.dumps(entry) + "\n")
    os.replace(manifest + ".tmp", manifest)
    print(f"{len(texts)} prompts, {len(pcm) / RATE:.1f} s -> {wav_path}, {manifest}")


if __name__ == "__main__":
    main()

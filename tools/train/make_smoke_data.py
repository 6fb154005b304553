#!/usr/bin/env python3
"""Writes a tiny synthetic dataset in tools/data's manifest format, for
smoke-testing the trainer without TTS: tone/noise "utterances" from
tests/oracle/u2pp/u2pp_synth.py with random texts, "synthetic" ones at 16 kHz
(with a voice field) and "real" ones at 8 kHz.

  python3 tools/train/make_smoke_data.py --out DIR [--count 48]
"""

import argparse
import json
import os
import random
import sys
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "oracle", "u2pp"))

from u2pp_synth import UtteranceSpec, synthesize  # noqa: E402

WORDS = ["HELLO", "WORLD", "PLEASE", "PRESS", "ONE", "TWO", "THANK", "YOU", "GOODBYE", "IT'S",
         "THE", "NUMBER", "IS", "NOT", "AVAILABLE", "AGAIN"]


def write_wav(path, samples, rate):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(samples, dtype="<i2").tobytes())


def letter_tones(text: str, rate: int, rng: random.Random) -> np.ndarray:
    """A learnable toy 'speech': each letter is a two-tone chord (like DTMF)
    of 90-140 ms, a space is 80-120 ms of near silence."""
    low = [300 + 90 * k for k in range(7)]
    high = [1100 + 180 * k for k in range(4)]
    parts = []
    for ch in text:
        n = int(rate * rng.uniform(0.08, 0.12 if ch == " " else 0.14))
        t = np.arange(n) / rate
        if ch == " ":
            parts.append(np.zeros(n))
            continue
        k = (ord(ch) - ord("A")) if ch != "'" else 26
        tone = np.sin(2 * np.pi * low[k % 7] * t) + np.sin(2 * np.pi * high[k // 7] * t)
        ramp = np.minimum(1.0, np.minimum(np.arange(n), np.arange(n)[::-1]) / (0.01 * rate))
        parts.append(0.25 * tone * ramp)
    pad = np.zeros(int(0.15 * rate))
    x = np.concatenate([pad] + parts + [pad])
    x += np.random.RandomState(rng.randint(0, 2**31)).standard_normal(len(x)) * 3e-3
    return np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--count", type=int, default=48)
    parser.add_argument("--kind", choices=["noise", "letters"], default="noise",
                        help="noise: u2pp_synth sounds (unlearnable, for plumbing); letters: "
                             "a tone chord per letter, which a model can learn in minutes")
    args = parser.parse_args()
    rng = random.Random(7)
    os.makedirs(os.path.join(args.out, "wav"), exist_ok=True)
    splits = {"synth_train": [], "real_train": [], "synth_dev": [], "real_test": []}
    for i in range(args.count):
        split = ["synth_train", "synth_train", "real_train", "synth_dev", "real_test"][i % 5]
        real = split.startswith("real")
        rate = 8000 if real else 16000
        seconds = rng.uniform(1.0, 3.5)
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        name = f"u{i:03d}"
        if args.kind == "letters":
            samples = letter_tones(text, rate, rng)
        else:
            samples = synthesize(UtteranceSpec(name, seconds, rate=rate), 1000 + i)
        write_wav(os.path.join(args.out, "wav", name + ".wav"), samples, rate)
        entry = {"id": name, "audio": f"wav/{name}.wav", "text": text,
                 "duration": round(len(samples) / rate, 3)}
        if not real:
            entry["voice"] = "tones"
        splits[split].append(entry)
    for split, items in splits.items():
        with open(os.path.join(args.out, split + ".jsonl"), "w") as f:
            for e in items:
                f.write(json.dumps(e) + "\n")
    print(f"wrote {args.count} utterances to {args.out}: "
          + ", ".join(f"{k} {len(v)}" for k, v in splits.items()))


if __name__ == "__main__":
    main()

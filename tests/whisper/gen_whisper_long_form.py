#!/usr/bin/env python3
"""Oracle for decode/whisper_long_form (test_whisper_long_form.cc).

  segments:   Hugging Face transformers 4.46.3's
              WhisperGenerationMixin._retrieve_segment (the long-form loop's
              segment split and seek advance) on hand-made and random token
              sequences (tiny.en's ids: <|0.00|> = 50363, text below 50256),
              for windows of 3000 and of fewer frames: each segment's token
              range, start and end, and the seek advance in frames.
  ratios:     openai-whisper's compression ratio of texts,
              len(b) / len(zlib.compress(b)) with b = text.encode("utf-8")
              (Python's zlib at its default level).
Writes OUT/cases.safetensors (a placeholder tensor; the cases are the
metadata "cases").
"""

import argparse
import json
import os
import random
import zlib

import torch
from safetensors.torch import save_file
from transformers.models.whisper.generation_whisper import WhisperGenerationMixin

TIMESTAMP_BEGIN = 50363


def ts(seconds):
    return TIMESTAMP_BEGIN + int(round(seconds / 0.02))


def hand_made():
    a, b, c, d, e = 464, 3290, 318, 257, 1332  # text tokens
    return [
        [ts(0), a, b, ts(1.0), ts(1.2), c, ts(2.4), ts(2.4), d, ts(3.0)],  # lone timestamp ending
        [ts(0), a, b, ts(1.0), ts(1.2), c, ts(2.4), ts(2.4), d, e],  # text after the last pair
        [ts(0), a, b, c],  # no pair, only <|0.00|>
        [ts(0), a, b, ts(3.5)],  # no pair, a closing timestamp
        [a, b, c],  # no timestamp at all
        [],  # nothing decoded
        [ts(0), ts(0)],  # a pair at 0: seek does not move
        [ts(0), a, ts(29.98), ts(29.98)],  # pair at the window's end
        [ts(0.5), a, b, ts(2.0), ts(2.0), c, ts(4.0), ts(4.0)],  # ends in a pair
    ]


def random_sequences(rng, count):
    out = []
    for _ in range(count):
        tokens, t = [], 0
        for _ in range(rng.randint(0, 30)):
            if rng.random() < 0.35:
                t = min(1500, t + rng.choice([0, 0, 1, 7, 50, 130]))
                tokens.append(TIMESTAMP_BEGIN + t)
            else:
                tokens.append(rng.randint(0, 50255))
        out.append(tokens)
    return out


def retrieve(tokens, window_frames):
    segments, advance = WhisperGenerationMixin._retrieve_segment(
        seek_sequence=torch.tensor(tokens, dtype=torch.long),
        seek_outputs=[{}],
        time_offset=torch.tensor([0.0], dtype=torch.float64),
        timestamp_begin=TIMESTAMP_BEGIN,
        seek_num_frames=torch.tensor([window_frames]),
        time_precision=0.02,
        input_stride=2,
        prev_idx=0,
        idx=0,
        return_token_timestamps=False)
    out, first = [], 0
    for seg in segments:
        n = len(seg["tokens"])
        assert seg["tokens"].tolist() == tokens[first:first + n]
        out.append({"first": first, "last": first + n, "start": float(seg["start"]),
                    "end": float(seg["end"])})
        first += n
    return {"tokens": tokens, "window_frames": window_frames, "segments": out,
            "advance": int(advance)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(20261204)
    sequences = hand_made() + random_sequences(rng, 300)
    cases = []
    for i, tokens in enumerate(sequences):
        for frames in (3000, 1234 if i % 2 else 2999):
            cases.append(retrieve(tokens, frames))
    texts = ["", "a", " Hello there.", " the the the the the the the the the the the the the",
             " Please press 1 to mute or unmute yourself. 2 to lock or unlock the conference.",
             " h\u00e9llo w\u00f6rld \u2713 \u3053\u3093\u306b\u3061\u306f",
             " I'm sorry. I'm sorry. I'm sorry. I'm sorry. I'm sorry. I'm sorry. I'm sorry."]
    ratios = [{"text": t, "ratio": (len(t.encode()) / len(zlib.compress(t.encode()))) if t else 0.0}
              for t in texts]
    meta = {"timestamp_begin": TIMESTAMP_BEGIN, "segments": cases, "ratios": ratios}
    save_file({"placeholder": torch.zeros(1)}, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(meta)})
    print(f"wrote {len(cases)} segment cases and {len(ratios)} compression ratios")


if __name__ == "__main__":
    main()

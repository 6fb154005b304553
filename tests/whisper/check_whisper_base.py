#!/usr/bin/env python3
"""Whisper base (multilingual, the second real model) against transformers.

  check_whisper_base.py --oasr BIN --work DIR

The directory the whisper_base fixture converted (find_whisper_base.py) is
loaded by transformers' WhisperForConditionalGeneration as it is, and both
transcribe the same 16 kHz float WAVs (Asterisk prompts upsampled by
torchaudio, written here): generate(language="en", task="transcribe") greedy
and with 5 beams against `oasr transcribe` on the CPU in float32, token for
token and text for text. The multilingual prompt (<|startoftranscript|>
<|en|> <|transcribe|> <|notimestamps|>) and the 99-language vocabulary are
what tiny.en does not exercise. Skips (exit 77) without the fixture.
"""

import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import find_whisper_base  # noqa: E402
from gen_whisper_e2e import RATE, to_16k, write_float_wav  # noqa: E402

PROMPTS = ["demo-echotest", "demo-abouttotry", "vm-num-i-have"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oasr", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    base = find_whisper_base.converted_dir_or_skip()
    from transformers import (WhisperFeatureExtractor, WhisperForConditionalGeneration,
                              WhisperTokenizerFast)

    os.makedirs(args.work, exist_ok=True)
    audio, paths = [], []
    for name in PROMPTS:
        samples = to_16k(name)
        path = os.path.join(args.work, name + ".wav")
        write_float_wav(path, samples)
        audio.append(samples)
        paths.append(path)
    features = WhisperFeatureExtractor.from_pretrained(base)
    tokenizer = WhisperTokenizerFast.from_pretrained(base)
    # float32, as oasr serves on the CPU (the directory stores float16).
    model = WhisperForConditionalGeneration.from_pretrained(base,
                                                            torch_dtype=torch.float32).eval()
    gen = model.generation_config
    feats = features(audio, sampling_rate=RATE, return_tensors="pt").input_features
    failures = 0
    for beams in (1, 5):
        with torch.no_grad():
            sequences = model.generate(feats, num_beams=beams, language="en", task="transcribe")
        expected = []
        for row in sequences.tolist():
            tokens = row[row.index(gen.no_timestamps_token_id) + 1:]
            while tokens and tokens[-1] == gen.eos_token_id:
                tokens.pop()
            expected.append({"tokens": tokens, "text": tokenizer.decode(tokens,
                                                                     skip_special_tokens=True)})
        method = ["--decode-method", "greedy_search"] if beams == 1 else [
            "--decode-method", "beam_search", "--beam-size", "5"]
        r = subprocess.run([args.oasr, "transcribe", "--ckpt-dir", base, "--output-format", "json",
                            *method, *paths], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL oasr transcribe ({beams} beams): {r.stderr.strip()[-400:]}")
            return 1
        got = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
        if len(got) != len(PROMPTS):
            print(f"FAIL oasr transcribe ({beams} beams) gave {len(got)} results for "
                  f"{len(PROMPTS)} files")
            return 1
        for name, want, have in zip(PROMPTS, expected, got):
            same = want["tokens"] == have["tokens"] and want["text"] == have["text"]
            failures += not same
            print(("ok   " if same else "FAIL ") + f"{name}, {beams} beam(s): {have['text'][:70]!r}" +
                  ("" if same else f"\n     transformers: {want['text']!r} {want['tokens']}"
                                   f"\n     oasr:         {have['text']!r} {have['tokens']}"))
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

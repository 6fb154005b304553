#!/usr/bin/env python3
"""Oracle for `oasr transcribe` / `oasr eval` on the real Whisper tiny.en
(test_whisper_e2e.cc): Hugging Face transformers' WhisperForConditionalGeneration
.generate() on the directory the whisper_tiny_en fixture converted
($OASR_WHISPER_TINY_EN_DIR), with WhisperFeatureExtractor and
WhisperTokenizerFast.batch_decode(skip_special_tokens=True) loaded from it.

Audio: real speech, Asterisk's English prompts (/usr/share/asterisk/sounds/en,
8 kHz 16-bit WAV, Debian package asterisk-core-sounds-en-wav). HF needs
16 kHz: each prompt is upsampled with torchaudio.functional.resample and
written as a float32 WAV, so oasr (which reads float WAV exactly) and HF see
identical samples. The 8 kHz originals are also listed: oasr resamples them
itself (soxr), and the test expects the same transcripts there (they agree
for these prompts; a different resampler could in principle flip a close
call, which is why the 16 kHz files are the primary comparison).

The long input (~40 s, over Whisper's 30 s window): prompts concatenated so
that the first 30 s window holds two prompts and silence, the rest three
more. Its expected transcript is oasr's declared windowed decoding, computed
here with HF: each consecutive 30 s window transcribed by short-form
generate() on its own, texts stripped and joined with one space (HF's own
long-form path would use timestamps and differ by design).

Long-form sequential decoding (oasr's default over 30 s) on that input and
on a longer one (~101 s: eight prompts with 1.5 s gaps, so windows end
inside speech): HF's long-form generate() for one utterance --
features(audio, truncation=False, padding="longest",
return_attention_mask=True), generate(return_timestamps=True,
return_segments=True) -- greedy and 5 beams: its sequences (timestamps
included), batch_decode's text and its segments {"start", "end", "tokens"}.

With timestamps (greedy_ts, beam5_ts; the short prompts only):
generate(return_timestamps=True), the generated ids with their timestamp
tokens, batch_decode's text, and the segments of
tokenizer.decode(ids, output_offsets=True) as {"text", "start", "end"}.

Exits 77 (ctest: skipped) when tiny.en or the prompts are unavailable.
Writes OUT/audio/*.wav and OUT/cases.safetensors whose metadata "cases" is
{"tiny_en_dir", "utterances": [{"name", "wav16", "wav8", "greedy", "beam5"}],
"long": {"wav16", "greedy", "beam5", "windows", "sequential"},
"long2": {"wav16", "sequential"}} where each decoding is
{"text", "tokens"} (tokens: generated ids, prompt and eos excluded).
"""

import argparse
import json
import os
import struct
import sys
import wave

import numpy as np
import torch
import torchaudio
from safetensors.torch import save_file
from transformers import (WhisperFeatureExtractor, WhisperForConditionalGeneration,
                          WhisperTokenizerFast)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import find_tiny_en  # noqa: E402

PROMPTS_DIR = "/usr/share/asterisk/sounds/en"
SHORT = ["agent-loginok", "all-circuits-busy-now", "vm-newuser", "privacy-unident",
         "at-tone-time-exactly", "vm-helpexit"]
LONG_FIRST_WINDOW = ["conf-adminmenu", "vm-newuser"]
LONG_REST = ["privacy-unident", "at-tone-time-exactly", "something-terribly-wrong"]
LONGER = ["conf-adminmenu", "vm-newuser", "privacy-unident", "demo-echotest",
          "at-tone-time-exactly", "something-terribly-wrong", "vm-options", "demo-abouttotry"]
RATE = 16000
WINDOW = 30 * RATE


def read_8k(name):
    with wave.open(os.path.join(PROMPTS_DIR, name + ".wav")) as w:
        assert w.getframerate() == 8000 and w.getsampwidth() == 2 and w.getnchannels() == 1
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return torch.from_numpy(pcm.astype(np.float32) / 32768.0)


def to_16k(name):
    return torchaudio.functional.resample(read_8k(name), 8000, RATE).numpy()


def write_float_wav(path, samples):
    """Mono IEEE-float WAV (format tag 3), so no sample is requantized."""
    data = np.asarray(samples, dtype="<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, RATE, RATE * 4, 4, 32)
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data)) + b"WAVE")
        f.write(b"fmt " + struct.pack("<I", len(fmt)) + fmt)
        f.write(b"data" + struct.pack("<I", len(data)) + data)


def skip(out, reason):
    stale = os.path.join(out, "cases.safetensors")
    if os.path.exists(stale):
        os.remove(stale)
    print("SKIP: " + reason)
    sys.exit(find_tiny_en.SKIP)


class Hf:
    def __init__(self, directory):
        self.features = WhisperFeatureExtractor.from_pretrained(directory)
        self.tokenizer = WhisperTokenizerFast.from_pretrained(directory)
        self.model = WhisperForConditionalGeneration.from_pretrained(directory).eval()
        self.eos = self.model.generation_config.eos_token_id

    def transcribe(self, audio, num_beams):
        """Short-form generate on a batch of <= 30 s arrays -> [{"text", "tokens"}]."""
        feats = self.features(audio, sampling_rate=RATE, return_tensors="pt").input_features
        with torch.no_grad():
            sequences = self.model.generate(feats, num_beams=num_beams)
        texts = self.tokenizer.batch_decode(sequences, skip_special_tokens=True)
        no_timestamps = self.model.generation_config.no_timestamps_token_id
        out = []
        for row, text in zip(sequences.tolist(), texts):
            tokens = row[row.index(no_timestamps) + 1:]  # the prompt ends with <|notimestamps|>
            while tokens and tokens[-1] == self.eos:
                tokens.pop()
            out.append({"text": text, "tokens": tokens})
        return out

    def transcribe_with_timestamps(self, audio, num_beams):
        """generate(return_timestamps=True) on <= 30 s arrays ->
        [{"text", "tokens", "segments"}] (tokens: after the prompt, eos
        excluded, timestamps included)."""
        feats = self.features(audio, sampling_rate=RATE, return_tensors="pt").input_features
        with torch.no_grad():
            sequences = self.model.generate(feats, num_beams=num_beams, return_timestamps=True)
        texts = self.tokenizer.batch_decode(sequences, skip_special_tokens=True)
        sot = self.model.generation_config.decoder_start_token_id
        out = []
        for row, text in zip(sequences.tolist(), texts):
            offsets = self.tokenizer.decode(row, skip_special_tokens=True,
                                            output_offsets=True)["offsets"]
            tokens = row[row.index(sot) + 1:]
            while tokens and tokens[-1] == self.eos:
                tokens.pop()
            out.append({"text": text, "tokens": tokens,
                        "segments": [{"text": o["text"], "start": o["timestamp"][0],
                                      "end": o["timestamp"][1]} for o in offsets]})
        return out

    def transcribe_long(self, audio, num_beams):
        """HF's long-form generate() on one > 30 s array -> {"text", "tokens",
        "segments": [{"start", "end", "tokens"}]}."""
        inputs = self.features(audio, sampling_rate=RATE, truncation=False, padding="longest",
                               return_attention_mask=True, return_tensors="pt")
        assert inputs.input_features.shape[-1] > 3000, inputs.input_features.shape
        with torch.no_grad():
            result = self.model.generate(inputs.input_features,
                                         attention_mask=inputs.attention_mask,
                                         num_beams=num_beams, return_timestamps=True,
                                         return_segments=True)
        tokens = result["sequences"][0].tolist()
        text = self.tokenizer.batch_decode(result["sequences"], skip_special_tokens=True)[0]
        segments = [{"start": float(seg["start"]), "end": float(seg["end"]),
                     "tokens": seg["tokens"].tolist()} for seg in result["segments"][0]]
        assert tokens == [t for seg in segments for t in seg["tokens"]]
        return {"text": text, "tokens": tokens, "segments": segments}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(os.path.join(args.out, "audio"), exist_ok=True)
    tiny_en = os.environ.get("OASR_WHISPER_TINY_EN_DIR", "")
    if not tiny_en or not os.path.isfile(os.path.join(tiny_en, "oasr_config.json")):
        try:
            find_tiny_en.converted_dir_or_skip()
        except SystemExit:
            skip(args.out, "the converted Whisper tiny.en is not available (see the "
                           "whisper.tiny_en_dir fixture)")
    missing = [n for n in SHORT + LONG_FIRST_WINDOW + LONG_REST + LONGER
               if not os.path.isfile(os.path.join(PROMPTS_DIR, n + ".wav"))]
    if missing:
        skip(args.out, f"Asterisk prompts {missing} are missing from {PROMPTS_DIR}; install "
                       "the Debian package asterisk-core-sounds-en-wav")

    hf = Hf(tiny_en)
    audio = {}
    utterances = []
    for name in SHORT:
        audio[name] = to_16k(name)
        wav16 = os.path.join(args.out, "audio", name + ".16k.wav")
        write_float_wav(wav16, audio[name])
        utterances.append({"name": name, "wav16": wav16,
                           "wav8": os.path.join(PROMPTS_DIR, name + ".wav")})

    gap = np.zeros(RATE // 2, dtype=np.float32)
    first = np.concatenate([x for n in LONG_FIRST_WINDOW for x in (to_16k(n), gap)])
    assert len(first) < WINDOW, "the first window's prompts must fit in 30 s"
    first = np.concatenate([first, np.zeros(WINDOW - len(first), dtype=np.float32)])
    rest = np.concatenate([x for n in LONG_REST for x in (gap, to_16k(n))])
    long_audio = np.concatenate([first, rest]).astype(np.float32)
    assert WINDOW < len(long_audio) <= 2 * WINDOW
    long_wav = os.path.join(args.out, "audio", "long.16k.wav")
    write_float_wav(long_wav, long_audio)
    windows = [long_audio[i:i + WINDOW] for i in range(0, len(long_audio), WINDOW)]

    batch = [audio[n] for n in SHORT] + windows
    long = {"wav16": long_wav, "seconds": len(long_audio) / RATE}
    for key, beams in (("greedy", 1), ("beam5", 5)):
        results = hf.transcribe(batch, beams)
        for u, r in zip(utterances, results):
            u[key] = r
        pieces = results[len(SHORT):]
        long[key] = {
            "text": " ".join(p["text"].strip() for p in pieces if p["text"].strip()),
            "tokens": [t for p in pieces for t in p["tokens"]],
            "windows": [p["text"] for p in pieces],
        }
        for u in utterances:
            print(f"{key} {u['name']}: {u[key]['text']!r}")
        print(f"{key} long: {long[key]['text']!r}")

    gap = np.zeros(3 * RATE // 2, dtype=np.float32)
    longer_audio = np.concatenate([x for n in LONGER for x in (to_16k(n), gap)]).astype(np.float32)
    assert len(longer_audio) > 2 * WINDOW, len(longer_audio) / RATE
    longer_wav = os.path.join(args.out, "audio", "long2.16k.wav")
    write_float_wav(longer_wav, longer_audio)
    long2 = {"wav16": longer_wav, "seconds": len(longer_audio) / RATE}
    for key, beams in (("greedy", 1), ("beam5", 5)):
        long.setdefault("sequential", {})[key] = hf.transcribe_long(long_audio, beams)
        long2.setdefault("sequential", {})[key] = hf.transcribe_long(longer_audio, beams)
        for name, entry in (("long", long), ("long2", long2)):
            r = entry["sequential"][key]
            print(f"{key} {name} sequential: {len(r['segments'])} segments, {r['text']!r}")

    for key, beams in (("greedy_ts", 1), ("beam5_ts", 5)):
        results = hf.transcribe_with_timestamps([audio[n] for n in SHORT], beams)
        for u, r in zip(utterances, results):
            u[key] = r
            print(f"{key} {u['name']}: {r['segments']}")
    assert any(len(u["greedy_ts"]["segments"]) > 1 for u in utterances), \
        "no prompt gave two timestamp segments; the test would not see segment boundaries"

    cases = {"tiny_en_dir": tiny_en, "utterances": utterances, "long": long, "long2": long2}
    save_file({"long/samples": torch.from_numpy(long_audio)},
              os.path.join(args.out, "cases.safetensors"), metadata={"cases": json.dumps(cases)})


if __name__ == "__main__":
    main()

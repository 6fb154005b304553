#!/usr/bin/env python3
"""Oracle for Whisper's log-mel front end (src/audio/whisper_mel.*).

Hugging Face transformers' WhisperFeatureExtractor is the reference. For
each signal and each mel size (80, 128) OUT/cases.safetensors holds
  <case>/samples         float32 mono 16 kHz samples given to both sides
  <case>/mel<N>/numpy    WhisperFeatureExtractor._np_extract_fbank_features of
                         the samples zero-padded to 30 s (HF's numpy/float64 path)
  <case>/mel<N>/torch    WhisperFeatureExtractor(...)(samples).input_features[0]
                         (what HF returns by default when torch is installed:
                         torch.stft in float32)
  filters/mel<N>         HF's mel_filter_bank matrix [201, N], float64 stored
                         as its raw little-endian bytes (uint8; oasr tensors
                         have no float64)
  window                 HF's window_function(400, "hann"), float64 bytes as above
  <case>/mel<N>/whole_numpy, whole_torch   for the long cases (over 30 s):
                         HF's long-form input (truncation=False, padding="longest",
                         one signal): the numpy path on the unpadded samples and
                         extractor(..., truncation=False, padding="longest")
and the metadata key "cases" (JSON list of case names, mel sizes, and a note
for any case that could not be built).

Signals: white noise, a sine sweep, digital silence, near-silence (so the
1e-10 floor and the max-8 floor both act), a clipped square wave, a short
clip (< 1 s), an empty input, exactly 30 s, and real speech: Asterisk's
English prompts (Debian asterisk-core-sounds-en-wav, 8 kHz) upsampled to
16 kHz with torchaudio. Long cases (whole-signal features, and their first
30 s as the short-form cases): the speech followed by the sweep, cut to
34.37 s + 7 samples (not a whole number of 160-sample hops).
"""

import argparse
import glob
import json
import os
import wave

import numpy as np
import torch
import torchaudio
from safetensors.numpy import save_file
from transformers import WhisperFeatureExtractor
from transformers.audio_utils import mel_filter_bank, window_function

RATE = 16000
CHUNK = 30 * RATE
RNG = np.random.RandomState(20250107)
ASTERISK_DIR = "/usr/share/asterisk/sounds/en"
ASTERISK_PROMPTS = ["vm-options.wav", "agent-newlocation.wav", "tt-weasels.wav",
                    "all-circuits-busy-now.wav"]


def seconds(s):
    return np.arange(int(round(s * RATE))) / RATE


def signals():
    out = {}
    out["noise"] = (0.1 * RNG.randn(20 * RATE)).astype(np.float32)
    t = seconds(12.0)
    f0, f1 = 60.0, 7900.0  # linear sweep across the whole band
    out["sweep"] = (0.5 * np.sin(2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / 12.0 * t * t))).astype(
        np.float32)
    out["silence"] = np.zeros(5 * RATE, dtype=np.float32)
    t = seconds(3.0)  # quiet enough that part of it falls under the 1e-10 energy floor
    out["near_silence"] = (3e-6 * RNG.randn(len(t)) + 2e-5 * np.sin(2 * np.pi * 300.0 * t)).astype(
        np.float32)
    t = seconds(4.0)
    out["clipped_square"] = np.clip(3.0 * np.sign(np.sin(2 * np.pi * 220.0 * t)), -1, 1).astype(
        np.float32)
    t = seconds(0.6)
    out["short"] = (0.3 * np.sin(2 * np.pi * 440.0 * t) + 0.05 * RNG.randn(len(t))).astype(
        np.float32)
    out["empty"] = np.zeros(0, dtype=np.float32)
    t = seconds(30.0)
    out["exact_30s"] = (0.2 * np.sin(2 * np.pi * 1000.0 * t) * np.sin(2 * np.pi * 0.5 * t) +
                        0.02 * RNG.randn(len(t))).astype(np.float32)
    assert len(out["exact_30s"]) == CHUNK
    return out


def asterisk_speech():
    """Four Asterisk prompts, 8 kHz int16, upsampled to 16 kHz and joined (~24 s)."""
    pieces = []
    for name in ASTERISK_PROMPTS:
        path = os.path.join(ASTERISK_DIR, name)
        if not os.path.exists(path):
            return None, f"{path} is missing (Debian package asterisk-core-sounds-en-wav)"
        with wave.open(path) as w:
            assert w.getnchannels() == 1 and w.getsampwidth() == 2, path
            rate = w.getframerate()
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        x = torch.from_numpy(pcm.astype(np.float32) / 32768.0)
        pieces.append(torchaudio.functional.resample(x, rate, RATE).numpy())
    speech = np.concatenate(pieces).astype(np.float32)
    return speech, None


def float64_bytes(array):
    return np.frombuffer(np.ascontiguousarray(array, "<f8").tobytes(), np.uint8).copy()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    tensors = {}
    notes = []
    cases = signals()
    speech, why_not = asterisk_speech()
    if speech is None:
        notes.append(f"speech: {why_not}")
    else:
        cases["speech"] = speech[:CHUNK]
    long_cases = {}
    if speech is not None:
        joined = np.concatenate([speech, cases["sweep"]]).astype(np.float32)
        long_cases["long_speech"] = joined[:int(34.37 * RATE) + 7]
        assert len(long_cases["long_speech"]) % 160 != 0

    mel_sizes = [80, 128]
    tensors["window"] = float64_bytes(window_function(400, "hann"))
    for n_mels in mel_sizes:
        extractor = WhisperFeatureExtractor(feature_size=n_mels)
        tensors[f"filters/mel{n_mels}"] = float64_bytes(extractor.mel_filters)
        # The same matrix from the public function, as the brief defines it.
        assert np.array_equal(
            extractor.mel_filters,
            mel_filter_bank(num_frequency_bins=201, num_mel_filters=n_mels, min_frequency=0.0,
                            max_frequency=8000.0, sampling_rate=RATE, norm="slaney",
                            mel_scale="slaney"))
        for name, samples in cases.items():
            padded = np.zeros(CHUNK, dtype=np.float32)
            padded[:len(samples)] = samples
            numpy_path = extractor._np_extract_fbank_features(padded[None, :], "cpu")[0]
            if len(samples) > 0:
                torch_path = extractor(samples, sampling_rate=RATE,
                                       return_tensors="np").input_features[0]
            else:  # HF's pad() cannot take an empty batch entry; this is what it would pad to
                torch_path = extractor._torch_extract_fbank_features(padded[None, :], "cpu")[0]
            assert numpy_path.shape == (n_mels, 3000), numpy_path.shape
            assert torch_path.shape == (n_mels, 3000), torch_path.shape
            tensors[f"{name}/mel{n_mels}/numpy"] = np.ascontiguousarray(numpy_path, np.float32)
            tensors[f"{name}/mel{n_mels}/torch"] = np.ascontiguousarray(torch_path, np.float32)
            print(f"{name} mel{n_mels}: numpy vs torch path max |diff| "
                  f"{np.abs(numpy_path - torch_path).max():.3g}")
        for name, samples in long_cases.items():
            numpy_path = extractor._np_extract_fbank_features(samples[None, :], "cpu")[0]
            torch_path = extractor(samples, sampling_rate=RATE, truncation=False,
                                   padding="longest", return_tensors="np").input_features[0]
            frames = len(samples) // 160
            assert numpy_path.shape == (n_mels, frames), numpy_path.shape
            assert torch_path.shape == (n_mels, frames), torch_path.shape
            tensors[f"{name}/mel{n_mels}/whole_numpy"] = np.ascontiguousarray(numpy_path, np.float32)
            tensors[f"{name}/mel{n_mels}/whole_torch"] = np.ascontiguousarray(torch_path, np.float32)
            print(f"{name} mel{n_mels} whole: numpy vs torch path max |diff| "
                  f"{np.abs(numpy_path - torch_path).max():.3g}")
    for name, samples in {**cases, **long_cases}.items():
        tensors[f"{name}/samples"] = np.ascontiguousarray(samples, np.float32)

    meta = {"cases": list(cases.keys()), "long_cases": list(long_cases.keys()),
            "mel_sizes": mel_sizes, "notes": notes}
    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(meta)})
    print(f"wrote {len(tensors)} tensors for {len(cases)} signals to {args.out}")


if __name__ == "__main__":
    main()

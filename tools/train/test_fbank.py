#!/usr/bin/env python3
"""Proves that the batched KaldiFbank of features.py equals torchaudio's
per-utterance torchaudio.compliance.kaldi.fbank (the reference WeNet and oasr
follow) to <= 1e-3 absolute, on random audio of varied lengths, padded into
one batch. Runs on CPU (and on CUDA too when available).

  python3 tools/train/test_fbank.py
"""

import os
import sys

import torch
import torchaudio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from features import KaldiFbank, kaldi_mel_banks, sinc_resample  # noqa: E402

TOLERANCE = 1e-3


def random_audio(gen, samples: int, rate: int) -> torch.Tensor:
    """int16-range audio: tones, noise bursts, exact silence, clipping."""
    t = torch.arange(samples, dtype=torch.float64) / rate
    x = torch.zeros(samples, dtype=torch.float64)
    for _ in range(4):
        freq = float(torch.empty(1).uniform_(80, rate / 2 - 100, generator=gen))
        x += float(torch.rand(1, generator=gen)) * 6000 * torch.sin(2 * torch.pi * freq * t)
    x += torch.randn(samples, generator=gen, dtype=torch.float64) * float(
        torch.rand(1, generator=gen) * 3000)
    if samples > 800:
        start = int(torch.randint(0, samples - 400, (1,), generator=gen))
        x[start:start + 400] = 0.0  # digital silence hits the log floor
    return torch.round(x).clamp(-32768, 32767).float()


def check(rate: int, device: str) -> float:
    gen = torch.Generator().manual_seed(rate)
    lengths = [int(rate * s) for s in (0.026, 0.3, 1.0, 2.37, 3.0)] + [rate * 3 - 17, 199, 250]
    clips = [random_audio(gen, n, rate) for n in lengths]
    batch = torch.zeros(len(clips), max(lengths))
    for i, c in enumerate(clips):
        batch[i, :c.numel()] = c
    fbank = KaldiFbank(sample_rate=rate, device=device)
    feats, counts = fbank(batch.to(device), torch.tensor(lengths, device=device))
    feats, counts = feats.cpu(), counts.cpu()
    worst = 0.0
    for i, c in enumerate(clips):
        if c.numel() < fbank.window_size:
            assert int(counts[i]) == 0, f"{c.numel()} samples must give 0 frames"
            continue
        ref = torchaudio.compliance.kaldi.fbank(c.unsqueeze(0), num_mel_bins=80,
                                                frame_length=25, frame_shift=10, dither=0.0,
                                                energy_floor=0.0, sample_frequency=rate)
        n = int(counts[i])
        assert n == ref.size(0), f"utterance {i}: {n} frames, torchaudio {ref.size(0)}"
        assert torch.all(feats[i, n:] == 0), "padded frames must be zero"
        diff = float((feats[i, :n] - ref).abs().max())
        worst = max(worst, diff)
        assert diff <= TOLERANCE, f"rate {rate} utterance {i}: max abs diff {diff}"
    # A wrong implementation must not pass: a plain Hann window differs.
    assert torch.any((feats[2, :10] - torchaudio.compliance.kaldi.fbank(
        clips[2].unsqueeze(0), num_mel_bins=80, window_type="hanning",
        sample_frequency=rate, dither=0.0)[:10]).abs() > 0.01)
    return worst


def check_mel_banks():
    for rate in (8000, 16000):
        padded = 256 if rate == 8000 else 512
        mine = kaldi_mel_banks(80, padded, float(rate))
        ref, _ = torchaudio.compliance.kaldi.get_mel_banks(80, padded, float(rate), 20.0, 0.0,
                                                           100.0, -500.0, 1.0)
        assert mine.shape == ref.shape and torch.equal(mine, ref), "mel banks differ"


def check_resampler() -> float:
    """The fallback resampler against torchaudio.functional.resample."""
    gen = torch.Generator().manual_seed(3)
    worst = 0.0
    for orig, new in ((16000, 8000), (22050, 8000), (8800, 8000), (7200, 8000), (8000, 16000)):
        wave = random_audio(gen, 12345, orig).unsqueeze(0).repeat(2, 1)
        ref = torchaudio.functional.resample(wave, orig, new)
        mine = sinc_resample(wave, orig, new)
        assert mine.shape == ref.shape, (orig, new, mine.shape, ref.shape)
        worst = max(worst, float((mine - ref).abs().max()))
    assert worst < 0.05, f"resampler differs by {worst} (int16 units)"
    return worst


def main():
    print(f"resampler fallback vs torchaudio: max abs diff {check_resampler():.2e} int16 units")
    check_mel_banks()
    print("mel banks: bit-equal to torchaudio.compliance.kaldi.get_mel_banks")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for rate in (8000, 16000):
            worst = check(rate, device)
            print(f"fbank {device} {rate} Hz: max abs diff vs torchaudio {worst:.2e} "
                  f"(tolerance {TOLERANCE})")
    print("test_fbank: PASS")


if __name__ == "__main__":
    main()

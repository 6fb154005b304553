"""Synthetic test audio for the U2++ oracle: syllable-like sequences of
harmonic tones with moving formants, chirps and band-limited noise bursts, so
that the fbank (and a random-weight encoder) changes from frame to frame."""

from dataclasses import dataclass
from typing import List

import numpy as np


@dataclass(frozen=True)
class UtteranceSpec:
    name: str
    seconds: float
    rate: int = 16000
    channels: int = 1
    leading_silence: float = 0.0  # exact digital zeros (fbank hits its log floor)
    note: str = ""

    @property
    def exact(self) -> bool:
        """True when oasr's frontend can reproduce the reference bit-for-bit
        in principle (16 kHz mono: no resampling, no channel mix)."""
        return self.rate == 16000 and self.channels == 1


UTTERANCES = [
    UtteranceSpec("u01_chirps", 21200 / 16000,
                  note="21200 samples = 131 fbank frames = exactly 32 encoder frames "
                       "(2 chunks of 16)"),
    UtteranceSpec("u02_harmonic", 2.37),
    UtteranceSpec("u03_noise_bursts", 3.51, leading_silence=0.3,
                  note="starts with 0.3 s of exact zeros"),
    UtteranceSpec("u04_mixture", 4.83),
    UtteranceSpec("u05_long", 6.0),
    UtteranceSpec("u06_short", 0.45,
                  note="shorter than one chunk window (67 fbank frames): 10 encoder frames"),
    UtteranceSpec("u07_rate8k", 2.2, rate=8000,
                  note="8 kHz: the frontend must resample to 16 kHz"),
    UtteranceSpec("u08_stereo44k", 1.9, rate=44100, channels=2,
                  note="44.1 kHz stereo: channel mean, then resample to 16 kHz"),
]


def _envelope(n: int, rate: int, rng) -> np.ndarray:
    attack = max(1, int(rate * rng.uniform(0.01, 0.04)))
    release = max(1, int(rate * rng.uniform(0.02, 0.08)))
    env = np.ones(n)
    env[:min(attack, n)] = np.linspace(0, 1, min(attack, n))
    env[n - min(release, n):] *= np.linspace(1, 0, min(release, n))
    return env


def _voiced(n: int, rate: int, rng) -> np.ndarray:
    t = np.arange(n) / rate
    f0 = rng.uniform(90, 260) * (1 + rng.uniform(-0.25, 0.25) * t / max(t[-1], 1e-3))
    phase = 2 * np.pi * np.cumsum(f0) / rate
    f1, f2 = rng.uniform(300, 900), rng.uniform(900, 2600)
    f1_end, f2_end = f1 * rng.uniform(0.7, 1.4), f2 * rng.uniform(0.7, 1.4)
    out = np.zeros(n)
    for h in range(1, 40):
        freq = h * f0
        if freq.max() >= rate / 2 * 0.95:
            break
        formant1 = np.exp(-((freq - np.linspace(f1, f1_end, n)) / 180.0) ** 2)
        formant2 = 0.6 * np.exp(-((freq - np.linspace(f2, f2_end, n)) / 300.0) ** 2)
        out += (formant1 + formant2 + 0.02) * np.sin(h * phase)
    return out


def _chirp(n: int, rate: int, rng) -> np.ndarray:
    lo, hi = rng.uniform(150, 800), rng.uniform(1500, min(6000, rate * 0.45))
    if rng.random() < 0.5:
        lo, hi = hi, lo
    freq = np.geomspace(lo, hi, n)
    return np.sin(2 * np.pi * np.cumsum(freq) / rate)


def _noise(n: int, rate: int, rng) -> np.ndarray:
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1 / rate)
    centre, width = rng.uniform(500, min(6000, rate * 0.4)), rng.uniform(200, 2000)
    spectrum *= np.exp(-((freqs - centre) / width) ** 2)
    out = np.fft.irfft(spectrum, n)
    return out / (np.abs(out).max() + 1e-9)


def synthesize(spec: UtteranceSpec, seed: int) -> np.ndarray:
    """int16 samples: (N,) mono or (N, 2) stereo."""
    rng = np.random.RandomState(seed)
    rate = spec.rate
    total = int(round(spec.seconds * rate))
    signal = np.zeros(total)
    pos = int(spec.leading_silence * rate)
    makers = [_voiced, _voiced, _chirp, _noise]
    while pos < total:
        n = min(int(rate * rng.uniform(0.06, 0.22)), total - pos)
        gap = int(rate * rng.uniform(0.0, 0.06))
        if n > 8:
            seg = makers[rng.randint(len(makers))](n, rate, rng)
            seg = seg / (np.abs(seg).max() + 1e-9) * rng.uniform(0.05, 0.5)
            signal[pos:pos + n] += seg * _envelope(n, rate, rng)
        pos += n + gap
    # a faint noise floor everywhere except the digital silence
    floor = rng.standard_normal(total) * 3e-4
    floor[:int(spec.leading_silence * rate)] = 0.0
    signal += floor
    samples = np.clip(np.round(signal * 32767 * 0.9), -32768, 32767)
    if spec.channels == 1:
        return samples.astype(np.int16)
    other = np.clip(np.round(0.5 * samples + rng.standard_normal(total) * 200),
                    -32768, 32767)
    return np.stack([samples, other], axis=1).astype(np.int16)


def all_utterances() -> List[UtteranceSpec]:
    return list(UTTERANCES)

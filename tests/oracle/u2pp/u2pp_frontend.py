"""WeNet's feature pipeline for U2++ (oracle): WAV I/O, mono mix, resampling,
Kaldi fbank via torchaudio, and WeNet's global-CMVN file handling.

  fbank = torchaudio.compliance.kaldi.fbank(samples_in_int16_range,
              num_mel_bins=80, frame_length=25, frame_shift=10, dither=0.0,
              energy_floor=0.0, sample_frequency=16000)
  (torchaudio defaults: povey window, pre-emphasis 0.97, DC removal, 512-point
  FFT, power spectrum, log with floor float32 eps = 1.1920929e-07, snip_edges)

WeNet multiplies the [-1, 1) float samples of torchaudio.load by 32768, i.e.
it feeds the int16 values themselves; we read int16 PCM and use them as is.
"""

import json
import math
import wave
from typing import Tuple

import numpy as np
import torch
import torchaudio

FBANK_CONF = {"num_mel_bins": 80, "frame_shift": 10, "frame_length": 25, "dither": 0.0}


def write_wav(path: str, samples: np.ndarray, rate: int) -> None:
    """samples: int16 (N,) mono or (N, channels) interleaved."""
    samples = np.asarray(samples, dtype=np.int16)
    channels = 1 if samples.ndim == 1 else samples.shape[1]
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())


def read_wav(path: str) -> Tuple[np.ndarray, int]:
    """Returns int16 samples as (channels, N) and the sample rate."""
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM is used by this oracle")
        channels, rate, count = w.getnchannels(), w.getframerate(), w.getnframes()
        data = np.frombuffer(w.readframes(count), dtype="<i2")
    return data.reshape(count, channels).T.copy(), rate


def to_model_input(samples: np.ndarray, rate: int, model_rate: int = 16000) -> torch.Tensor:
    """(channels, N) int16 -> (1, N') float32 in the int16 range at model_rate.
    Channels are averaged (oasr's rule; WeNet itself keeps channel 0) and
    other rates go through torchaudio.functional.resample, which is what
    WeNet's resample processor uses (oasr uses soxr, so these two steps are
    only approximately reproducible)."""
    wav = torch.from_numpy(samples.astype(np.float32))
    if wav.size(0) > 1:
        wav = wav.mean(dim=0, keepdim=True)
    if rate != model_rate:
        wav = torchaudio.functional.resample(wav, rate, model_rate)
    return wav


def fbank(wav: torch.Tensor, rate: int = 16000) -> torch.Tensor:
    """(1, N) float32 in the int16 range -> (frames, 80) log-mel fbank."""
    return torchaudio.compliance.kaldi.fbank(
        wav, num_mel_bins=FBANK_CONF["num_mel_bins"],
        frame_length=FBANK_CONF["frame_length"], frame_shift=FBANK_CONF["frame_shift"],
        dither=FBANK_CONF["dither"], energy_floor=0.0, sample_frequency=rate)


def cmvn_stats_json(feature_list) -> dict:
    """WeNet's global_cmvn JSON: per-dimension sum, sum of squares, frames
    (what tools/compute_cmvn_stats.py accumulates), in float64."""
    total = np.zeros(FBANK_CONF["num_mel_bins"], dtype=np.float64)
    squares = np.zeros_like(total)
    frames = 0
    for feats in feature_list:
        f = feats.double().numpy()
        total += f.sum(axis=0)
        squares += (f * f).sum(axis=0)
        frames += f.shape[0]
    return {"mean_stat": total.tolist(), "var_stat": squares.tolist(), "frame_num": frames}


def load_json_cmvn(path: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """WeNet's load_cmvn(is_json=True) in float64, then cast to float32 as
    init_model does: mean = sum/n; var = sumsq/n - mean^2 floored at 1e-20;
    istd = 1/sqrt(var)."""
    with open(path) as f:
        stats = json.load(f)
    count = stats["frame_num"]
    means, istds = [], []
    for s, sq in zip(stats["mean_stat"], stats["var_stat"]):
        mean = s / count
        var = sq / count - mean * mean
        var = max(var, 1.0e-20)
        means.append(mean)
        istds.append(1.0 / math.sqrt(var))
    return (torch.tensor(means, dtype=torch.float64).float(),
            torch.tensor(istds, dtype=torch.float64).float())


def apply_cmvn(feats: torch.Tensor, mean: torch.Tensor, istd: torch.Tensor) -> torch.Tensor:
    return (feats - mean) * istd

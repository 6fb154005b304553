"""Batched feature pipeline on the training device: waveform augmentation,
Kaldi fbank (equal to torchaudio.compliance.kaldi.fbank per utterance, see
test_fbank.py), global CMVN statistics and SpecAugment.

Waveforms are float32 (B, N) in the int16 range (what WeNet feeds torchaudio's
fbank), with per-utterance lengths (B,); samples beyond a length are ignored.
"""

import math
from typing import Optional, Tuple

import torch

try:  # only for its resampler; everything here works without torchaudio
    import torchaudio
except ImportError:  # pragma: no cover
    torchaudio = None

SAMPLE_RATE = 8000
FBANK_CONF = {"num_mel_bins": 80, "frame_length": 25, "frame_shift": 10}
# log floor of torchaudio's fbank: float32 machine epsilon
_LOG_FLOOR = torch.finfo(torch.float32).eps


def kaldi_mel_banks(num_bins: int, padded_window: int, sample_rate: float,
                    low_freq: float = 20.0, high_freq: float = 0.0) -> torch.Tensor:
    """Kaldi's triangular mel filters (no VTLN) over the FFT bins, (num_bins,
    padded_window/2), computed in float32 as torchaudio's get_mel_banks does
    (written here because newer torchaudio releases drop parts of
    torchaudio.compliance; test_fbank.py compares the two)."""
    nyquist = 0.5 * sample_rate
    if high_freq <= 0.0:
        high_freq += nyquist
    bin_width = sample_rate / padded_window
    mel_low = 1127.0 * math.log(1.0 + low_freq / 700.0)
    mel_high = 1127.0 * math.log(1.0 + high_freq / 700.0)
    delta = (mel_high - mel_low) / (num_bins + 1)
    index = torch.arange(num_bins).unsqueeze(1)
    left = mel_low + index * delta
    center = mel_low + (index + 1.0) * delta
    right = mel_low + (index + 2.0) * delta
    mel = (1127.0 * (1.0 + bin_width * torch.arange(padded_window // 2) / 700.0).log()).unsqueeze(0)
    up = (mel - left) / (center - left)
    down = (right - mel) / (right - center)
    return torch.max(torch.zeros(1), torch.min(up, down))


class KaldiFbank:
    """torchaudio.compliance.kaldi.fbank with its defaults (povey window,
    preemphasis 0.97, DC removal, snip_edges, power spectrum, FFT padded to a
    power of two, mel banks from 20 Hz to Nyquist, log with an eps floor),
    computed for a padded batch at once."""

    def __init__(self, sample_rate: int = SAMPLE_RATE, num_mel_bins: int = 80,
                 frame_length_ms: float = 25.0, frame_shift_ms: float = 10.0, device="cpu"):
        self.window_size = int(sample_rate * frame_length_ms * 0.001)
        self.window_shift = int(sample_rate * frame_shift_ms * 0.001)
        self.padded = 1 << (self.window_size - 1).bit_length()
        self.window = torch.hann_window(self.window_size, periodic=False,
                                        dtype=torch.float32).pow(0.85).to(device)
        banks = kaldi_mel_banks(num_mel_bins, self.padded, float(sample_rate))
        banks = torch.nn.functional.pad(banks, (0, 1), mode="constant", value=0.0)
        self.banks_t = banks.t().contiguous().float().to(device)  # (padded/2+1, bins)

    def num_frames(self, lengths: torch.Tensor) -> torch.Tensor:
        frames = torch.div(lengths - self.window_size, self.window_shift, rounding_mode="floor") + 1
        return torch.where(lengths >= self.window_size, frames, torch.zeros_like(frames))

    def __call__(self, wave: torch.Tensor, lengths: torch.Tensor, dither: float = 0.0,
                 generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """(B, N) -> fbank (B, F, bins) with padded frames set to 0, frames (B,)."""
        if wave.size(1) < self.window_size:
            wave = torch.nn.functional.pad(wave, (0, self.window_size - wave.size(1)))
        frames = wave.unfold(1, self.window_size, self.window_shift)  # (B, F, W)
        if dither != 0.0:
            noise = torch.randn(frames.shape, device=frames.device, generator=generator)
            frames = frames + noise * dither
        frames = frames - frames.mean(dim=2, keepdim=True)
        previous = torch.cat([frames[:, :, :1], frames[:, :, :-1]], dim=2)
        frames = (frames - 0.97 * previous) * self.window
        frames = torch.nn.functional.pad(frames, (0, self.padded - self.window_size))
        power = torch.fft.rfft(frames).abs().pow(2.0)
        mel = torch.matmul(power, self.banks_t)
        feats = torch.clamp(mel, min=_LOG_FLOOR).log()
        counts = self.num_frames(lengths)
        keep = torch.arange(feats.size(1), device=feats.device).unsqueeze(0) < counts.unsqueeze(1)
        return feats * keep.unsqueeze(2), counts


def cmvn_stats(feats: torch.Tensor, counts: torch.Tensor) -> dict:
    """WeNet's global_cmvn JSON (sums, sums of squares, frame count) over the
    valid frames of a batch, accumulated in float64."""
    keep = (torch.arange(feats.size(1), device=feats.device).unsqueeze(0)
            < counts.unsqueeze(1)).unsqueeze(2)
    f = feats.double() * keep
    return {"mean_stat": f.sum(dim=(0, 1)).cpu().tolist(),
            "var_stat": (f * f).sum(dim=(0, 1)).cpu().tolist(),
            "frame_num": int(counts.sum().item())}


def add_cmvn_stats(total: Optional[dict], part: dict) -> dict:
    if total is None:
        return part
    return {"mean_stat": [a + b for a, b in zip(total["mean_stat"], part["mean_stat"])],
            "var_stat": [a + b for a, b in zip(total["var_stat"], part["var_stat"])],
            "frame_num": total["frame_num"] + part["frame_num"]}


def cmvn_from_stats(stats: dict) -> Tuple[torch.Tensor, torch.Tensor]:
    """WeNet's load_cmvn (json): float64 mean and 1/sqrt(max(var, 1e-20))."""
    count = stats["frame_num"]
    mean = torch.tensor(stats["mean_stat"], dtype=torch.float64) / count
    var = torch.tensor(stats["var_stat"], dtype=torch.float64) / count - mean * mean
    istd = 1.0 / torch.sqrt(torch.clamp(var, min=1e-20))
    return mean.float(), istd.float()


def sinc_resample(wave: torch.Tensor, orig: int, new: int, width: int = 6,
                  rolloff: float = 0.99) -> torch.Tensor:
    """Band-limited resampling of (B, N) by a Hann-windowed sinc polyphase
    filter: the method and defaults of torchaudio.functional.resample, kept
    here as a fallback for torchaudio builds without it (test_fbank.py
    compares the two)."""
    g = math.gcd(orig, new)
    orig, new = orig // g, new // g
    if orig == new:
        return wave
    base = min(orig, new) * rolloff
    half = int(math.ceil(width * orig / base))
    taps = torch.arange(-half, half + orig, dtype=torch.float64, device=wave.device) / orig
    t = (torch.arange(0, -new, -1, dtype=torch.float64, device=wave.device).view(-1, 1) / new
         + taps.view(1, -1)) * base
    t = t.clamp(-width, width)
    window = torch.cos(t * math.pi / width / 2) ** 2
    t = t * math.pi
    safe = torch.where(t == 0, torch.ones_like(t), t)
    kernel = torch.where(t == 0, torch.ones_like(t), torch.sin(safe) / safe) * window * (base /
                                                                                      orig)
    b, n = wave.shape
    x = torch.nn.functional.pad(wave.unsqueeze(1), (half, half + orig))
    y = torch.nn.functional.conv1d(x, kernel.to(wave.dtype).unsqueeze(1), stride=orig)
    y = y.transpose(1, 2).reshape(b, -1)
    return y[:, :int(math.ceil(new * n / orig))]


def resample(wave: torch.Tensor, orig: int, new: int) -> torch.Tensor:
    """(B, N) from rate `orig` to `new` (torchaudio's when available)."""
    functional = getattr(torchaudio, "functional", None)
    if functional is not None and hasattr(functional, "resample"):
        return functional.resample(wave, orig, new)
    return sinc_resample(wave, orig, new)


def _uniform(shape, lo, hi, device, generator):
    return lo + (hi - lo) * torch.rand(shape, device=device, generator=generator)


def _valid_mask(lengths, n):
    return torch.arange(n, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


def speed_perturb(wave, lengths, speed: float):
    """Sox-style speed change (pitch and tempo) by resampling: the audio is
    read as if recorded at rate*speed."""
    if speed == 1.0:
        return wave, lengths
    orig, new = int(round(SAMPLE_RATE * speed)), SAMPLE_RATE
    g = math.gcd(orig, new)
    out = resample(wave, orig // g, new // g)
    new_lengths = torch.div(lengths * (new // g) + (orig // g) - 1, orig // g,
                            rounding_mode="floor")
    return out, torch.clamp(new_lengths, max=out.size(1))


class Augmenter:
    """Per-utterance random waveform augmentation, vectorized over the batch.
    Probabilities and ranges are the training config's (see README)."""

    def __init__(self, device, noise_prob=0.7, snr_db=(5.0, 30.0), telephone_prob=0.8,
                 low_edge=(200.0, 400.0), high_edge=(3000.0, 3800.0), tilt_db_per_octave=3.0,
                 gain_db=(-14.0, 6.0), mulaw_prob=0.15, speeds=(0.9, 1.0, 1.1)):
        self.device = device
        self.noise_prob = noise_prob
        self.snr_db = snr_db
        self.telephone_prob = telephone_prob
        self.low_edge = low_edge
        self.high_edge = high_edge
        self.tilt = tilt_db_per_octave
        self.gain_db = gain_db
        self.mulaw_prob = mulaw_prob
        self.speeds = speeds

    def __call__(self, wave, lengths, synthetic, generator=None):
        """wave (B,N), lengths (B,), synthetic bool (B,). Returns the augmented
        wave (int16-valued floats, zero beyond each length) and new lengths."""
        dev = wave.device
        b = wave.size(0)
        pick = int(torch.randint(len(self.speeds), (1,), generator=None).item())
        wave, lengths = speed_perturb(wave, lengths, self.speeds[pick])
        n = wave.size(1)
        valid = _valid_mask(lengths, n)
        # Frequency-domain filtering: telephone band (synthetic speech) and a
        # spectral tilt (all). Zero padding keeps the circular wrap-around of
        # the short filter responses out of the speech.
        # Rounded up to a multiple of 8192 so that cuFFT sees few distinct,
        # power-of-two-friendly sizes (one plan each) instead of one per batch.
        nfft = -(-(n + 512) // 8192) * 8192
        spec = torch.fft.rfft(wave, n=nfft)
        freqs = torch.fft.rfftfreq(nfft, 1.0 / SAMPLE_RATE).to(dev).unsqueeze(0)
        f = freqs.clamp(min=1.0)
        low = _uniform((b, 1), *self.low_edge, dev, generator)
        high = _uniform((b, 1), *self.high_edge, dev, generator)
        band = 1.0 / torch.sqrt((1 + (low / f) ** 8) * (1 + (f / high) ** 8))
        use_band = synthetic.unsqueeze(1) & (torch.rand((b, 1), device=dev, generator=generator)
                                             < self.telephone_prob)
        response = torch.where(use_band, band, torch.ones_like(band))
        tilt = _uniform((b, 1), -self.tilt, self.tilt, dev, generator)
        tilt_db = (tilt * torch.log2(f.clamp(min=60.0) / 1000.0)).clamp(-12.0, 12.0)
        response = response * torch.pow(10.0, tilt_db / 20.0)
        wave = torch.fft.irfft(spec * response, n=nfft)[:, :n] * valid
        # Level: a random gain relative to a -20 dBFS RMS.
        power = (wave * wave).sum(1) / lengths.clamp(min=1)
        target = 32768.0 * 10 ** (-20.0 / 20) * torch.pow(
            10.0, _uniform((b,), *self.gain_db, dev, generator) / 20.0)
        wave = wave * (target / torch.sqrt(power + 1e-3)).unsqueeze(1)
        power = (wave * wave).sum(1) / lengths.clamp(min=1)
        # Noise: white / pink / brown (1/f^beta spectra) or babble (the sum of
        # three other utterances of the batch), at a random SNR.
        white = torch.randn((b, nfft), device=dev, generator=generator)
        beta = torch.randint(0, 3, (b, 1), device=dev, generator=generator).float()
        colored = torch.fft.irfft(
            torch.fft.rfft(white) * torch.pow(f.clamp(min=20.0) / 1000.0, -beta / 2),
            n=nfft)[:, :n]
        babble = sum(torch.roll(wave, k, dims=0) for k in (1, 2, 3)) if b > 3 else colored
        use_babble = torch.rand((b, 1), device=dev, generator=generator) < 0.25
        noise = torch.where(use_babble, babble, colored) * valid
        noise_power = (noise * noise).sum(1) / lengths.clamp(min=1)
        snr = _uniform((b,), *self.snr_db, dev, generator)
        scale = torch.sqrt(power / (noise_power * torch.pow(10.0, snr / 10.0) + 1e-6))
        use_noise = torch.rand((b,), device=dev, generator=generator) < self.noise_prob
        wave = wave + noise * (scale * use_noise).unsqueeze(1)
        wave = wave.clamp(-32768.0, 32767.0)
        # Occasional mu-law round trip (telephone codec).
        mu = 255.0
        x = wave / 32768.0
        coded = torch.sign(x) * torch.log1p(mu * x.abs()) / math.log1p(mu)
        coded = torch.round((coded + 1) / 2 * mu) / mu * 2 - 1
        decoded = torch.sign(coded) * (torch.pow(1 + mu, coded.abs()) - 1) / mu * 32768.0
        use_mulaw = (torch.rand((b, 1), device=dev, generator=generator) < self.mulaw_prob)
        wave = torch.where(use_mulaw, decoded, wave)
        return torch.round(wave).clamp(-32768.0, 32767.0) * valid, lengths


def spec_augment(feats, counts, fill: torch.Tensor, generator=None, freq_masks=2, freq_width=10,
                 time_masks=2, time_width=50):
    """WeNet's spec_aug: `freq_masks` bands of <= freq_width bins and
    `time_masks` spans of <= time_width frames (within each utterance) are
    replaced by `fill` (the CMVN mean, i.e. 0 after normalization)."""
    b, t, d = feats.shape
    dev = feats.device
    mask = torch.zeros((b, t, d), dtype=torch.bool, device=dev)
    bins = torch.arange(d, device=dev).view(1, 1, d)
    steps = torch.arange(t, device=dev).view(1, t, 1)
    for _ in range(freq_masks):
        width = torch.randint(0, freq_width + 1, (b, 1, 1), device=dev, generator=generator)
        start = (torch.rand((b, 1, 1), device=dev, generator=generator) * (d - width)).long()
        mask |= (bins >= start) & (bins < start + width)
    for _ in range(time_masks):
        limit = torch.minimum(torch.full_like(counts, time_width), counts // 5).view(b, 1, 1)
        width = (torch.rand((b, 1, 1), device=dev, generator=generator) * (limit + 1)).long()
        start = (torch.rand((b, 1, 1), device=dev, generator=generator)
                 * (counts.view(b, 1, 1) - width).clamp(min=0)).long()
        mask |= (steps >= start) & (steps < start + width)
    return torch.where(mask, fill.view(1, 1, d).to(feats.dtype), feats)

#!/usr/bin/env python3
"""Oracle for the audio front end (src/audio): Kaldi fbank and decoding.

Writes audio files into OUT and OUT/cases.safetensors with
  fbank/<case>/expected   torchaudio.compliance.kaldi.fbank of the file's
                          samples, scaled to the int16 range as WeNet does
  decode/<case>/expected  the samples a decoder must return for the file
and the metadata key "cases": JSON {"fbank": [...], "decode": [...]} giving
each case's file, rate, and (fbank) the complete torchaudio keyword
arguments, every one spelled out so torchaudio's own defaults (energy_floor
1.0, num_mel_bins 23) never leak in.

Signals are synthetic (no speech recordings ship with the machine and none
are downloaded): sine mixtures, a chirp, white noise, near-silence, digital
silence, a clipped square wave, a formant-synthesised "speech-like" signal
(voiced segments with moving pitch and formants, fricative noise bursts,
pauses), and lengths around one frame. Everything is quantised to int16
first, so the file holds exactly the samples PyTorch saw.
"""

import argparse
import json
import math
import os
import struct
import wave

import numpy as np
import torch
import torchaudio
import torchaudio.compliance.kaldi as kaldi
from safetensors.torch import save_file

RNG = np.random.RandomState(20240611)
TENSORS = {}
FBANK_CASES = []
DECODE_CASES = []


# ---- signals -------------------------------------------------------------------


def to_int16(x):
    return np.clip(np.round(np.asarray(x) * 32768.0), -32768, 32767).astype(np.int16)


def times(seconds, rate):
    return np.arange(int(round(seconds * rate))) / rate


def sine_mix(seconds, rate, parts):
    t = times(seconds, rate)
    return sum(a * np.sin(2 * np.pi * f * t + p) for f, a, p in parts)


def chirp(seconds, rate, f0, f1, amplitude):
    t = times(seconds, rate)
    k = (f1 - f0) / seconds
    return amplitude * np.sin(2 * np.pi * (f0 * t + 0.5 * k * t * t))


def resonator(x, rate, freqs, bandwidth):
    """Two-pole resonator with a per-sample centre frequency (unit DC gain)."""
    y = np.zeros_like(x)
    y1 = y2 = 0.0
    r = math.exp(-math.pi * bandwidth / rate)
    for n in range(len(x)):
        c = 2 * r * math.cos(2 * math.pi * freqs[n] / rate)
        gain = 1 - c + r * r
        y0 = gain * x[n] + c * y1 - r * r * y2
        y[n] = y0
        y2, y1 = y1, y0
    return y


def speech_like(seconds, rate):
    """Vowel-like buzz through three moving formants, fricative noise bursts
    and quiet pauses: the spectral shapes and dynamics of speech without a
    recording."""
    t = times(seconds, rate)
    f0 = 120 + 40 * np.sin(2 * np.pi * 1.3 * t)
    phase = np.cumsum(f0 / rate)
    buzz = (phase % 1.0) - 0.5
    formants = [
        (550 + 250 * np.sin(2 * np.pi * 0.9 * t), 90),
        (1500 + 700 * np.sin(2 * np.pi * 0.6 * t + 1.0), 130),
        (2700 + 300 * np.sin(2 * np.pi * 0.4 * t + 2.0), 180),
    ]
    voiced = np.zeros_like(buzz)
    for freqs, bw in formants:
        freqs = np.minimum(freqs, 0.45 * rate)
        voiced += resonator(buzz, rate, freqs, bw)
    noise = RNG.standard_normal(len(t))
    fricative = noise - np.concatenate([[0.0], noise[:-1]])  # first difference: high-pass
    segment = (t * 4).astype(int) % 5  # 0.25 s segments: voiced x3, fricative, pause
    envelope = np.minimum(1.0, np.minimum(t, seconds - t) * 40)
    out = np.where(segment < 3, voiced / np.max(np.abs(voiced)) * 0.6, 0.0)
    out = out + np.where(segment == 3, fricative * 0.05, 0.0)
    out = out + noise * 3e-4  # room noise everywhere, pauses included
    return out * envelope


def clipped_square(seconds, rate, freq):
    # Period (165 samples at 16 kHz) shorter than a frame, so no frame is
    # constant; clipping at full scale exercises the int16 extremes.
    t = times(seconds, rate)
    return np.clip(1.3 * np.sign(np.sin(2 * np.pi * freq * t + 0.1)), -1.0, 32767 / 32768)


# ---- files ---------------------------------------------------------------------


def write_wav(path, pcm, rate, sample_width=2):
    """pcm: int array, [n] or [n, channels], already in the target width."""
    pcm = np.asarray(pcm)
    channels = 1 if pcm.ndim == 1 else pcm.shape[1]
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(sample_width)
        w.setframerate(rate)
        if sample_width == 1:
            data = pcm.astype(np.uint8).tobytes()
        elif sample_width == 2:
            data = pcm.astype("<i2").tobytes()
        elif sample_width == 3:
            v = pcm.astype("<i4").reshape(-1)
            data = np.stack([v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFF], axis=1)
            data = data.astype(np.uint8).tobytes()
        else:
            raise ValueError(sample_width)
        w.writeframes(data)


def write_float_wav(path, samples, rate):
    """Mono IEEE-float WAV (format tag 3) holding `samples` bit for bit;
    `wave` writes only integer PCM and sox clips floats to [-1, 1]."""
    data = np.asarray(samples, dtype="<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    fact = struct.pack("<I", len(samples))
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"fact" +
            struct.pack("<I", len(fact)) + fact + b"data" + struct.pack("<I", len(data)) + data)
    with open(path, "wb") as out:
        out.write(b"RIFF" + struct.pack("<I", len(body)) + body)


# ---- fbank cases ---------------------------------------------------------------


def wenet_kwargs(rate, **overrides):
    """WeNet's call (processor.compute_fbank) with torchaudio's remaining
    defaults written out."""
    kwargs = dict(
        num_mel_bins=80, frame_length=25.0, frame_shift=10.0, dither=0.0, energy_floor=0.0,
        sample_frequency=float(rate), snip_edges=True, preemphasis_coefficient=0.97,
        remove_dc_offset=True, window_type="povey", blackman_coeff=0.42,
        round_to_power_of_two=True, use_energy=False, raw_energy=True, htk_compat=False,
        use_log_fbank=True, use_power=True, low_freq=20.0, high_freq=0.0)
    kwargs.update(overrides)
    return kwargs


def add_fbank_case(group, name, out_dir, signal, rate, **overrides):
    pcm = to_int16(signal)
    file = f"fbank_{name}.wav"
    write_wav(os.path.join(out_dir, file), pcm, rate)
    # What WeNet does: torchaudio.load ([-1, 1) floats), then * 2^15.
    loaded, loaded_rate = torchaudio.load(os.path.join(out_dir, file))
    assert loaded_rate == rate
    assert torch.equal(loaded[0], torch.from_numpy(pcm.astype(np.float32) / 32768))
    waveform = loaded * (1 << 15)
    kwargs = wenet_kwargs(rate, **overrides)
    refused = False
    try:
        feats = kaldi.fbank(waveform, **kwargs)
    except AssertionError:
        # torchaudio refuses a signal shorter than one window; Kaldi (and
        # oasr) return no frames. Only the frame count is checked then.
        refused = True
        dim = kwargs["num_mel_bins"] + (1 if kwargs["use_energy"] else 0)
        feats = torch.zeros((0, dim), dtype=torch.float32)
    TENSORS[f"fbank/{name}/expected"] = feats.contiguous().clone()
    if not refused:
        # The same computation in float64: the features without float32
        # rounding in the signal path (torchaudio builds its mel filters in
        # float32 either way, so both references share the same filters).
        exact = kaldi.fbank(waveform.double(), **kwargs)
        TENSORS[f"fbank/{name}/expected_f64"] = exact.float().contiguous()
    FBANK_CASES.append({"group": group, "name": name, "file": file, "sample_rate": rate,
                        "num_samples": int(len(pcm)), "torchaudio_refused": refused,
                        "kwargs": kwargs})


def fbank_cases(out_dir):
    r = 16000
    add_fbank_case("wenet_16k", "sine_mix", out_dir,
                   sine_mix(2.0, r, [(220, 0.3, 0.0), (1234.5, 0.2, 1.0), (5000, 0.1, 2.0)]), r)
    add_fbank_case("wenet_16k", "chirp", out_dir, chirp(1.5, r, 100, 7900, 0.5), r)
    add_fbank_case("wenet_16k", "white_noise", out_dir, RNG.uniform(-0.3, 0.3, r), r)
    add_fbank_case("wenet_16k", "near_silence", out_dir, RNG.randint(-2, 3, r) / 32768.0, r)
    add_fbank_case("wenet_16k", "digital_silence", out_dir, np.zeros(r // 2), r)
    add_fbank_case("wenet_16k", "clipped_square", out_dir, clipped_square(1.0, r, 97), r)
    speech16 = speech_like(2.5, r)
    add_fbank_case("wenet_16k", "speech_like", out_dir, speech16, r)
    add_fbank_case("around_one_frame", "short_30ms", out_dir, speech16[4000:4480], r)
    add_fbank_case("around_one_frame", "len_400", out_dir, speech16[4000:4400], r)
    add_fbank_case("around_one_frame", "len_401", out_dir, speech16[4000:4401], r)
    add_fbank_case("around_one_frame", "len_399", out_dir, speech16[4000:4399], r)
    # 560 samples: exactly two frames.
    add_fbank_case("around_one_frame", "len_560", out_dir, speech16[4000:4560], r)

    # 8 kHz: WeNet's settings at 8 kHz (200-sample window, 256-point FFT), and
    # a classic Kaldi 8 kHz set-up (40 bins, upper edge 200 Hz below Nyquist).
    speech8 = speech_like(2.0, 8000)
    add_fbank_case("other_rates", "speech_like_8k", out_dir, speech8, 8000)
    add_fbank_case("other_rates", "sine_mix_8k_kaldi40", out_dir,
                   sine_mix(1.0, 8000, [(300, 0.3, 0.0), (1800, 0.2, 0.5), (3500, 0.05, 1.0)]),
                   8000, num_mel_bins=40, high_freq=-200.0)
    # Other rates: 551-sample window in a 1024-point FFT; 1102 in 2048.
    add_fbank_case("other_rates", "speech_like_22050", out_dir, speech_like(1.0, 22050), 22050)
    add_fbank_case("other_rates", "speech_like_44100", out_dir, speech_like(0.6, 44100), 44100)

    # Each non-WeNet option on the 16 kHz speech-like signal (1 s).
    s = speech16[:r]
    options = {
        "opt_energy_raw_floor1": dict(use_energy=True, energy_floor=1.0),
        "opt_energy_windowed_htk": dict(use_energy=True, raw_energy=False, htk_compat=True),
        "opt_linear_magnitude": dict(use_log_fbank=False, use_power=False),
        "opt_hamming": dict(window_type="hamming"),
        "opt_hanning": dict(window_type="hanning"),
        "opt_rectangular": dict(window_type="rectangular"),
        "opt_blackman": dict(window_type="blackman", blackman_coeff=0.4),
        "opt_no_snip_edges": dict(snip_edges=False),
        "opt_fft_400": dict(round_to_power_of_two=False),
        "opt_no_preemph_no_dc": dict(preemphasis_coefficient=0.0, remove_dc_offset=False),
        "opt_20ms_5ms_40bins_band": dict(frame_length=20.0, frame_shift=5.0, num_mel_bins=40,
                                         low_freq=64.0, high_freq=7600.0),
        "opt_23_bins_neg_high": dict(num_mel_bins=23, high_freq=-400.0),
    }
    for name, overrides in options.items():
        add_fbank_case("options", name, out_dir, s, r, **overrides)
    # snip_edges=False on a length that is not a whole number of shifts.
    add_fbank_case("options", "opt_no_snip_edges_odd_len", out_dir, speech16[:4567], r,
                   snip_edges=False)


# ---- decode cases --------------------------------------------------------------


def add_decode_case(name, file, expected, rate, kind, **extra):
    TENSORS[f"decode/{name}/expected"] = torch.as_tensor(expected, dtype=torch.float32)
    DECODE_CASES.append({"name": name, "file": file, "sample_rate": rate, "kind": kind, **extra})


def decode_cases(out_dir):
    r = 16000
    pcm = to_int16(speech_like(0.5, r))
    write_wav(os.path.join(out_dir, "int16_mono.wav"), pcm, r)
    # x / 32768 is exact in float64 and in float32: the decoder must agree bitwise.
    add_decode_case("int16_mono", "int16_mono.wav", pcm / 32768.0, r, "exact")

    left = to_int16(sine_mix(0.3, r, [(440, 0.5, 0.0)]))
    right = to_int16(RNG.uniform(-0.4, 0.4, len(left)))
    write_wav(os.path.join(out_dir, "stereo.wav"), np.stack([left, right], axis=1), r)
    mono = (left.astype(np.float64) + right) / 2 / 32768.0  # exact: 17 significant bits
    add_decode_case("stereo_average", "stereo.wav", mono, r, "exact")

    pcm24 = np.clip(np.round(RNG.uniform(-0.9, 0.9, 3000) * 2**23), -2**23, 2**23 - 1)
    write_wav(os.path.join(out_dir, "int24.wav"), pcm24.astype(np.int32), r, sample_width=3)
    add_decode_case("int24_mono", "int24.wav", pcm24 / 2.0**23, r, "exact")

    pcm8 = RNG.randint(0, 256, 2000)
    write_wav(os.path.join(out_dir, "uint8.wav"), pcm8, 8000, sample_width=1)
    add_decode_case("uint8_mono", "uint8.wav", (pcm8 - 128) / 128.0, 8000, "exact")

    # Float WAV with values outside [-1, 1): passed through unclipped, as
    # torchaudio.load does.
    loud = np.array([0.0, 0.5, -0.25, 1.5, -2.0, 0.125, 1e-3, -1.0, 3.0e-8], dtype=np.float32)
    write_float_wav(os.path.join(out_dir, "float32.wav"), loud, r)
    add_decode_case("float32_unclipped", "float32.wav", loud, r, "exact")

    # FLAC (lossless, so exact) and Ogg Vorbis (lossy: the expectation is
    # libvorbis's decode as torchaudio's sox backend returns it) when this
    # torchaudio build can write them.
    x = torch.from_numpy(pcm.astype(np.float32) / 32768).unsqueeze(0)
    try:
        torchaudio.save(os.path.join(out_dir, "flac16.flac"), x, r, format="flac",
                        bits_per_sample=16)
        back, _ = torchaudio.load(os.path.join(out_dir, "flac16.flac"))
        assert torch.equal(back, x), "FLAC round trip in torchaudio is not lossless"
        add_decode_case("flac16", "flac16.flac", pcm / 32768.0, r, "exact")
    except RuntimeError as error:
        DECODE_CASES.append({"name": "flac16", "unavailable": str(error)})
    try:
        torchaudio.save(os.path.join(out_dir, "vorbis.ogg"), x, r, format="ogg")
        back, back_rate = torchaudio.load(os.path.join(out_dir, "vorbis.ogg"))
        add_decode_case("ogg_vorbis", "vorbis.ogg", back[0], back_rate, "lossy_reference")
    except RuntimeError as error:
        DECODE_CASES.append({"name": "ogg_vorbis", "unavailable": str(error)})

    # 8 kHz -> 16 kHz: three tones inside soxr's passband (< 0.913 * 4 kHz).
    tones = [(300, 0.3, 0.2), (1000, 0.25, 1.1), (2500, 0.2, 2.3)]
    pcm8k = to_int16(sine_mix(0.5, 8000, tones))
    write_wav(os.path.join(out_dir, "tones_8k.wav"), pcm8k, 8000)
    t16 = np.arange(2 * len(pcm8k)) / 16000.0
    analytic = sum(a * np.sin(2 * np.pi * f * t16 + p) for f, a, p in tones)
    ta = torchaudio.functional.resample(
        torch.from_numpy(pcm8k.astype(np.float32) / 32768), 8000, 16000)
    TENSORS["decode/resample_8k_16k/torchaudio"] = ta.contiguous()
    add_decode_case("resample_8k_16k", "tones_8k.wav", analytic, 16000, "resampled",
                    source_rate=8000)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    fbank_cases(args.out)
    decode_cases(args.out)
    meta = {"cases": json.dumps({"fbank": FBANK_CASES, "decode": DECODE_CASES})}
    save_file(TENSORS, os.path.join(args.out, "cases.safetensors"), metadata=meta)


if __name__ == "__main__":
    main()

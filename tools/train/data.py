"""Training data on the device: jsonl manifests, a dependency-free WAV reader,
all audio resampled once to 8 kHz and kept in device memory as one flat
tensor, and duration-bucketed batches with a share of real speech.

Manifest lines: {"id", "audio" (relative to the manifest's folder), "text"
(uppercase A-Z, apostrophe, spaces), "duration"[, "voice"]}. An utterance
with a "voice" field is synthetic (TTS) speech; one without it is real.
"""

import glob
import json
import math
import os
import random
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from features import SAMPLE_RATE, resample

# ---- units --------------------------------------------------------------------------

WORD_BOUNDARY = "\u2581"  # "▁", WeNet's mark for a space in char units
UNITS = ["<blank>", "<unk>", "'"] + [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [
    WORD_BOUNDARY, "<sos/eos>"
]
UNIT_ID = {u: i for i, u in enumerate(UNITS)}


def text_to_ids(text: str) -> List[int]:
    """WeNet's CharTokenizer: every character a unit, a space becomes '▁'."""
    words = text.strip().upper().split()
    ids: List[int] = []
    for w, word in enumerate(words):
        if w:
            ids.append(UNIT_ID[WORD_BOUNDARY])
        ids.extend(UNIT_ID.get(ch, UNIT_ID["<unk>"]) for ch in word)
    return ids


def ids_to_text(ids: Sequence[int]) -> str:
    text = "".join(UNITS[i] for i in ids if 1 < i < len(UNITS) - 1 or i == 1)
    return " ".join(text.replace(WORD_BOUNDARY, " ").split())


def write_units(path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i, u in enumerate(UNITS):
            f.write(f"{u} {i}\n")


# ---- manifests and WAV ------------------------------------------------------------------


def read_manifest(path: str) -> List[dict]:
    base = os.path.dirname(os.path.abspath(path))
    out = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            entry = json.loads(line)
            for key in ("id", "audio", "text"):
                if key not in entry:
                    raise ValueError(f"{path}:{number}: missing '{key}'")
            entry["path"] = entry["audio"] if os.path.isabs(entry["audio"]) else os.path.join(
                base, entry["audio"])
            out.append(entry)
    return out


def find_manifests(data_dir: str, role: str) -> List[str]:
    """role 'train' | 'dev' | 'test': every *.jsonl under data_dir (two
    levels deep) whose file name contains the role (calibration excluded)."""
    found = []
    for pattern in ("*.jsonl", "*/*.jsonl", "*/*/*.jsonl"):
        for p in sorted(glob.glob(os.path.join(data_dir, pattern))):
            name = os.path.basename(p).lower()
            if role in name and "calib" not in name:
                found.append(p)
    return found


def _ulaw_table() -> np.ndarray:
    codes = ~np.arange(256, dtype=np.uint8)
    sign = codes & 0x80
    exponent = (codes >> 4) & 0x07
    mantissa = codes & 0x0F
    magnitude = ((mantissa.astype(np.int32) << 3) + 0x84) << exponent
    return np.where(sign != 0, 0x84 - magnitude, magnitude - 0x84).astype(np.float32)


def _alaw_table() -> np.ndarray:
    codes = np.arange(256, dtype=np.uint8) ^ 0x55
    exponent = (codes >> 4) & 0x07
    mantissa = (codes & 0x0F).astype(np.int32)
    magnitude = np.where(exponent == 0, (mantissa << 4) + 8,
                         ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0))
    return np.where(codes & 0x80, magnitude, -magnitude).astype(np.float32)


def read_wav(path: str) -> Tuple[np.ndarray, int]:
    """Mono float32 samples in the int16 range and the rate. PCM 8/16/24/32,
    float, mu-law, A-law; channels are averaged."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError(f"{path}: not a RIFF/WAVE file")
    pos, fmt, payload = 12, None, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if cid == b"fmt ":
            fmt = struct.unpack("<HHIIHH", body[:16])
            if fmt[0] == 0xFFFE and len(body) >= 26:  # WAVE_FORMAT_EXTENSIBLE
                fmt = (struct.unpack("<H", body[24:26])[0],) + fmt[1:]
        elif cid == b"data":
            payload = body
        pos += 8 + size + (size & 1)
    if fmt is None or payload is None:
        raise ValueError(f"{path}: no fmt or data chunk")
    tag, channels, rate, _, _, bits = fmt
    if tag == 1 and bits == 16:
        x = np.frombuffer(payload[:len(payload) // 2 * 2], "<i2").astype(np.float32)
    elif tag == 1 and bits == 8:
        x = (np.frombuffer(payload, np.uint8).astype(np.float32) - 128.0) * 256.0
    elif tag == 1 and bits == 24:
        b = np.frombuffer(payload[:len(payload) // 3 * 3], np.uint8).reshape(-1, 3).astype(np.int32)
        x = ((b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 8 >> 8).astype(np.float32) / 256.0
    elif tag == 1 and bits == 32:
        x = np.frombuffer(payload[:len(payload) // 4 * 4], "<i4").astype(np.float32) / 65536.0
    elif tag == 3:
        x = np.frombuffer(payload[:len(payload) // 4 * 4], "<f4").astype(np.float32) * 32768.0
    elif tag == 7:
        x = _ulaw_table()[np.frombuffer(payload, np.uint8)]
    elif tag == 6:
        x = _alaw_table()[np.frombuffer(payload, np.uint8)]
    else:
        raise ValueError(f"{path}: WAV format {tag} with {bits} bits is not supported")
    if channels > 1:
        x = x[:len(x) // channels * channels].reshape(-1, channels).mean(axis=1)
    return x, rate


# ---- device store ---------------------------------------------------------------------


class AudioStore:
    """Every utterance at 8 kHz in one flat device tensor, plus the padded
    token matrix. gather() builds a padded batch with tensor ops only."""

    def __init__(self, entries: List[dict], device, workers: int = 16, log=print):
        self.entries = entries
        self.device = device
        with ThreadPoolExecutor(max_workers=workers) as pool:
            loaded = list(pool.map(read_wav, [e["path"] for e in entries]))
        by_rate: Dict[int, List[int]] = {}
        for i, (_, rate) in enumerate(loaded):
            by_rate.setdefault(rate, []).append(i)
        pieces: List[Optional[torch.Tensor]] = [None] * len(entries)
        for rate, idx in by_rate.items():
            for start in range(0, len(idx), 256):
                part = idx[start:start + 256]
                if rate == SAMPLE_RATE:
                    for i in part:
                        pieces[i] = torch.from_numpy(loaded[i][0]).to(device)
                    continue
                longest = max(len(loaded[i][0]) for i in part)
                batch = torch.zeros(len(part), longest)
                for row, i in enumerate(part):
                    batch[row, :len(loaded[i][0])] = torch.from_numpy(loaded[i][0])
                g = math.gcd(rate, SAMPLE_RATE)
                out = resample(batch.to(device), rate // g, SAMPLE_RATE // g)
                for row, i in enumerate(part):
                    n = int(math.ceil(len(loaded[i][0]) * SAMPLE_RATE / rate))
                    pieces[i] = out[row, :n].clone()
            log(f"  {len(idx)} utterances at {rate} Hz")
        lengths = [p.numel() for p in pieces]
        self.lengths_cpu = torch.tensor(lengths, dtype=torch.long)
        self.lengths = self.lengths_cpu.to(device)
        self.offsets = torch.tensor([0] + lengths[:-1], dtype=torch.long).cumsum(0).to(device)
        self.audio = torch.cat(pieces).round().clamp(-32768, 32767)
        self.synthetic = torch.tensor(["voice" in e for e in entries], device=device)
        ids = [text_to_ids(e["text"]) for e in entries]
        self.token_lens_cpu = torch.tensor([len(t) for t in ids], dtype=torch.long)
        tokens = torch.full((len(ids), max(len(t) for t in ids)), -1, dtype=torch.long)
        for i, t in enumerate(ids):
            tokens[i, :len(t)] = torch.tensor(t, dtype=torch.long)
        self.tokens = tokens.to(device)
        self.token_lens = self.token_lens_cpu.to(device)
        self.seconds = float(self.lengths_cpu.sum()) / SAMPLE_RATE

    def gather(self, idx_cpu: torch.Tensor):
        """Padded (B, N) audio, lengths, tokens (B, L), token lengths, synthetic."""
        n = int(self.lengths_cpu[idx_cpu].max())
        l_max = int(self.token_lens_cpu[idx_cpu].max())
        idx = idx_cpu.to(self.device, non_blocking=True)
        lengths = self.lengths[idx]
        pos = torch.arange(n, device=self.device).unsqueeze(0)
        where = (self.offsets[idx].unsqueeze(1) + pos).clamp(max=self.audio.numel() - 1)
        wave = self.audio[where] * (pos < lengths.unsqueeze(1))
        return (wave, lengths, self.tokens[idx, :l_max], self.token_lens[idx],
                self.synthetic[idx])


class BatchPlan:
    """Epochs of batches over the synthetic pool, each topped up with real
    utterances so that about `real_share` of each batch's audio is real.
    Batches are bucketed by duration and limited by padded audio seconds."""

    def __init__(self, lengths: torch.Tensor, synthetic: torch.Tensor, batch_seconds: float,
                 real_share: float, seed: int, max_utts: int = 1024):
        self.lengths = lengths.tolist()
        syn = synthetic.cpu().tolist()
        self.synth = [i for i, s in enumerate(syn) if s]
        self.real = sorted((i for i, s in enumerate(syn) if not s), key=lambda i: self.lengths[i])
        if not self.synth:  # only real speech: it plays the synthetic role
            self.synth, self.real = self.real, []
        self.budget = batch_seconds * SAMPLE_RATE
        self.real_share = real_share if self.real else 0.0
        self.seed = seed
        self.max_utts = max_utts

    def epoch(self, number: int) -> List[List[int]]:
        rng = random.Random(self.seed * 100003 + number)
        noisy = sorted(self.synth, key=lambda i: self.lengths[i] * rng.uniform(0.9, 1.1))
        own_budget = self.budget * (1.0 - self.real_share)
        batches, current, longest = [], [], 0
        for i in noisy:
            n = self.lengths[i]
            if current and (max(longest, n) * (len(current) + 1) > own_budget
                            or len(current) >= self.max_utts):
                batches.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, n)
        if current:
            batches.append(current)
        rng.shuffle(batches)
        if self.real_share > 0:
            real_budget = self.budget * self.real_share
            for batch in batches:
                longest = max(self.lengths[i] for i in batch)
                # real utterances no longer than the batch's longest (when any)
                limit = next((k for k, i in enumerate(self.real) if self.lengths[i] > longest),
                             len(self.real))
                pool = self.real[:max(limit, 1)]
                total = 0
                while total < real_budget and len(batch) < self.max_utts:
                    pick = pool[rng.randrange(len(pool))]
                    batch.append(pick)
                    total += max(self.lengths[pick], 1)
        return batches

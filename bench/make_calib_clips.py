#!/usr/bin/env python3
"""Writes /tmp/u2pp_full_calib/calib.jsonl: 16 ten-second clips of tones in
noise, the calibration set the synthetic full-size U2++ model needs for
smoothquant_w8a8_fused (its random weights only need activations of a
realistic range). Used by bench/encoder_fused.sh and bench/encoder_graphs.sh."""
import json, math, os, random, struct, wave
root = "/tmp/u2pp_full_calib"
os.makedirs(root, exist_ok=True)
rng = random.Random(7)
with open(f"{root}/calib.jsonl", "w") as manifest:
    for i in range(16):
        path = f"{root}/clip{i}.wav"
        f0 = 100.0 + 40.0 * i
        with wave.open(path, "wb") as w:
            w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
            samples = (0.3 * math.sin(2 * math.pi * f0 * t / 16000) * (1 + math.sin(t / 4000.0))
                       + 0.05 * rng.gauss(0, 1) for t in range(160000))
            w.writeframes(b"".join(struct.pack("<h", max(-32767, min(32767, int(v * 32767))))
                                   for v in samples))
        manifest.write(json.dumps({"id": f"clip{i}", "audio": path, "text": "x"}) + "\n")

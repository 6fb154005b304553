"""Writes a random-weight Qwen2-Audio directory of Qwen2-Audio-7B's dimensions
(text: hidden 4096, MLP 11008, 32 heads and 32 key/value heads of 128,
vocabulary 156032, RoPE theta 10000, 8192 positions; audio tower: Whisper
large's 1280 wide, 20 heads, FFN 5120, 128 mel bins) for speed measurements,
with --lm-layers / --audio-layers of the real 32 / 32 (time per step scales
with the layers; say which were used). The tokenizer, processor files and
audio token come from --template (a small Qwen2-Audio directory such as the
oracle test's generated one), so the model's vocabulary is padded past the
tokenizer's as the real one is.

    make_qwen2_audio_random.py --template DIR --out DIR [--lm-layers 8]
        [--audio-layers 8] [--dtype bfloat16] [--max-new-tokens 64]
"""
import argparse
import json
import pathlib
import shutil
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--lm-layers", type=int, default=8)
    parser.add_argument("--audio-layers", type=int, default=8)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    from transformers import Qwen2AudioConfig, Qwen2AudioForConditionalGeneration

    template = pathlib.Path(args.template)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((template / "config.json").read_text())
    config["text_config"].update(
        hidden_size=4096, intermediate_size=11008, num_attention_heads=32,
        num_key_value_heads=32, num_hidden_layers=args.lm_layers, vocab_size=156032,
        max_position_embeddings=8192, rope_theta=10000.0, rms_norm_eps=1e-5)
    config["audio_config"].update(
        d_model=1280, encoder_attention_heads=20, encoder_ffn_dim=5120,
        encoder_layers=args.audio_layers, num_hidden_layers=args.audio_layers,
        num_mel_bins=128, max_source_positions=1500)
    config.pop("transformers_version", None)
    torch.manual_seed(args.seed)
    dtype = getattr(torch, args.dtype)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2AudioForConditionalGeneration(Qwen2AudioConfig(**config)).to(dtype)
    model.save_pretrained(out, max_shard_size="2GB", safe_serialization=True)
    for path in template.iterdir():
        if path.name.startswith("model") or path.name in ("config.json",):
            continue
        shutil.copy(path, out / path.name)
    generation = json.loads((template / "generation_config.json").read_text())
    generation["max_new_tokens"] = args.max_new_tokens
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2))
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"out": str(out), "parameters": params, "lm_layers": args.lm_layers,
                      "audio_layers": args.audio_layers, "dtype": args.dtype}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

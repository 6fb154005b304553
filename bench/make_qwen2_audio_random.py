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


def hub_name(name):
    """The published checkpoint's state-dict name (transformers 4.x's, which
    oasr reads): transformers 5 names the same tensors model.language_model.*,
    model.audio_tower.*, model.multi_modal_projector.*, lm_head.*."""
    for new, old in (("model.language_model.", "language_model.model."),
                     ("model.audio_tower.", "audio_tower."),
                     ("model.multi_modal_projector.", "multi_modal_projector."),
                     ("lm_head.", "language_model.lm_head.")):
        if name.startswith(new):
            return old + name[len(new):]
    return name


def save_hub_layout(model, out, shard_bytes=2 << 30):
    """Sharded model-*.safetensors and their index under the hub's names."""
    import json as _json
    from safetensors.torch import save_file
    state = {hub_name(k): v.detach().contiguous() for k, v in model.state_dict().items()}
    shards, current, size = [], {}, 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if current and size + nbytes > shard_bytes:
            shards.append(current)
            current, size = {}, 0
        current[name] = tensor
        size += nbytes
    shards.append(current)
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        file = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: v.cpu() for k, v in shard.items()}, str(out / file),
                  metadata={"format": "pt"})
        weight_map.update({k: file for k in shard})
    total = sum(t.numel() * t.element_size() for t in state.values())
    (out / "model.safetensors.index.json").write_text(_json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))


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
    save_hub_layout(model, out)
    # The config as the published model's (transformers 4.x field names).
    config["torch_dtype"] = args.dtype
    (out / "config.json").write_text(json.dumps(config, indent=2))
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

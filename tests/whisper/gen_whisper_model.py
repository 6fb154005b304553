#!/usr/bin/env python3
"""Oracle for oasr's Whisper model and KV cache (src/models/whisper/whisper_*.h,
kv_cache.h): Hugging Face transformers' WhisperForConditionalGeneration
(eager attention) on small random-weight configs is the reference.

Writes, for every case NAME of the metadata list "cases":
  OUT/NAME/model.safetensors   the state dict with HF names, float32 (case
                               "mel80": save_pretrained's file, without the
                               tied proj_out.weight; case "mel128": every
                               parameter, proj_out.weight included, as a
                               torch state_dict holds them)
  OUT/cases.safetensors        "NAME/<role>" tensors:
    mel                [2, n_mels, 3000] input; encoder_out [2, 1500, d]
    cross_k.L, cross_v.L  [2, heads, 1500, head_dim] (encoder_attn k/v_proj)
    prefix_tokens      [2, 6] int64 (row r reads encoder row r)
    prefix_logits      [2, 6, vocab]: one pass over the whole prefix
    step_logits        [2, 6, vocab]: token by token with past_key_values
    self_k.L, self_v.L [2, heads, 6, head_dim]: HF's self-attention cache after the steps
    rows_tokens        [3, 6] int64, rows_cross [3] (encoder row of each row)
    rows_logits        [3, 6, vocab]: one pass over encoder rows rows_cross
    beam_tokens_a      [3, 4], beam_cross_a [3]; beam_source [3];
    beam_tokens_b      [3, 2]; beam_logits_b [3, 2, vocab]: after row r takes
                       the history of row beam_source[r], two more tokens
                       (the reference runs the full reordered sequences)
Metadata "cases": JSON list of {"name", "config" (HF WhisperConfig fields)}.
Fixed seeds.
"""

import argparse
import json
import math
import os

import torch
from safetensors.torch import save_file
from transformers import WhisperConfig, WhisperForConditionalGeneration
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

CASES = [
    dict(name="mel80", seed=11, save_pretrained=True,
         config=dict(vocab_size=300, num_mel_bins=80, d_model=64, encoder_layers=2,
                     encoder_attention_heads=4, decoder_layers=2, decoder_attention_heads=4,
                     encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=1500,
                     max_target_positions=40)),
    dict(name="mel128", seed=12, save_pretrained=False,
         config=dict(vocab_size=257, num_mel_bins=128, d_model=96, encoder_layers=1,
                     encoder_attention_heads=6, decoder_layers=3, decoder_attention_heads=3,
                     encoder_ffn_dim=192, decoder_ffn_dim=160, max_source_positions=1500,
                     max_target_positions=24)),
]


def build(case):
    torch.manual_seed(case["seed"])
    cfg = WhisperConfig(**case["config"], pad_token_id=0, bos_token_id=2, eos_token_id=2,
                        decoder_start_token_id=1, suppress_tokens=None,
                        begin_suppress_tokens=None, attn_implementation="eager")
    model = WhisperForConditionalGeneration(cfg).eval()
    # Weights at scales that make every part matter (HF's init, std 0.02,
    # leaves attention nearly uniform): fan-in scaled GEMMs, non-trivial
    # norms and biases. The encoder keeps HF's sinusoid position table.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "model.encoder.embed_positions.weight":
                continue
            if "layer_norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif name == "model.decoder.embed_tokens.weight":
                p.copy_(0.5 * torch.randn_like(p))  # also the tied proj_out
            elif name == "model.decoder.embed_positions.weight":
                p.copy_(0.3 * torch.randn_like(p))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn_like(p) * (1.5 / math.sqrt(fan_in)))
    return model


def logits_of(model, enc, tokens):
    out = model(encoder_outputs=(enc,), decoder_input_ids=tokens, use_cache=False)
    return out.logits


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tensors = {}
    meta = []
    for case in CASES:
        name = case["name"]
        model = build(case)
        cfg = model.config
        case_dir = os.path.join(args.out, name)
        os.makedirs(case_dir, exist_ok=True)
        if case["save_pretrained"]:
            model.save_pretrained(case_dir, safe_serialization=True)
        else:
            state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
            save_file(state, os.path.join(case_dir, "model.safetensors"))

        g = torch.Generator().manual_seed(case["seed"] + 100)
        vocab = cfg.vocab_size
        put = lambda role, t: tensors.__setitem__(f"{name}/{role}", t.detach().contiguous())
        with torch.no_grad():
            mel = torch.rand(2, cfg.num_mel_bins, 3000, generator=g) * 2.5 - 1.0
            enc = model.model.encoder(mel).last_hidden_state
            put("mel", mel)
            put("encoder_out", enc)
            heads = cfg.decoder_attention_heads
            head_dim = cfg.d_model // heads
            for l, layer in enumerate(model.model.decoder.layers):
                attn = layer.encoder_attn
                k = attn.k_proj(enc).view(2, -1, heads, head_dim).transpose(1, 2)
                v = attn.v_proj(enc).view(2, -1, heads, head_dim).transpose(1, 2)
                put(f"cross_k.{l}", k)
                put(f"cross_v.{l}", v)

            # (a) the whole prefix at once, (b) token by token with HF's cache.
            tokens = torch.randint(0, vocab, (2, 6), generator=g)
            put("prefix_tokens", tokens)
            put("prefix_logits", logits_of(model, enc, tokens))
            past = EncoderDecoderCache(DynamicCache(), DynamicCache())
            steps = []
            for t in range(tokens.shape[1]):
                out = model(encoder_outputs=(enc,), decoder_input_ids=tokens[:, t:t + 1],
                            past_key_values=past, use_cache=True)
                past = out.past_key_values
                steps.append(out.logits[:, 0])
            put("step_logits", torch.stack(steps, dim=1))
            self_cache = past.self_attention_cache
            for l in range(cfg.decoder_layers):
                put(f"self_k.{l}", self_cache.key_cache[l])
                put(f"self_v.{l}", self_cache.value_cache[l])

            # (c) 3 rows reading encoder rows [1, 0, 1].
            rows_cross = torch.tensor([1, 0, 1])
            rows_tokens = torch.randint(0, vocab, (3, 6), generator=g)
            put("rows_tokens", rows_tokens)
            put("rows_cross", rows_cross)
            put("rows_logits", logits_of(model, enc[rows_cross], rows_tokens))

            # (d) beam reorder: 4 tokens, row r <- row source[r], 2 more tokens.
            cross_a = torch.tensor([0, 1, 1])
            tokens_a = torch.randint(0, vocab, (3, 4), generator=g)
            source = torch.tensor([2, 2, 0])
            tokens_b = torch.randint(0, vocab, (3, 2), generator=g)
            full = torch.cat([tokens_a[source], tokens_b], dim=1)
            logits_b = logits_of(model, enc[cross_a[source]], full)[:, 4:]
            put("beam_tokens_a", tokens_a)
            put("beam_cross_a", cross_a)
            put("beam_source", source)
            put("beam_tokens_b", tokens_b)
            put("beam_logits_b", logits_b)
        meta.append({"name": name, "config": case["config"],
                     "proj_out_saved": not case["save_pretrained"]})
    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(meta)})


if __name__ == "__main__":
    main()

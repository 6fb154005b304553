#!/usr/bin/env python3
"""Oracle for the Whisper search on the real model code path: Hugging Face
transformers' WhisperForConditionalGeneration.generate() (short-form, no
timestamps) on random-weight Whisper models, against oasr's WhisperModel +
decode/whisper_search (test_whisper_generate.cc).

Two small models (an English-only one, prompt <|startoftranscript|>
<|notimestamps|>, and a multilingual one generated with language="en",
task="transcribe", prompt <|startoftranscript|> <|en|> <|transcribe|>
<|notimestamps|>), each with suppress_tokens and begin_suppress_tokens in
its generation config. Three random log-mel inputs per model, decoded as a
batch by HF with greedy search and with num_beams=5 at several
length_penalty values and max_length values (a small one, so hypotheses run
into it, and the model's full max_target_positions).

Writes OUT/<model>/ (save_pretrained: config.json, generation_config.json,
model.safetensors) and OUT/cases.safetensors: "<model>/mel" float32
[3, 80, 3000]; per decoding case "<case>/sequences" int64 [3, W] (HF's
output: prompt + tokens, right-padded with pad = eos), "<case>/scores"
float32 [3] (sequences_scores; beams only). Metadata "cases": one entry per
decoding case {"name", "model", "num_beams", "length_penalty",
"max_length", "eos_token_id", "pad_token_id", "suppress_tokens",
"begin_suppress_tokens", "prompt"}.
"""

import argparse
import json
import math
import os

import torch
from safetensors.torch import save_file
from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

VOCAB = 120
SOT, EOS, EN, TRANSCRIBE, TRANSLATE, PREV, NO_TIMESTAMPS = 110, 111, 112, 113, 116, 114, 115
SUPPRESS = [3, 9, 27, 64, SOT, PREV, TRANSLATE]
BEGIN_SUPPRESS = [5, EOS]
MAX_TARGET = 40

MODELS = [
    dict(name="english", seed=31, multilingual=False, eos_bias=2.0),
    dict(name="multilingual", seed=32, multilingual=True, eos_bias=4.0),
]


def build(spec):
    torch.manual_seed(spec["seed"])
    cfg = WhisperConfig(vocab_size=VOCAB, num_mel_bins=80, d_model=64, encoder_layers=2,
                        encoder_attention_heads=4, decoder_layers=2, decoder_attention_heads=4,
                        encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=1500,
                        max_target_positions=MAX_TARGET, pad_token_id=EOS, bos_token_id=EOS,
                        eos_token_id=EOS, decoder_start_token_id=SOT, suppress_tokens=None,
                        begin_suppress_tokens=None, attn_implementation="eager")
    model = WhisperForConditionalGeneration(cfg).eval()
    # Peaked distributions (HF's std-0.02 init gives near-uniform logits,
    # where any rounding difference would reorder candidates).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "model.encoder.embed_positions.weight":
                continue
            if "layer_norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif name == "model.decoder.embed_tokens.weight":
                p.copy_(0.6 * torch.randn_like(p))
            elif name == "model.decoder.embed_positions.weight":
                p.copy_(0.3 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * (1.5 / math.sqrt(p[0].numel())))
        # The head is tied to the input embedding, so a token tends to repeat
        # itself forever; a final LayerNorm gain of random sign breaks that
        # loop, and a bias along eos's embedding makes some hypotheses end
        # (eos_bias tuned so both endings occur).
        norm = model.model.decoder.layer_norm
        norm.weight.copy_(1.2 * torch.randn_like(norm.weight))
        eos = model.model.decoder.embed_tokens.weight[EOS]
        norm.bias.copy_(spec["eos_bias"] * eos / eos.norm())
    gen = GenerationConfig(
        decoder_start_token_id=SOT, eos_token_id=EOS, pad_token_id=EOS, bos_token_id=EOS,
        no_timestamps_token_id=NO_TIMESTAMPS, prev_sot_token_id=PREV,
        suppress_tokens=SUPPRESS, begin_suppress_tokens=BEGIN_SUPPRESS,
        max_length=MAX_TARGET, is_multilingual=spec["multilingual"], return_timestamps=False)
    if spec["multilingual"]:
        gen.lang_to_id = {"<|en|>": EN}
        gen.task_to_id = {"transcribe": TRANSCRIBE, "translate": TRANSLATE}
        gen.forced_decoder_ids = [[1, None], [2, TRANSCRIBE]]
    else:
        gen.forced_decoder_ids = [[1, NO_TIMESTAMPS]]
    model.generation_config = gen
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tensors, cases = {}, []
    reached_eos, reached_max = 0, 0
    for spec in MODELS:
        model = build(spec)
        model.save_pretrained(os.path.join(args.out, spec["name"]), safe_serialization=True)
        g = torch.Generator().manual_seed(spec["seed"] + 7)
        mel = torch.rand(3, 80, 3000, generator=g) * 2.5 - 1.0
        tensors[f"{spec['name']}/mel"] = mel.contiguous()
        language = {"language": "en", "task": "transcribe"} if spec["multilingual"] else {}
        decodings = [("greedy", 1, 1.0, MAX_TARGET), ("greedy_max9", 1, 1.0, 9)]
        for lp in (1.0, 0.6, 1.8):
            tag = str(lp).replace(".", "p")
            decodings.append((f"beam5_lp{tag}", 5, lp, MAX_TARGET))
            decodings.append((f"beam5_lp{tag}_max9", 5, lp, 9))
        for tag, beams, lp, max_length in decodings:
            name = f"{spec['name']}_{tag}"
            with torch.no_grad():
                out = model.generate(mel, num_beams=beams, length_penalty=lp,
                                     max_length=max_length, return_dict_in_generate=True,
                                     output_scores=True, **language)
            sequences = out["sequences"] if isinstance(out, dict) else out.sequences
            prompt_len = 4 if spec["multilingual"] else 2
            prompt = sequences[0, :prompt_len].tolist()
            for row in sequences.tolist():
                body = [t for t in row if t != EOS]
                reached_eos += len(body) < max_length
                reached_max += len(body) == max_length
            tensors[f"{name}/sequences"] = sequences.to(torch.int64).contiguous()
            if beams > 1:
                tensors[f"{name}/scores"] = out.sequences_scores.to(torch.float32).contiguous()
            cases.append({
                "name": name, "model": spec["name"], "num_beams": beams, "length_penalty": lp,
                "max_length": max_length, "eos_token_id": EOS, "pad_token_id": EOS,
                "suppress_tokens": SUPPRESS, "begin_suppress_tokens": BEGIN_SUPPRESS,
                "prompt": prompt,
            })
    # Both endings must be exercised; new weights that lost one would weaken the test.
    assert reached_eos > 0 and reached_max > 0, (reached_eos, reached_max)
    print(f"{len(cases)} cases; rows ending at eos {reached_eos}, at max_length {reached_max}")
    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(cases)})


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a random-weight Qwen2-Audio directory in the Hugging Face layout and
transformers' outputs on it (the oracle of models/qwen2_audio, [W3-Q]).

  make_qwen2_audio_case.py --out DIR [--seed N]

DIR/model/ is what save_pretrained writes for Qwen2AudioForConditionalGeneration
and its processor, sharded on purpose (model-0000K-of-0000N.safetensors and
model.safetensors.index.json), with config.json, generation_config.json,
tokenizer.json (a byte-level BPE trained here with Qwen2's pre-tokenizer and
special tokens), tokenizer_config.json, preprocessor_config.json (Whisper's
feature extractor, 128 mel bins) and the chat template.
DIR/reference/reference.safetensors holds, per utterance uNN:
  uNN.audio           the 16 kHz waveform given to the processor (float32)
  uNN.features        log-mel features of the valid frames [128, frames]
  uNN.audio_tower     the audio tower's output after pooling and its norm,
                      valid positions only [audio tokens, d_audio]
  uNN.projected       multi_modal_projector's output [audio tokens, d_text]
  uNN.input_ids       the prompt with <|AUDIO|> expanded to the audio tokens
  uNN.prefill_logits  the LM's logits at the prompt's last position [vocab]
  uNN.greedy          the new tokens of greedy search (generate()'s greedy,
                      written out: see greedy())
  uNN.beam3           the new tokens of beam search with 3 beams (generate()'s
                      _beam_search loop written out around transformers' own
                      BeamSearchScorer: see beam_search()), eos excluded
  uNN.beam3_score     its sequences_scores (float32 [1])
DIR/reference/summary.json: the prompt text, the decoded greedy text, the
audio token counts, the smallest top-1 / top-2 logit margin over the greedy
steps (how much numerical noise the token comparison tolerates).

Needs transformers with Qwen2-Audio (4.45 or newer) and torch; the project
venv (scripts/setup.sh) has both.
"""
import argparse
import json
import math
import os

import numpy as np
import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (GenerationConfig, Qwen2AudioConfig, Qwen2AudioForConditionalGeneration,
                          Qwen2AudioProcessor, Qwen2TokenizerFast, WhisperFeatureExtractor)

# Qwen2's pre-tokenizer split (its tokenizer.json's Split pattern).
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>",
           "<|audio_eos|>", "<|en|>"]
# Qwen2-Audio-7B's (base model) speech recognition prompt, from its model card.
ASR_PROMPT = "<|audio_bos|><|AUDIO|><|audio_eos|>Detect the language and recognize the speech: <|en|>"
CORPUS = [
    "detect the language and recognize the speech", "the quick brown fox jumps over the lazy dog",
    "please leave a message after the tone", "there are currently no participants in the conference",
    "you have new voice messages", "press one to repeat this menu", "thank you for calling goodbye",
    "Detect the language and recognize the speech: ", "numbers 0 1 2 3 4 5 6 7 8 9",
]


def make_tokenizer(path):
    bpe = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    bpe.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=400, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(CORPUS * 4, trainer=trainer)
    bpe.add_special_tokens(SPECIAL)
    tokenizer = Qwen2TokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>", unk_token=None, bos_token=None)
    tokenizer.save_pretrained(path)
    return tokenizer


def speech_like(seconds, rate, rng):
    """A deterministic voiced signal: harmonics of a gliding pitch under a
    syllable envelope, in noise, so that the mel features vary over time."""
    t = np.arange(int(seconds * rate)) / rate
    f0 = 120 + 40 * np.sin(2 * math.pi * 0.7 * t)
    phase = 2 * math.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(h * phase) / h for h in range(1, 12))
    envelope = 0.5 * (1 - np.cos(2 * math.pi * 3.1 * t)) * (t < seconds - 0.1)
    return (0.2 * voiced * envelope + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


def scale_weights(model, gain, generator):
    """Random weights ~ N(0, gain^2 / fan_in) so that logits have margins
    (transformers' default N(0, 0.02^2) makes every logit nearly equal)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2 and "embed_positions" not in name:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=generator) * gain / math.sqrt(fan_in))
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=generator))
        embed = model.language_model.model.embed_tokens.weight
        embed.copy_(torch.randn(embed.shape, generator=generator))


def greedy(model, inputs, max_new_tokens, eos):
    """generate()'s greedy search, written out (generate() itself cannot run on
    Debian's torch 1.13 under Python 3.11: it imports torch.distributed.fsdp):
    the forward with the audio once, then one token a step through the cache."""
    out = model(**inputs, use_cache=True)
    attention_mask = out.attention_mask
    past = out.past_key_values
    scores, tokens = [], []
    logits = out.logits[:, -1]
    for _ in range(max_new_tokens):
        scores.append(logits[0].clone())
        token = int(logits[0].argmax())
        tokens.append(token)
        if token == eos:
            break
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((1, 1))], dim=-1)
        position = attention_mask.long().sum(-1, keepdim=True) - 1
        out = model.language_model(input_ids=torch.tensor([[token]]), attention_mask=attention_mask,
                                   position_ids=position, past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[:, -1]
    return tokens, torch.stack(scores)


def beam_search(model, inputs, num_beams, max_new_tokens, eos, pad):
    """generate(num_beams=K, do_sample=False)'s _beam_search of transformers
    4.46, written out for the reason greedy() is, with transformers' own
    BeamSearchScorer doing the ranking, the hypotheses and the finalize: the
    prompt with the audio expanded K times, log_softmax of the last logits plus
    the running beam scores, the top max(2, 1 + n_eos) * K of the flat
    [K * V] row, the scorer's process, the cache reordered by its beam_idx,
    until the scorer is done or max_new_tokens are generated."""
    from transformers.generation.beam_search import BeamSearchScorer
    expanded = {k: v.repeat_interleave(num_beams, dim=0) for k, v in inputs.items()}
    out = model(**expanded, use_cache=True)
    attention_mask = out.attention_mask
    past = out.past_key_values
    input_ids = expanded["input_ids"]
    prompt_len = input_ids.shape[-1]
    scorer = BeamSearchScorer(batch_size=1, num_beams=num_beams, device="cpu",
                              length_penalty=1.0, do_early_stopping=False,
                              num_beam_hyps_to_keep=1, max_length=prompt_len + max_new_tokens)
    beam_scores = torch.zeros(num_beams)
    beam_scores[1:] = -1e9
    vocab = out.logits.shape[-1]
    while True:
        scores = torch.log_softmax(out.logits[:, -1].float(), dim=-1) + beam_scores[:, None]
        top, at = torch.topk(scores.view(1, num_beams * vocab), 2 * num_beams, dim=1,
                             largest=True, sorted=True)
        next_indices = torch.div(at, vocab, rounding_mode="floor")
        next_tokens = at % vocab
        step = scorer.process(input_ids, top, next_tokens, next_indices, pad_token_id=pad,
                              eos_token_id=eos, decoder_prompt_len=prompt_len)
        beam_scores = step["next_beam_scores"]
        beam_idx = step["next_beam_indices"]
        chosen = step["next_beam_tokens"]
        input_ids = torch.cat([input_ids[beam_idx], chosen[:, None]], dim=-1)
        # generate()'s _temporary_reorder_cache of a legacy tuple cache.
        past = (past.reorder_cache(beam_idx) or past) if hasattr(past, "reorder_cache") else \
            tuple(tuple(t.index_select(0, beam_idx) for t in layer) for layer in past)
        attention_mask = attention_mask[beam_idx]
        if scorer.is_done or input_ids.shape[-1] >= prompt_len + max_new_tokens:
            break
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((num_beams, 1))], -1)
        position = attention_mask.long().sum(-1, keepdim=True) - 1
        out = model.language_model(input_ids=chosen[:, None], attention_mask=attention_mask,
                                   position_ids=position, past_key_values=past, use_cache=True)
        past = out.past_key_values
    final = scorer.finalize(input_ids, beam_scores, next_tokens, next_indices, pad_token_id=pad,
                            eos_token_id=eos, max_length=prompt_len + max_new_tokens,
                            decoder_prompt_len=prompt_len)
    tokens = [t for t in final["sequences"][0, prompt_len:].tolist()]
    while tokens and tokens[-1] == pad:
        tokens.pop()
    if tokens and tokens[-1] == eos:
        tokens.pop()
    return tokens, float(final["sequence_scores"][0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--gain", type=float, default=3.0,
                        help="weights ~ N(0, gain^2 / fan_in); with seed 2, 3 gives varied "
                             "greedy tokens with top-1 / top-2 margins above 0.16")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    model_dir = os.path.join(args.out, "model")
    ref_dir = os.path.join(args.out, "reference")
    os.makedirs(model_dir, exist_ok=True)
    os.makedirs(ref_dir, exist_ok=True)

    tokenizer = make_tokenizer(model_dir)
    extractor = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160,
                                        chunk_length=30, n_fft=400)
    processor = Qwen2AudioProcessor(feature_extractor=extractor, tokenizer=tokenizer)
    processor.save_pretrained(model_dir)

    config = Qwen2AudioConfig(
        audio_config=dict(d_model=64, encoder_layers=2, encoder_attention_heads=4,
                          encoder_ffn_dim=128, num_mel_bins=128, max_source_positions=1500),
        text_config=dict(model_type="qwen2", vocab_size=len(tokenizer), hidden_size=64,
                         intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=4096, rope_theta=1000000.0,
                         rms_norm_eps=1e-5, tie_word_embeddings=False,
                         eos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>")),
        audio_token_index=tokenizer.convert_tokens_to_ids("<|AUDIO|>"))
    model = Qwen2AudioForConditionalGeneration(config).eval()
    scale_weights(model, args.gain, generator)
    model.generation_config = GenerationConfig(
        eos_token_id=config.text_config.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        do_sample=False, max_new_tokens=16)
    model.save_pretrained(model_dir, max_shard_size="300KB", safe_serialization=True)

    rng = np.random.default_rng(args.seed)
    tensors, utterances = {}, []
    audio_token = config.audio_token_index
    for index, seconds in enumerate([1.7, 3.2]):
        key = f"u{index:02d}"
        audio = speech_like(seconds, 16000, rng)
        inputs = processor(text=ASR_PROMPT, audios=audio, sampling_rate=16000,
                           return_tensors="pt")
        frames = int(inputs["feature_attention_mask"].sum())
        with torch.no_grad():
            new_tokens, scores = greedy(model, inputs, 16, config.text_config.eos_token_id)
            beam_tokens, beam_score = beam_search(model, inputs, 3, 16,
                                                  config.text_config.eos_token_id,
                                                  tokenizer.pad_token_id)
            _, audio_tokens = model.audio_tower._get_feat_extract_output_lengths(
                inputs["feature_attention_mask"].sum(-1))
            audio_tokens = int(audio_tokens)
            # The tower as forward() runs it: frames past the valid ones masked.
            conv_frames = (inputs["input_features"].shape[-1] - 2) // 2 + 1
            feat_lengths, _ = model.audio_tower._get_feat_extract_output_lengths(
                inputs["feature_attention_mask"].sum(-1))
            padding = torch.arange(conv_frames)[None, :] >= feat_lengths[:, None]
            mask = torch.zeros(1, 1, conv_frames, conv_frames)
            mask[padding.view(1, 1, 1, conv_frames).expand(1, 1, conv_frames, conv_frames)] = \
                float("-inf")
            tower = model.audio_tower(inputs["input_features"], attention_mask=mask)
            tower = tower.last_hidden_state[0, :audio_tokens]
            projected = model.multi_modal_projector(tower)
            ids = inputs["input_ids"][0].tolist()
            at = ids.index(audio_token)
            expanded = ids[:at] + [audio_token] * audio_tokens + ids[at + 1:]
            prompt_length = len(expanded)
        top2 = scores.topk(2, dim=-1).values
        margin = float((top2[:, 0] - top2[:, 1]).min())
        tensors[f"{key}.audio"] = torch.from_numpy(audio)
        tensors[f"{key}.features"] = inputs["input_features"][0, :, :frames].contiguous()
        tensors[f"{key}.audio_tower"] = tower.contiguous()
        tensors[f"{key}.projected"] = projected.contiguous()
        tensors[f"{key}.input_ids"] = torch.tensor(expanded, dtype=torch.int64)
        tensors[f"{key}.prefill_logits"] = scores[0].contiguous()
        tensors[f"{key}.greedy"] = torch.tensor(new_tokens, dtype=torch.int64)
        tensors[f"{key}.beam3"] = torch.tensor(beam_tokens, dtype=torch.int64)
        tensors[f"{key}.beam3_score"] = torch.tensor([beam_score], dtype=torch.float32)
        utterances.append({"id": key, "seconds": seconds, "mel_frames": frames,
                           "audio_tokens": audio_tokens, "prompt_tokens": prompt_length,
                           "greedy": new_tokens, "beam3": beam_tokens, "beam3_score": beam_score,
                           "text": tokenizer.decode(new_tokens, skip_special_tokens=True),
                           "min_top2_margin": margin})
    summary = {"generator": "tests/oracle/qwen2_audio/make_qwen2_audio_case.py",
               "seed": args.seed, "prompt": ASR_PROMPT, "transformers": __import__(
                   "transformers").__version__, "torch": torch.__version__,
               "utterances": utterances}
    save_file(tensors, os.path.join(ref_dir, "reference.safetensors"),
              metadata={"summary": json.dumps(summary)})
    with open(os.path.join(ref_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

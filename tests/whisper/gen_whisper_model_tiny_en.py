#!/usr/bin/env python3
"""Oracle for oasr's Whisper model on the real weights: Hugging Face
transformers' WhisperForConditionalGeneration (eager attention, float32)
loaded from the tiny.en directory the ctest fixture whisper_tiny_en converted
(OASR_WHISPER_TINY_EN_DIR), on a real clip: Asterisk's vm-intro prompt
(8 kHz, upsampled to 16 kHz with torchaudio), featurised by HF's
WhisperFeatureExtractor (so the C++ test does not depend on oasr's mel).

Writes OUT/cases.safetensors with metadata "cases" = JSON list of one entry
{"name": "tiny_en", "available": bool, "reason": str, "dir": str, "clip": str}
and, when available, tensors "tiny_en/<role>":
  mel          [1, 80, 3000] float32 input features
  encoder_out  [1, 1500, 384]
  tokens       [1, L] int64: <|startoftranscript|> <|notimestamps|> then
               STEPS tokens chosen greedily (plain argmax of HF's logits)
  logits       [1, L, vocab]: HF's logits for every position of `tokens`
Without the model it writes only the metadata (available false, with the
reason) so the C++ test skips saying why.
"""

import argparse
import json
import os

import torch
import torchaudio
from safetensors.torch import save_file

CLIP = "/usr/share/asterisk/sounds/en/vm-intro.wav"
STEPS = 8


def unavailable(out, reason):
    print("SKIP: " + reason)
    save_file({"placeholder": torch.zeros(1)}, os.path.join(out, "cases.safetensors"),
              metadata={"cases": json.dumps([{"name": "tiny_en", "available": False,
                                              "reason": reason}])})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model_dir = os.environ.get("OASR_WHISPER_TINY_EN_DIR", "")
    if not model_dir:
        return unavailable(args.out, "OASR_WHISPER_TINY_EN_DIR is not set (run through ctest "
                                     "with the whisper_tiny_en fixture)")
    if not os.path.isfile(os.path.join(model_dir, "oasr_config.json")):
        marker = model_dir + ".unavailable"
        reason = open(marker).read().strip() if os.path.isfile(marker) else (
            f"{model_dir} was not written (did the whisper.tiny_en_dir fixture run?)")
        return unavailable(args.out, reason)
    if not os.path.isfile(CLIP):
        return unavailable(args.out, f"{CLIP} is missing (Debian package asterisk-core-sounds-en)")

    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration.from_pretrained(
        model_dir, torch_dtype=torch.float32, attn_implementation="eager",
        local_files_only=True).eval()
    cfg = model.config
    gen = model.generation_config
    audio, rate = torchaudio.load(CLIP)
    audio = torchaudio.functional.resample(audio.mean(dim=0), rate, 16000)
    extractor = WhisperFeatureExtractor(feature_size=cfg.num_mel_bins)
    mel = extractor(audio.numpy(), sampling_rate=16000, return_tensors="pt").input_features
    mel = mel.to(torch.float32)
    with torch.no_grad():
        enc = model.model.encoder(mel).last_hidden_state
        tokens = torch.tensor([[gen.decoder_start_token_id, gen.no_timestamps_token_id]])
        for _ in range(STEPS):
            logits = model(encoder_outputs=(enc,), decoder_input_ids=tokens,
                           use_cache=False).logits
            tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
        logits = model(encoder_outputs=(enc,), decoder_input_ids=tokens, use_cache=False).logits
    print("tokens", tokens.tolist())
    tensors = {"tiny_en/mel": mel.contiguous(), "tiny_en/encoder_out": enc.contiguous(),
               "tiny_en/tokens": tokens.contiguous(), "tiny_en/logits": logits.contiguous()}
    meta = [{"name": "tiny_en", "available": True, "reason": "", "dir": model_dir, "clip": CLIP}]
    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(meta)})


if __name__ == "__main__":
    main()

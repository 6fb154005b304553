#!/usr/bin/env python3
"""PyTorch oracle for the U2++ model (src/models/u2pp/u2pp_*): encoder offline,
with chunk masks and streamed chunk by chunk, forward_chunk caches, CTC
log-probs, padded batches and the attention decoders.

The reference model is tests/oracle/u2pp/u2pp_model.py (an independent
PyTorch U2++ written from WeNet's architecture, not from oasr's C++), with the
random-weight initialisation of tests/oracle/u2pp/make_u2pp_case.py.

Writes, for every model variant NAME in the metadata list "cases":
  OUT/NAME/final.pt              torch.save(state_dict) in WeNet's layout
  OUT/cases.safetensors          "NAME/<role>" tensors (inputs and expected
                                 outputs; roles listed in the C++ test)
Metadata "cases": JSON list of {"name", "config" (U2ppConfig fields),
"modes", "hyps", "stream_steps", ...}. Fixed seeds.
"""

import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "u2pp"))

from make_u2pp_case import init_random  # noqa: E402
from u2pp_model import U2pp, U2ppConfig  # noqa: E402

# Small models that still exercise every switch: d_k = 32 (1/sqrt(d_k) is not
# a power of two), 24 and 16; each input layer; both conv norms; causal and
# symmetric convolution; checkpoints with and without the "pe" tables.
VARIANTS = [
    dict(name="conv2d_ln_causal",
         config=dict(output_size=128, attention_heads=4, linear_units=256, num_blocks=2,
                     input_layer="conv2d", cnn_module_norm="layer_norm", cnn_module_kernel=15,
                     causal=True, decoder_heads=4, decoder_linear_units=256,
                     decoder_num_blocks=2, decoder_r_num_blocks=1, vocab_size=50,
                     persistent_pos_tables=True),
         frames=203, batch_lengths=[203, 150, 97], chunk=4, left_chunks=2),
    dict(name="conv2d6_bn_symmetric",
         config=dict(output_size=64, attention_heads=4, linear_units=128, num_blocks=2,
                     input_layer="conv2d6", cnn_module_norm="batch_norm", cnn_module_kernel=7,
                     causal=False, decoder_heads=2, decoder_linear_units=128,
                     decoder_num_blocks=1, decoder_r_num_blocks=2, vocab_size=37,
                     persistent_pos_tables=False),
         frames=251, batch_lengths=[251, 180, 71], chunk=4, left_chunks=1),
    dict(name="conv2d8_ln_causal",
         config=dict(output_size=96, attention_heads=4, linear_units=192, num_blocks=3,
                     input_layer="conv2d8", cnn_module_norm="layer_norm", cnn_module_kernel=5,
                     causal=True, decoder_heads=4, decoder_linear_units=192,
                     decoder_num_blocks=1, decoder_r_num_blocks=1, vocab_size=41,
                     persistent_pos_tables=False),
         frames=299, batch_lengths=[299, 233, 120], chunk=3, left_chunks=0),
    # Post-norm blocks without the macaron FFN (ff_scale 1), ReLU, BatchNorm.
    dict(name="conv2d_postnorm_nomacaron",
         config=dict(output_size=64, attention_heads=2, linear_units=96, num_blocks=2,
                     input_layer="conv2d", cnn_module_norm="batch_norm", cnn_module_kernel=3,
                     causal=True, normalize_before=False, macaron_style=False,
                     activation_type="relu", decoder_heads=2, decoder_linear_units=96,
                     decoder_num_blocks=1, decoder_r_num_blocks=1, vocab_size=40,
                     persistent_pos_tables=False),
         frames=150, batch_lengths=[150, 131, 40], chunk=2, left_chunks=3),
    # Pre-norm blocks without a convolution module (no norm_conv / norm_final).
    dict(name="conv2d_no_cnn_module",
         config=dict(output_size=64, attention_heads=4, linear_units=96, num_blocks=2,
                     input_layer="conv2d", use_cnn_module=False, causal=True,
                     decoder_heads=4, decoder_linear_units=96, decoder_num_blocks=1,
                     decoder_r_num_blocks=1, vocab_size=40, persistent_pos_tables=True),
         frames=120, batch_lengths=[120, 77, 64], chunk=4, left_chunks=-1),
]

# Hypotheses for the decoders (token ids < every vocab_size above, none is
# sos/eos): different lengths, one empty, one with repeats.
HYPS = [[5, 9, 3, 17], [], [12, 12, 4], [7, 30, 2, 2, 21, 8]]


def encode(model, feats, lengths, chunk=-1, left=-1, streaming=False):
    enc, enc_lens = model.encode(feats, lengths, chunk, left, streaming)
    return enc.contiguous(), enc_lens, model.ctc.log_softmax(enc).contiguous()


@torch.no_grad()
def make_variant(spec, out_dir, tensors, seed):
    name = spec["name"]
    cfg = U2ppConfig(input_dim=80, **spec["config"])
    model = U2pp(cfg)
    init_random(model, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    # CMVN statistics of "fbank-like" inputs: features around 10 +- 3.
    model.encoder.global_cmvn.mean.copy_(10.0 + torch.randn(80, generator=gen))
    model.encoder.global_cmvn.istd.copy_(1.0 / (2.5 + torch.rand(80, generator=gen)))
    # ctc blank bias lowered so the CTC output is not all blank.
    model.ctc.ctc_lo.bias[0] -= 1.0
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    torch.save(model.state_dict(), os.path.join(out_dir, name, "final.pt"))

    def put(role, value):
        tensors[f"{name}/{role}"] = value.detach().contiguous().clone()

    frames = spec["frames"]
    feats = 10.0 + 3.0 * torch.randn(1, frames, 80, generator=gen)
    lengths = torch.tensor([frames])
    put("feats", feats)
    chunk, left = spec["chunk"], spec["left_chunks"]
    modes = {
        "offline": (-1, -1, False),
        "chunk16_mask": (16, -1, False),
        "chunk16_stream": (16, -1, True),
        f"chunk{chunk}_left{left}_mask": (chunk, left, False),
        f"chunk{chunk}_left{left}_stream": (chunk, left, True),
    }
    for mode, (c, lc, streaming) in modes.items():
        enc, _, ctc = encode(model, feats, lengths, c, lc, streaming)
        put(f"{mode}/encoder_out", enc)
        put(f"{mode}/ctc_log_probs", ctc)

    # A padded batch: each row is a prefix of a fresh random utterance, padded
    # with zeros as WeNet's collate does.
    batch_lengths = spec["batch_lengths"]
    batch = torch.zeros(len(batch_lengths), max(batch_lengths), 80)
    for b, n in enumerate(batch_lengths):
        batch[b, :n] = 10.0 + 3.0 * torch.randn(n, 80, generator=gen)
    put("batch/feats", batch)
    put("batch/lengths", torch.tensor(batch_lengths, dtype=torch.int64))
    for mode, (c, lc) in {"offline": (-1, -1), "chunk16_mask": (16, -1)}.items():
        enc, enc_lens, ctc = encode(model, batch, torch.tensor(batch_lengths), c, lc, False)
        put(f"batch/{mode}/encoder_out", enc)
        put(f"batch/{mode}/encoder_lengths", enc_lens.to(torch.int64))
        put(f"batch/{mode}/ctc_log_probs", ctc)

    # forward_chunk step by step, with WeNet's cache layouts
    # (att [layers, H, t, 2 d_k], cnn [layers, 1, D, K-1]).
    encoder = model.encoder
    rate, context = encoder.embed.rate, encoder.embed.right_context + 1
    window, stride = (chunk - 1) * rate + context, rate * chunk
    att_cache, cnn_cache, offset = [], [], 0
    steps = []
    for step, start in enumerate(range(0, 3 * stride, stride)):
        piece = feats[:, start:start + window]
        y, att_cache, cnn_cache = encoder.forward_chunk(piece, offset, chunk * left, att_cache,
                                                        cnn_cache)
        put(f"stream_step{step}/xs", piece)
        put(f"stream_step{step}/out", y)
        put(f"stream_step{step}/att_cache",
            torch.cat([torch.cat([k, v], dim=-1) for k, v in att_cache], dim=0))
        if cfg.causal and cfg.use_cnn_module:
            put(f"stream_step{step}/cnn_cache", torch.stack(cnn_cache, dim=0))
        steps.append({"offset": offset, "required_cache_size": chunk * left})
        offset += y.size(1)

    # Decoders over the offline encoder output, hypotheses as WeNet feeds them.
    enc = model.encode(feats, lengths)[0]
    left_lp, right_lp = model.decoder_log_probs(enc, HYPS)
    put("decoder/encoder_out", enc)
    put("decoder/left_log_probs", left_lp)
    put("decoder/right_log_probs", right_lp)

    return {
        "name": name, "config": {**spec["config"], "input_dim": 80},
        "sos": cfg.sos, "eos": cfg.eos, "modes": {m: list(v) for m, v in modes.items()},
        "batch_lengths": batch_lengths, "stream_steps": steps, "hyps": HYPS,
        "chunk": chunk, "left_chunks": left,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    tensors, cases = {}, []
    for i, spec in enumerate(VARIANTS):
        cases.append(make_variant(spec, args.out, tensors, seed=4242 + 17 * i))
    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(cases)})


if __name__ == "__main__":
    main()

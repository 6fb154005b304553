#!/usr/bin/env python3
"""Checks the trainable model against the independent U2++ oracle
(tests/oracle/u2pp/u2pp_model.py): the state dict loads into the oracle
strictly (same names and shapes), and in eval mode both compute the same
encoder output, CTC log-probs and decoder log-probs, offline and with a chunk
mask, on a padded batch. Also checks the training losses against
definition-based references (torch's ctc_loss per utterance, a hand-written
label-smoothing sum).

  python3 tools/train/test_model.py
"""

import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "oracle", "u2pp"))

from model import IGNORE_ID, ModelConfig, U2ppModel  # noqa: E402
from u2pp_model import U2pp, U2ppConfig  # noqa: E402

TOL = 2e-4


def oracle_for(cfg: ModelConfig) -> U2pp:
    return U2pp(U2ppConfig(
        input_dim=cfg.input_dim, vocab_size=cfg.vocab_size, output_size=cfg.output_size,
        attention_heads=cfg.attention_heads, linear_units=cfg.linear_units,
        num_blocks=cfg.num_blocks, cnn_module_kernel=cfg.cnn_module_kernel, causal=True,
        cnn_module_norm="layer_norm", use_dynamic_chunk=True, decoder_heads=cfg.attention_heads,
        decoder_linear_units=cfg.decoder_linear_units,
        decoder_num_blocks=cfg.decoder_num_blocks,
        decoder_r_num_blocks=cfg.decoder_r_num_blocks, persistent_pos_tables=False))


def randomize(model: torch.nn.Module, seed: int) -> None:
    """Non-trivial weights everywhere (biases and norms off their identity)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = p[0].numel() if p.dim() > 1 else 1
            std = 0.05 if p.dim() == 1 else 1.0 / fan_in ** 0.5
            base = 1.0 if (p.dim() == 1 and "norm" in name and name.endswith("weight")) else 0.0
            p.copy_(base + torch.randn(p.shape, generator=gen) * std)
        model.encoder.global_cmvn.mean.copy_(torch.randn(80, generator=gen))
        model.encoder.global_cmvn.istd.copy_(0.5 + torch.rand(80, generator=gen))


def main():
    torch.set_num_threads(1)
    cfg = ModelConfig(num_blocks=2, linear_units=96, output_size=64, attention_heads=4,
                      decoder_linear_units=80, decoder_num_blocks=2, decoder_r_num_blocks=1)
    mine = U2ppModel(cfg)
    randomize(mine, 3)
    mine.eval()
    oracle = oracle_for(cfg)
    oracle.load_state_dict(mine.state_dict(), strict=True)
    assert set(oracle.state_dict()) == set(mine.state_dict())

    gen = torch.Generator().manual_seed(5)
    lengths = torch.tensor([131, 97, 60])
    feats = torch.randn(3, 131, 80, generator=gen) * 3 + 5
    for i, n in enumerate(lengths.tolist()):
        feats[i, n:] = 0.0
    worst = 0.0
    for chunk in (-1, 4):
        with torch.no_grad():
            lp, enc, valid, enc_lens = mine.ctc_log_probs(feats, lengths, chunk)
            ref_enc, ref_lens = oracle.encode(feats, lengths, chunk, -1)
        assert torch.equal(enc_lens, ref_lens), (enc_lens, ref_lens)
        for i, n in enumerate(enc_lens.tolist()):
            d = float((enc[i, :n] - ref_enc[i, :n]).abs().max())
            ref_lp = oracle.ctc.log_softmax(ref_enc[i, :n])
            d = max(d, float((lp[i, :n] - ref_lp).abs().max()))
            worst = max(worst, d)
            assert d < TOL, f"chunk {chunk} utterance {i}: encoder/CTC diff {d}"
    # Decoders on utterance 0: left/right log-probs of two hypotheses.
    hyps = [[3, 5, 7, 9], [4, 4, 10]]
    with torch.no_grad():
        enc, valid, enc_lens = mine.encoder(feats[:1], lengths[:1])
        ref_l, ref_r = oracle.decoder_log_probs(enc, hyps)
        n = len(hyps)
        steps = ref_l.size(1)
        left = torch.full((n, steps), cfg.eos)
        right = torch.full((n, steps), cfg.eos)
        for i, h in enumerate(hyps):
            left[i, 0] = right[i, 0] = cfg.sos
            left[i, 1:len(h) + 1] = torch.tensor(h)
            right[i, 1:len(h) + 1] = torch.tensor(h[::-1])
        lens = torch.tensor([len(h) + 1 for h in hyps])
        mem = enc.expand(n, -1, -1)
        mv = valid.expand(n, -1, -1)
        my_l = F.log_softmax(mine.decoder.left_decoder(mem, mv, left, lens), -1)
        my_r = F.log_softmax(mine.decoder.right_decoder(mem, mv, right, lens), -1)
    for i, h in enumerate(hyps):
        rows = len(h) + 1
        d = max(float((my_l[i, :rows] - ref_l[i, :rows]).abs().max()),
                float((my_r[i, :rows] - ref_r[i, :rows]).abs().max()))
        worst = max(worst, d)
        assert d < TOL, f"decoder hyp {i}: diff {d}"

    # Training loss vs definitions (eval mode: no dropout).
    tokens = torch.tensor([[3, 5, 7, 9], [4, 4, 10, IGNORE_ID], [6, IGNORE_ID, IGNORE_ID,
                                                                  IGNORE_ID]])
    token_lens = torch.tensor([4, 3, 1])
    loss, parts = mine(feats, lengths, tokens, token_lens)
    lp, enc, valid, enc_lens = mine.ctc_log_probs(feats, lengths)
    ctc_ref = sum(
        F.ctc_loss(lp[i, :enc_lens[i]].unsqueeze(1), tokens[i, :token_lens[i]].unsqueeze(0),
                   enc_lens[i:i + 1], token_lens[i:i + 1], reduction="sum") for i in range(3)) / 3
    assert abs(float(parts["ctc"]) - float(ctc_ref)) < 1e-3, (parts["ctc"], ctc_ref)
    att_ref = 0.0
    s = cfg.lsm_weight
    for i in range(3):
        h = tokens[i, :token_lens[i]].tolist()
        with torch.no_grad():
            lo, ro = oracle.decoder_log_probs(enc[i:i + 1, :enc_lens[i]], [h])
        for out, seq in ((lo, h + [cfg.eos]), (ro, h[::-1] + [cfg.eos])):
            w = (1 - cfg.reverse_weight) if out is lo else cfg.reverse_weight
            for j, tok in enumerate(seq):
                row = out[0, j]
                att_ref += w * (-(1 - s) * row[tok] - s / (cfg.vocab_size - 1) *
                                (row.sum() - row[tok])) / 3
    assert abs(float(parts["att"]) - float(att_ref)) < 1e-3, (parts["att"], att_ref)
    total = cfg.ctc_weight * ctc_ref + (1 - cfg.ctc_weight) * att_ref
    assert abs(float(loss) - float(total)) < 1e-3

    default = U2ppModel(ModelConfig())
    count = default.num_parameters()
    assert count <= 10_000_000, count
    print(f"model vs oracle: max abs diff {worst:.2e} (tolerance {TOL}); losses match; "
          f"default config has {count:,} parameters")
    print("test_model: PASS")


if __name__ == "__main__":
    main()

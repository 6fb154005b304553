#!/usr/bin/env python3
"""Proves an exported WeNet directory runs the same in oasr as in PyTorch:
decodes WAV files with `oasr transcribe --output-format json` and with this
folder's model (fbank, CTC greedy search or attention rescoring) and compares
the token sequences. Exits non-zero on a mismatch.

  python3 tools/train/compare_oasr.py --wenet-dir DIR --oasr build/train/oasr \
      --method ctc_greedy_search|attention_rescoring WAV [WAV ...]

The WAVs should be 8 kHz (oasr resamples with soxr, PyTorch with torchaudio,
so other rates are compared only approximately).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from data import read_wav  # noqa: E402
from evaluate import prefix_beam_search, rescore  # noqa: E402
from features import KaldiFbank, SAMPLE_RATE  # noqa: E402
from model import ModelConfig, U2ppModel  # noqa: E402


def config_from_state(state) -> ModelConfig:
    """The architecture read off the tensor shapes of a WeNet final.pt."""
    def count(prefix):
        found = {int(m.group(1)) for k in state for m in [re.match(prefix + r"(\d+)\.", k)] if m}
        return max(found) + 1 if found else 0

    heads, _ = state["encoder.encoders.0.self_attn.pos_bias_u"].shape
    vocab, d = state["ctc.ctc_lo.weight"].shape
    return ModelConfig(
        input_dim=state["encoder.global_cmvn.mean"].numel(), vocab_size=vocab, output_size=d,
        attention_heads=heads, num_blocks=count("encoder.encoders."),
        linear_units=state["encoder.encoders.0.feed_forward.w_1.weight"].shape[0],
        cnn_module_kernel=state["encoder.encoders.0.conv_module.depthwise_conv.weight"].shape[-1],
        decoder_num_blocks=count("decoder.left_decoder.decoders."),
        decoder_r_num_blocks=count("decoder.right_decoder.decoders."),
        decoder_linear_units=state["decoder.left_decoder.decoders.0.feed_forward.w_1.weight"]
        .shape[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wenet-dir", required=True)
    parser.add_argument("--oasr", required=True, help="the oasr binary")
    parser.add_argument("--method", default="ctc_greedy_search",
                        choices=["ctc_greedy_search", "attention_rescoring"])
    parser.add_argument("--ctc-weight", type=float, default=0.3)
    parser.add_argument("--reverse-weight", type=float, default=0.3)
    parser.add_argument("--blank-shift", type=float, default=0.0,
                        help="compare a copy whose CTC blank bias is lowered by this much, so "
                             "that a barely trained smoke model emits tokens")
    parser.add_argument("--random-head", type=int, default=-1,
                        help="compare a copy whose CTC head is random (this seed), so that "
                             "every unit, '▁' included, is emitted by a barely trained model")
    parser.add_argument("wavs", nargs="+")
    args = parser.parse_args()
    torch.set_num_threads(1)

    state = torch.load(os.path.join(args.wenet_dir, "final.pt"), map_location="cpu")
    if args.blank_shift or args.random_head >= 0:
        copy = args.wenet_dir.rstrip("/") + "_perturbed"
        shutil.copytree(args.wenet_dir, copy, dirs_exist_ok=True)
        if args.random_head >= 0:
            gen = torch.Generator().manual_seed(args.random_head)
            w = state["ctc.ctc_lo.weight"]
            w.copy_(torch.randn(w.shape, generator=gen) * 0.5)
            state["ctc.ctc_lo.bias"].zero_()
        state["ctc.ctc_lo.bias"][0] -= args.blank_shift
        torch.save(state, os.path.join(copy, "final.pt"))
        args.wenet_dir = copy
    model = U2ppModel(config_from_state(state))
    model.load_state_dict(state, strict=True)
    model.eval()
    fbank = KaldiFbank()
    mine = []
    for path in args.wavs:
        x, rate = read_wav(path)
        if rate != SAMPLE_RATE:
            print(f"note: {path} is {rate} Hz; resamplers differ, compare loosely")
        w = torch.from_numpy(x).unsqueeze(0)
        feats, counts = fbank(w, torch.tensor([w.size(1)]))
        lp, enc, _, enc_lens = model.ctc_log_probs(feats, counts)
        n = int(enc_lens[0])
        if args.method == "ctc_greedy_search":
            seq = lp[0, :n].argmax(-1).tolist()
            toks = [t for k, t in enumerate(seq) if t != 0 and (k == 0 or t != seq[k - 1])]
        else:
            v, i = lp[0, :n].topk(10, -1)
            nbest = prefix_beam_search(v.double().tolist(), i.tolist(), n, 10)
            toks = rescore(model, enc[:, :n], nbest, args.ctc_weight, args.reverse_weight)
        mine.append(toks)
    cmd = [args.oasr, "transcribe", "--ckpt-dir", args.wenet_dir, "--output-format", "json",
           "--decode-method", args.method, "--ctc-weight", str(args.ctc_weight),
           "--reverse-weight", str(args.reverse_weight)] + args.wavs
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    theirs = [json.loads(line) for line in out.splitlines() if line.strip()]
    bad = 0
    for path, toks, result in zip(args.wavs, mine, theirs):
        same = list(result["tokens"]) == list(toks)
        bad += not same
        print(f"{'same' if same else 'DIFFERENT'} {os.path.basename(path)}: {len(toks)} tokens; "
              f"oasr text {result['text']!r}")
        if not same:
            print(f"  pytorch {toks}\n  oasr    {result['tokens']}")
    print(f"{len(args.wavs) - bad}/{len(args.wavs)} utterances agree ({args.method})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a random-weight WeNet U2++ directory and its reference outputs.

  make_u2pp_case.py --out DIR [--size tiny|full] [--seed N] [--layout v3|v2]
                    [--input-layer conv2d|conv2d6|conv2d8]
                    [--cnn-module-norm layer_norm|batch_norm] [--cnn-module-kernel K]

DIR/ (WeNet's own layout)
  final.pt      torch.save(model.state_dict()) as WeNet's save_checkpoint does
  final.yaml    WeNet's checkpoint info file (only a save_time here)
  train.yaml    yaml.dump of the config, with WeNet's key names
  units.txt     "<unit> <id>" lines: <blank> 0, <unk> 1, ..., <sos/eos> V-1
  global_cmvn   JSON {"mean_stat", "var_stat", "frame_num"} (sums over frames)
  audio/*.wav   int16 PCM test utterances (16 kHz mono; u07 8 kHz; u08 44.1 kHz stereo)
  reference/reference.safetensors   tensors (names below), metadata "summary"
  reference/summary.json            the same summary, readable

The paths recorded in train.yaml (cmvn file, symbol table) are training-time
paths that do NOT exist, as in a real WeNet export: loaders must fall back to
the files beside the checkpoint.

Random-weight measures so that every decoding method yields non-empty,
varied hypotheses (documented in summary["generator"]):
  * weights ~ N(0, gain^2 / fan_in), biases and LayerNorm affines perturbed
    around their identities (so every tensor matters);
  * the subsampling projection is scaled by 1/sqrt(d) so that x * sqrt(d)
    stays O(1) and the conformer blocks are not drowned by the input;
  * the encoder attention output projection has gain 0.3: random attention
    averages all frames of an utterance, and 12 such layers would make every
    frame alike (rank collapse);
  * every residual branch (subsampling output, macaron FFN, attention, conv
    module, FFN) has its time-mean output over the 16 kHz utterances removed
    from the bias of its last projection (centre_residual_branches);
  * ctc_lo is centred on the mean offline encoder output of the 16 kHz
    utterances (bias -= W.mean) and scaled so its logits vary with std 2.5
    over frames; then the blank bias is set so that blank is the arg-max on
    about half of those frames; <unk> and <sos/eos> biases are lowered by 8
    (a trained model never emits them);
  * the decoders' output layers have gain 2 so rescoring reorders the n-best.
"""

import argparse
import datetime
import json
import os
import sys

import torch
import yaml
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from u2pp_frontend import FBANK_CONF, cmvn_stats_json, load_json_cmvn, write_wav  # noqa: E402
from u2pp_model import U2pp, U2ppConfig  # noqa: E402
from u2pp_reference import (DECODE, MODES, MODES_BY_NAME, decode_batch,  # noqa: E402
                            decode_modes_single, load_model_dir, wav_features)
from u2pp_search import ctc_greedy_search, ctc_prefix_beam_search  # noqa: E402
from u2pp_synth import all_utterances, synthesize  # noqa: E402

SIZES = {
    # tiny: fast oracle test; full: the full-size U2++ (12 blocks, d 256, FFN 2048)
    "tiny": dict(num_blocks=2, decoder_num_blocks=1, decoder_r_num_blocks=1, vocab_size=60),
    "full": dict(num_blocks=12, decoder_num_blocks=3, decoder_r_num_blocks=3,
                 vocab_size=5002),
}
BATCH_MODES = ["offline", "chunk16_mask", "chunk16_left4_mask"]
LOGIT_STD = 2.5
# Random full-context attention averages every frame towards one utterance
# vector; 12 such layers make all frames alike (mean 15 vs 4 of variation).
ATTENTION_OUT_GAIN = 0.3
# Every decision of the 16 kHz references of the tiny and default options is
# >= 1.4e-4 from a tie with this seed (seeds 1..16 tried; 6 and 10 qualify).
DEFAULT_SEED = 10


def make_units(vocab_size: int):
    inner = vocab_size - 3
    if vocab_size <= 200:
        pool = (list("abcdefghijklmnopqrstuvwxyz") + ["\u2581", "'"] + list("0123456789")
                + list("你好世界语音识别中文天气今明年月日时分"))
    else:  # CJK characters, as an aishell-style char vocabulary
        pool = [chr(0x4E00 + i) for i in range(inner)]
    if len(pool) < inner:
        raise ValueError(f"vocab_size {vocab_size} too large for the tiny unit pool")
    return ["<blank>", "<unk>"] + pool[:inner] + ["<sos/eos>"]


def train_yaml(cfg: U2ppConfig, size: str, layout: str) -> dict:
    encoder_conf = {
        "output_size": cfg.output_size, "attention_heads": cfg.attention_heads,
        "linear_units": cfg.linear_units, "num_blocks": cfg.num_blocks,
        "dropout_rate": 0.1, "positional_dropout_rate": 0.1, "attention_dropout_rate": 0.1,
        "input_layer": cfg.input_layer, "normalize_before": True,
        "cnn_module_kernel": cfg.cnn_module_kernel, "use_cnn_module": True,
        "activation_type": "swish", "pos_enc_layer_type": "rel_pos",
        "selfattention_layer_type": "rel_selfattn", "causal": True,
        "use_dynamic_chunk": True, "cnn_module_norm": cfg.cnn_module_norm,
        "use_dynamic_left_chunk": False,
    }
    decoder_conf = {
        "attention_heads": cfg.decoder_heads, "linear_units": cfg.decoder_linear_units,
        "num_blocks": cfg.decoder_num_blocks, "r_num_blocks": cfg.decoder_r_num_blocks,
        "dropout_rate": 0.1, "positional_dropout_rate": 0.1,
        "self_attention_dropout_rate": 0.1, "src_attention_dropout_rate": 0.1,
    }
    conf = {
        "encoder": "conformer", "encoder_conf": encoder_conf,
        "decoder": "bitransformer", "decoder_conf": decoder_conf,
        "model_conf": {"ctc_weight": 0.3, "lsm_weight": 0.1,
                       "length_normalized_loss": False, "reverse_weight": 0.3},
        "dataset_conf": {
            "filter_conf": {"max_length": 40960, "min_length": 0},
            "resample_conf": {"resample_rate": 16000},
            "speed_perturb": True,
            "fbank_conf": {"num_mel_bins": FBANK_CONF["num_mel_bins"],
                           "frame_shift": FBANK_CONF["frame_shift"],
                           "frame_length": FBANK_CONF["frame_length"], "dither": 1.0},
            "spec_aug": True,
            "batch_conf": {"batch_type": "static", "batch_size": 16},
        },
        "grad_clip": 5, "accum_grad": 1, "max_epoch": 360, "log_interval": 100,
        "optim": "adam", "optim_conf": {"lr": 0.001},
        "scheduler": "warmuplr", "scheduler_conf": {"warmup_steps": 25000},
        "input_dim": cfg.input_dim, "output_dim": cfg.vocab_size,
        "vocab_size": cfg.vocab_size, "model_dir": f"exp/u2pp_random_{size}",
    }
    if layout == "v3":  # WeNet >= Dec 2023 (cmvn/tokenizer/ctc sections)
        conf.update({
            "model": "asr_model",
            "cmvn": "global_cmvn",
            "cmvn_conf": {"cmvn_file": "data/train/global_cmvn", "is_json_cmvn": True},
            "ctc": "ctc", "ctc_conf": {"ctc_blank_id": 0},
            "tokenizer": "char",
            "tokenizer_conf": {
                "symbol_table_path": "data/dict/units.txt", "split_with_space": False,
                "bpe_path": None, "non_lang_syms_path": None, "is_multilingual": False,
                "num_languages": 1,
                "special_tokens": {"<blank>": 0, "<unk>": 1, "<sos>": cfg.sos,
                                   "<eos>": cfg.eos},
            },
            "dataset": "asr", "train_engine": "torch_ddp", "use_amp": False,
            "save_states": "model_only",
        })
    else:  # WeNet 2.x: cmvn path at top level, no tokenizer section
        conf.update({"cmvn_file": "data/train/global_cmvn", "is_json_cmvn": True,
                     "raw_wav": True})
    return conf


def init_random(model: U2pp, seed: int) -> None:
    """Deterministic random weights (see the module docstring)."""
    gen = torch.Generator().manual_seed(seed)
    d = model.cfg.output_size

    def normal(shape, std):
        return torch.randn(shape, generator=gen) * std

    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("pos_bias_u", "pos_bias_v")):
                p.copy_(normal(p.shape, 0.3))
            elif p.dim() == 1 and "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + normal(p.shape, 0.1))
            elif p.dim() == 1:
                p.copy_(normal(p.shape, 0.05))
            elif name.endswith("embed.0.weight"):  # decoder token embedding
                p.copy_(normal(p.shape, 1.0 / d ** 0.5))
            else:
                gain = 1.0
                if name.endswith("output_layer.weight"):
                    gain = 2.0
                elif name.startswith(("encoder.embed.out", "encoder.embed.linear")):
                    gain = 1.0 / d ** 0.5
                elif name.startswith("encoder.") and name.endswith("self_attn.linear_out.weight"):
                    gain = ATTENTION_OUT_GAIN
                p.copy_(normal(p.shape, gain / p[0].numel() ** 0.5))
        for name, buf in model.named_buffers():
            if name.endswith("running_mean"):
                buf.copy_(normal(buf.shape, 0.1))
            elif name.endswith("running_var"):
                buf.copy_(0.5 + 1.5 * torch.rand(buf.shape, generator=gen))
            elif name.endswith("num_batches_tracked"):
                buf.fill_(1000)


@torch.no_grad()
def centre_residual_branches(model: U2pp, feats_list) -> int:
    """Data-dependent init: subtract from the bias of the last projection of
    every residual branch (subsampling output, macaron FFN, attention, conv
    module, FFN) its mean output over the calibration frames, branch by branch
    in network order. A random conformer otherwise produces outputs dominated
    by one constant direction (mean norm ~15 vs ~3 of per-frame variation
    after after_norm), which makes hypotheses degenerate and amplifies float
    rounding in the CTC logits. Returns the number of centred projections."""
    enc = model.encoder

    def centre(module, run):
        captured = []
        hook = module.register_forward_hook(lambda m, i, o: captured.append(o.detach()))
        run()
        hook.remove()
        if isinstance(module, torch.nn.Conv1d):  # (1, C, T)
            mean = torch.cat([c[0].t() for c in captured]).mean(dim=0)
        else:  # (1, T, C)
            mean = torch.cat([c[0] for c in captured]).mean(dim=0)
        module.bias.sub_(mean)

    def embed_all():
        return [enc.embed(enc.global_cmvn(f.unsqueeze(0)), torch.tensor([f.size(0)]))[0]
                for f in feats_list]

    centre(enc.embed.proj_module(), embed_all)
    streams = embed_all()
    count = 1
    for layer in enc.encoders:
        branches = [layer.self_attn.linear_out, layer.feed_forward.w_2]
        if layer.feed_forward_macaron is not None:
            branches.insert(0, layer.feed_forward_macaron.w_2)
        if layer.conv_module is not None:
            branches.insert(-1, layer.conv_module.pointwise_conv2)

        def run_layer():
            return [layer(x, None, enc.embed.pos_enc.rows(0, x.size(1)))[0] for x in streams]

        for module in branches:
            centre(module, run_layer)
            count += 1
        streams = run_layer()
    return count


@torch.no_grad()
def calibrate_ctc_head(model: U2pp, feats_list) -> dict:
    """A random encoder's outputs share a large constant component (mean norm
    ~5x the per-frame variation), which would make a few tokens win every
    frame. Centre ctc_lo on the mean output, scale it so logits vary by
    LOGIT_STD across frames, then shift the blank bias so that blank wins
    about half of the frames."""
    enc = torch.cat([model.encode(f.unsqueeze(0), torch.tensor([f.size(0)]))[0][0]
                     for f in feats_list])
    mean = enc.mean(dim=0)
    head = model.ctc.ctc_lo
    scale = LOGIT_STD / float((enc - mean).matmul(head.weight.t()).std())
    head.weight.mul_(scale)
    head.bias.sub_(head.weight.matmul(mean))
    head.bias[1] -= 8.0
    head.bias[model.cfg.vocab_size - 1] -= 8.0
    logits = head(enc)
    margins = (logits[:, 1:].max(dim=1).values - logits[:, 0]).sort().values
    # Put the blank boundary in the widest gap between consecutive margins
    # near the median (the median itself would make one frame an exact tie).
    n = margins.numel()
    lo, hi = int(n * 0.4), int(n * 0.6)
    widest = lo + int((margins[lo + 1:hi + 1] - margins[lo:hi]).argmax())
    shift = float((margins[widest] + margins[widest + 1]) / 2)
    head.bias[0] += shift
    return {"ctc_lo_weight_scale": scale, "ctc_lo_centred_on_mean_output": True,
            "blank_bias_shift": shift, "unk_and_sos_eos_bias_shift": -8.0,
            "logit_std": LOGIT_STD}


def search_cases():
    """Synthetic CTC log-prob matrices for unit-testing the searches alone.
    'swap_tie' makes prefixes (a,b) and (b,a) score exactly equal (x+y == y+x
    in IEEE), with distinct values within each frame, so the stable-sort /
    first-insertion rule decides their order."""
    cases = {}
    v = 6
    x, y = -0.4, -1.6
    frames = torch.full((3, v), -9.0)
    frames[0, 2], frames[0, 3], frames[0, 0] = x, y, -2.5
    frames[1, 2], frames[1, 3], frames[1, 0] = x, y, -2.7
    frames[2, 0], frames[2, 4] = -0.3, -3.1
    frames[:, 5] = torch.tensor([-6.0, -6.5, -7.0])
    frames[:, 1] = torch.tensor([-5.0, -5.5, -6.2])
    cases["swap_tie"] = (frames, 4)
    gen = torch.Generator().manual_seed(7)
    peaky = torch.log_softmax(torch.randn(24, 7, generator=gen) * 2.5, dim=1)
    cases["peaky_beam4"] = (peaky, 4)
    cases["peaky_beam1"] = (peaky, 1)
    cases["peaky_beam7"] = (peaky, 7)
    cases["one_frame"] = (peaky[:1].clone(), 3)
    out_tensors, out_summary = {}, {}
    for name, (lp, beam) in cases.items():
        lp = lp.contiguous()
        out_tensors[f"search/{name}/log_probs"] = lp
        nbest = ctc_prefix_beam_search(lp, lp.size(0), beam)
        out_summary[name] = {
            "beam_size": beam, "frames": lp.size(0),
            "ctc_greedy_search": ctc_greedy_search(lp.unsqueeze(0),
                                                   torch.tensor([lp.size(0)]))[0],
            "ctc_prefix_beam_search_nbest": [{"tokens": list(h), "score": s}
                                             for h, s in nbest],
        }
    return out_tensors, out_summary


def write_model_dir(args, cfg, units, specs):
    out = args.out
    os.makedirs(os.path.join(out, "audio"), exist_ok=True)
    os.makedirs(os.path.join(out, "reference"), exist_ok=True)
    with open(os.path.join(out, "units.txt"), "w", encoding="utf-8") as f:
        for i, u in enumerate(units):
            f.write(f"{u} {i}\n")
    for i, spec in enumerate(specs):
        write_wav(os.path.join(out, "audio", spec.name + ".wav"),
                  synthesize(spec, (args.seed * 1000 + i) % 2**32), spec.rate)
    # CMVN statistics over the 16 kHz utterances, like compute_cmvn_stats.py
    feats16 = [wav_features(os.path.join(out, "audio", s.name + ".wav"))[1]
               for s in specs if s.exact]
    with open(os.path.join(out, "global_cmvn"), "w") as f:
        json.dump(cmvn_stats_json(feats16), f)
    mean, istd = load_json_cmvn(os.path.join(out, "global_cmvn"))

    model = U2pp(cfg)
    init_random(model, args.seed)
    model.encoder.global_cmvn.mean.copy_(mean)
    model.encoder.global_cmvn.istd.copy_(istd)
    centred = centre_residual_branches(model, feats16)
    calibration = calibrate_ctc_head(model, feats16)
    calibration["centred_branch_projections"] = centred
    torch.save(model.state_dict(), os.path.join(out, "final.pt"))
    with open(os.path.join(out, "final.yaml"), "w") as f:
        f.write(yaml.dump({"save_time": datetime.datetime.now().strftime("%d/%m/%Y %H:%M:%S"),
                           "tag": "final"}))
    with open(os.path.join(out, "train.yaml"), "w", encoding="utf-8") as f:
        f.write(yaml.dump(train_yaml(cfg, args.size, args.layout), allow_unicode=True))
    return calibration


def compute_reference(args, specs, calibration):
    """Everything below is recomputed from the files on disk."""
    model, conf, units = load_model_dir(args.out)
    tensors, utterances = {}, {}
    feats_exact = []
    for spec in specs:
        wav, feats = wav_features(os.path.join(args.out, "audio", spec.name + ".wav"))
        cmvn = model.encoder.global_cmvn
        tensors[f"{spec.name}/waveform_16k"] = wav[0]
        tensors[f"{spec.name}/fbank"] = feats
        tensors[f"{spec.name}/feats_cmvn"] = (feats - cmvn.mean) * cmvn.istd
        per_mode, summary = decode_modes_single(model, feats, units)
        for mode, outs in per_mode.items():
            for role, t in outs.items():
                tensors[f"{spec.name}/{mode}/{role}"] = t
        utterances[spec.name] = {
            "wav": f"audio/{spec.name}.wav", "sample_rate": spec.rate,
            "channels": spec.channels, "exact_frontend": spec.exact, "note": spec.note,
            "fbank_frames": feats.size(0), "modes": summary,
        }
        if spec.exact:
            feats_exact.append((spec.name, feats))
    batch = {"utterances": [n for n, _ in feats_exact], "modes": {}}
    for mode_name in BATCH_MODES:
        bt, bs = decode_batch(model, [f for _, f in feats_exact], units,
                              MODES_BY_NAME[mode_name])
        for role, t in bt.items():
            if role in ("feats", "lengths"):
                tensors[f"batch/{role}"] = t
            else:
                tensors[f"batch/{mode_name}/{role}"] = t
        batch["modes"][mode_name] = {n: s for (n, _), s in zip(feats_exact, bs)}
    st, ss = search_cases()
    tensors.update(st)
    cfg = model.cfg
    summary = {
        "size": args.size, "seed": args.seed, "layout": args.layout,
        "options": {"input_layer": args.input_layer, "cnn_module_norm": args.cnn_module_norm,
                    "cnn_module_kernel": args.cnn_module_kernel},
        "default_case": (args.size == "tiny" and args.seed == DEFAULT_SEED
                         and args.input_layer == "conv2d"
                         and args.cnn_module_norm == "layer_norm"
                         and args.cnn_module_kernel == 15),
        "vocab_size": cfg.vocab_size, "sos": cfg.sos, "eos": cfg.eos,
        "blank_id": cfg.blank_id, "ignore_id": cfg.ignore_id,
        "decode": DECODE,
        "modes": [m.__dict__ for m in MODES],
        "text_rule": "text: units concatenated (WeNet CharTokenizer.detokenize, U+2581 kept); "
                     "text_spaced: U+2581 -> space, ends stripped",
        "generator": {"calibration": calibration,
                      "init": "see make_u2pp_case.py docstring"},
        "utterances": utterances, "batch": batch, "search_cases": ss,
    }
    return tensors, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"{DEFAULT_SEED}: every decision of the tiny 16 kHz "
                             "references is >= 1.4e-4 from a tie (see README.md)")
    parser.add_argument("--layout", choices=["v3", "v2"], default="v3",
                        help="v3: current WeNet train.yaml and pe buffers in final.pt; "
                             "v2: WeNet 2.x (top-level cmvn_file, no pe buffers)")
    parser.add_argument("--input-layer", default="conv2d",
                        choices=["conv2d", "conv2d6", "conv2d8"])
    parser.add_argument("--cnn-module-norm", default="layer_norm",
                        choices=["layer_norm", "batch_norm"])
    parser.add_argument("--cnn-module-kernel", type=int, default=15)
    args = parser.parse_args()

    # One thread: on a shared 2-core machine OpenMP's spinning threads make
    # small ops 10-100x slower, and one thread keeps the reference reproducible.
    torch.set_num_threads(1)
    cfg = U2ppConfig(input_layer=args.input_layer, cnn_module_norm=args.cnn_module_norm,
                     cnn_module_kernel=args.cnn_module_kernel,
                     persistent_pos_tables=args.layout == "v3", **SIZES[args.size])
    specs = all_utterances()
    calibration = write_model_dir(args, cfg, make_units(cfg.vocab_size), specs)
    tensors, summary = compute_reference(args, specs, calibration)
    text = json.dumps(summary, ensure_ascii=False, indent=1)
    with open(os.path.join(args.out, "reference", "summary.json"), "w",
              encoding="utf-8") as f:
        f.write(text)
    save_file({k: v.detach().contiguous().clone() for k, v in tensors.items()},
              os.path.join(args.out, "reference", "reference.safetensors"),
              metadata={"summary": json.dumps(summary, ensure_ascii=False)})
    print(f"wrote {args.out}: {len(tensors)} reference tensors")


if __name__ == "__main__":
    main()

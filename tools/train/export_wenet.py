#!/usr/bin/env python3
"""Exports a train.py checkpoint as a WeNet model directory that oasr (and
WeNet) load:

  final.pt          torch.save(state_dict), fp32, WeNet 2.x names (no pe tables)
  train.yaml        WeNet's schema (encoder/decoder/model/ctc/tokenizer/cmvn and
                    dataset_conf with resample_rate 8000 and fbank_conf)
  units.txt         <blank> 0, <unk> 1, ', A..Z, ▁, <sos/eos>
  global_cmvn       WeNet JSON CMVN statistics
  char_units.model  a SentencePiece model of model_type CHAR over the same
                    characters (tokenizer: bpe), see below

Why the tokenizer is "bpe": WeNet's char tokenizer prints the "▁" word
boundary as it is ("HELLO▁WORLD"); its bpe tokenizer turns "▁" into spaces,
which is what oasr's detokenizer does for tokenizer bpe (src/decode/units.cc).
A SentencePiece CHAR model with exactly our characters encodes text to the
same unit sequence the model was trained on (no dummy prefix), so the
directory is a consistent WeNet bpe setup.

  python3 tools/train/export_wenet.py --ckpt RUN_DIR/ckpt --out DIR
"""

import argparse
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checkpoint import load_checkpoint  # noqa: E402
from data import UNITS, WORD_BOUNDARY, write_units  # noqa: E402
from features import FBANK_CONF, SAMPLE_RATE  # noqa: E402
from features import cmvn_from_stats  # noqa: E402
from model import ModelConfig, U2ppModel  # noqa: E402

SPM_NAME = "char_units.model"

# ---- a minimal YAML emitter (the GPU machine has no PyYAML) -----------------------


def _yaml_scalar(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v), ensure_ascii=False)  # a JSON string is a YAML string


def to_yaml(obj: dict, indent: int = 0) -> str:
    lines = []
    for key in sorted(obj):
        value = obj[key]
        name = key if str(key).isidentifier() else _yaml_scalar(key)
        head = " " * indent + name
        if isinstance(value, dict) and value:
            lines.append(head + ":")
            lines.append(to_yaml(value, indent + 2))
        else:
            lines.append(f"{head}: {_yaml_scalar(value) if not isinstance(value, dict) else '{}'}")
    return "\n".join(lines)


# ---- SentencePiece model (protobuf written by hand) -------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    key = _varint((number << 3) | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def sentencepiece_char_model(characters) -> bytes:
    """ModelProto: pieces <unk> (UNKNOWN), <s>, </s> (CONTROL), then the
    characters (NORMAL); trainer_spec model_type CHAR; identity normalizer
    with whitespace escaped to '▁' and no dummy prefix."""
    pieces = [("<unk>", 2), ("<s>", 3), ("</s>", 3)] + [(c, 1) for c in characters]
    body = b""
    for i, (piece, kind) in enumerate(pieces):
        score = 0.0 if kind != 1 else -float(i)
        sp = (_field(1, 2, piece.encode("utf-8")) + _field(2, 5, struct.pack("<f", score)) +
              _field(3, 0, _varint(kind)))
        body += _field(1, 2, sp)
    trainer = (_field(3, 0, _varint(4)) +  # model_type CHAR
               _field(4, 0, _varint(len(pieces))) +  # vocab_size
               _field(40, 0, _varint(0)) + _field(41, 0, _varint(1)) +  # unk_id, bos_id
               _field(42, 0, _varint(2)) + _field(43, 0, _varint((1 << 64) - 1)))  # eos, pad -1
    normalizer = (_field(1, 2, b"identity") + _field(3, 0, _varint(0)) +  # add_dummy_prefix
                  _field(4, 0, _varint(1)) + _field(5, 0, _varint(1)))  # ws: remove, escape
    return body + _field(2, 2, trainer) + _field(3, 2, normalizer)


# ---- train.yaml ---------------------------------------------------------------------


def train_yaml(cfg: ModelConfig) -> dict:
    vocab = cfg.vocab_size
    return {
        "model": "asr_model",
        "encoder": "conformer",
        "encoder_conf": {
            "output_size": cfg.output_size, "attention_heads": cfg.attention_heads,
            "linear_units": cfg.linear_units, "num_blocks": cfg.num_blocks,
            "dropout_rate": cfg.dropout_rate,
            "positional_dropout_rate": cfg.positional_dropout_rate,
            "attention_dropout_rate": cfg.attention_dropout_rate, "input_layer": "conv2d",
            "normalize_before": True, "macaron_style": True, "use_cnn_module": True,
            "cnn_module_kernel": cfg.cnn_module_kernel, "activation_type": "swish",
            "pos_enc_layer_type": "rel_pos", "selfattention_layer_type": "rel_selfattn",
            "causal": True, "use_dynamic_chunk": True, "use_dynamic_left_chunk": False,
            "cnn_module_norm": "layer_norm",
        },
        "decoder": "bitransformer",
        "decoder_conf": {
            "attention_heads": cfg.attention_heads, "linear_units": cfg.decoder_linear_units,
            "num_blocks": cfg.decoder_num_blocks, "r_num_blocks": cfg.decoder_r_num_blocks,
            "dropout_rate": cfg.dropout_rate,
            "positional_dropout_rate": cfg.positional_dropout_rate,
            "self_attention_dropout_rate": cfg.attention_dropout_rate,
            "src_attention_dropout_rate": cfg.attention_dropout_rate,
        },
        "model_conf": {"ctc_weight": cfg.ctc_weight, "lsm_weight": cfg.lsm_weight,
                       "length_normalized_loss": False, "reverse_weight": cfg.reverse_weight},
        "ctc": "ctc",
        "ctc_conf": {"ctc_blank_id": 0},
        "cmvn": "global_cmvn",
        "cmvn_conf": {"cmvn_file": "data/train/global_cmvn", "is_json_cmvn": True},
        "tokenizer": "bpe",
        "tokenizer_conf": {
            "symbol_table_path": "data/dict/units.txt", "split_with_space": False,
            "bpe_path": f"data/dict/{SPM_NAME}", "non_lang_syms_path": None,
            "is_multilingual": False, "num_languages": 1,
            "special_tokens": {"<blank>": 0, "<unk>": 1, "<sos>": vocab - 1, "<eos>": vocab - 1},
        },
        "dataset": "asr",
        "dataset_conf": {
            "filter_conf": {"max_length": 4000, "min_length": 10},
            "resample_conf": {"resample_rate": SAMPLE_RATE},
            "speed_perturb": True,
            "fbank_conf": {"num_mel_bins": FBANK_CONF["num_mel_bins"],
                           "frame_shift": FBANK_CONF["frame_shift"],
                           "frame_length": FBANK_CONF["frame_length"], "dither": 1.0},
            "spec_aug": True,
            "spec_aug_conf": {"num_t_mask": 2, "num_f_mask": 2, "max_t": 50, "max_f": 10},
        },
        "input_dim": cfg.input_dim,
        "output_dim": vocab,
        "vocab_size": vocab,
        "grad_clip": 5,
        "optim": "adamw",
        "model_dir": "exp/oasr_u2pp_char8k",
        "train_engine": "torch_ddp",
        "save_states": "model_only",
        "use_amp": True,
    }


def stats_matching_buffers(state: dict, cmvn_stats: dict) -> dict:
    """WeNet JSON statistics whose load_cmvn result (float64, then float32)
    is exactly the model's CMVN buffers. The buffers can differ from the
    training statistics (a checkpoint carried in fp16 rounds them), and the
    model was trained with the buffers, so they are the truth; WeNet and our
    oracle require the file and final.pt to agree."""
    mean = state["encoder.global_cmvn.mean"].double()
    istd = state["encoder.global_cmvn.istd"].double()
    count = cmvn_stats["frame_num"]
    var = 1.0 / (istd * istd)
    stats = {"mean_stat": (mean * count).tolist(),
             "var_stat": ((var + mean * mean) * count).tolist(), "frame_num": count}
    check_mean, check_istd = cmvn_from_stats(stats)
    if not (torch.equal(check_mean, state["encoder.global_cmvn.mean"])
            and torch.equal(check_istd, state["encoder.global_cmvn.istd"])):
        raise ValueError("could not write global_cmvn statistics that reproduce the buffers")
    return stats


def export(model: U2ppModel, cmvn_stats: dict, out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    state = {k: v.detach().float().cpu().clone() for k, v in model.state_dict().items()}
    torch.save(state, os.path.join(out_dir, "final.pt"))
    with open(os.path.join(out_dir, "train.yaml"), "w", encoding="utf-8") as f:
        f.write(to_yaml(train_yaml(model.cfg)) + "\n")
    write_units(os.path.join(out_dir, "units.txt"))
    with open(os.path.join(out_dir, "global_cmvn"), "w") as f:
        json.dump(stats_matching_buffers(state, cmvn_stats), f)
    characters = [u for u in UNITS if not u.startswith("<")]
    assert WORD_BOUNDARY in characters
    with open(os.path.join(out_dir, SPM_NAME), "wb") as f:
        f.write(sentencepiece_char_model(characters))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True, help="checkpoint dir written by train.py")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    meta, state, _ = load_checkpoint(args.ckpt)
    model = U2ppModel(ModelConfig(**meta["config"]))
    model.load_state_dict(state, strict=True)
    export(model, meta["cmvn"], args.out)
    print(f"exported {args.out} (step {meta['step']}, {model.num_parameters():,} parameters)")


if __name__ == "__main__":
    main()

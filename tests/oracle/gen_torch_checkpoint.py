#!/usr/bin/env python3
"""Oracle for oasr's torch.save reader (io/torch_checkpoint) and its WeNet
directory loader / native converter (models/u2pp/wenet_dir, native_checkpoint).

Generate (--out DIR). Files written by PyTorch's own torch.save:
  DIR/<case>.pt         state dicts in many shapes (see CASES below)
  DIR/<wenet case>/     WeNet experiment directories in WeNet's layout, built
                        with tests/oracle/u2pp (make_u2pp_case's train.yaml,
                        units and random initialisation; small sizes)
  DIR/cases.safetensors the values each file must yield, written by the PyPI
                        safetensors library: "<case>/<tensor name>" holds the
                        tensor as torch.load gives it, made contiguous, with
                        the dtype oasr serves it in (float64 -> float32,
                        int16 -> int32, bool -> uint8, converted by PyTorch);
                        "<wenet case>/cmvn_mean", ".../cmvn_istd": CMVN
                        computed from the statistics file as WeNet's
                        load_cmvn does (float64, then float32).
Metadata "cases": JSON {case: {"file", "names" (in order), "container",
"converted", "refused": null | {"code", "needles"}}, plus for WeNet cases
"dir", "checkpoint", "units", "config" (the U2ppConfig fields)}.
Fixed seeds.
"""

import argparse
import collections
import json
import math
import os
import sys

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "u2pp"))

from make_u2pp_case import init_random, make_units, train_yaml  # noqa: E402
from u2pp_frontend import load_json_cmvn  # noqa: E402
from u2pp_model import U2pp, U2ppConfig  # noqa: E402
import yaml  # noqa: E402

SERVED = {torch.float64: torch.float32, torch.int16: torch.int32, torch.bool: torch.uint8}
TORCH_NAME = {torch.float64: "float64", torch.int16: "int16", torch.bool: "bool",
              torch.float32: "float32", torch.int32: "int32", torch.uint8: "uint8"}


def served(tensor):
    """The tensor as oasr must serve it: contiguous, in a dtype it has."""
    t = tensor.detach().contiguous()
    if t.dtype in SERVED:
        t = t.to(SERVED[t.dtype])
    return t.clone()


def conversions(state):
    return [f"{name}: {TORCH_NAME[t.dtype]} -> {TORCH_NAME[SERVED[t.dtype]]}"
            for name, t in state.items() if t.dtype in SERVED]


def dtype_case():
    g = torch.Generator().manual_seed(11)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    shared = torch.arange(10, dtype=torch.float32) * 0.5
    f64 = torch.randn(3, 4, generator=g, dtype=torch.float64) * 1e3
    sd = collections.OrderedDict()
    sd["f32"] = torch.randn(3, 4, generator=g)
    sd["f32_special"] = torch.tensor([math.inf, -math.inf, math.nan, -0.0, 1e-45, 3.4e38, 1e-40])
    sd["f16"] = torch.randn(5, generator=g).half()
    sd["f16_special"] = torch.tensor([65504.0, -0.0, math.inf, 6e-8], dtype=torch.float16)
    sd["bf16"] = torch.randn(2, 3, generator=g).bfloat16()
    sd["f64"] = f64
    sd["f64_extremes"] = torch.tensor([0.1, 1e-300, 1e300, -1e300, 2.0**-149, 1 + 2.0**-30],
                                      dtype=torch.float64)
    sd["f64_transposed"] = f64.t()
    sd["i64"] = torch.tensor([-2**62, 2**62 + 1, 0, -1], dtype=torch.int64)
    sd["i32"] = torch.tensor([[-2**31, 2**31 - 1], [5, -6]], dtype=torch.int32)
    sd["i16"] = torch.tensor([-32768, 32767, 12], dtype=torch.int16)
    sd["i8"] = torch.tensor([-128, 127, 0, -1], dtype=torch.int8)
    sd["u8"] = torch.tensor([0, 255, 17], dtype=torch.uint8)
    sd["bool"] = torch.tensor([True, False, True, True])
    sd["scalar_f32"] = torch.tensor(3.5)
    sd["scalar_i64"] = torch.tensor(7)
    sd["empty"] = torch.zeros(0)
    sd["empty_3d"] = torch.zeros(2, 0, 3)
    sd["base"] = base
    sd["transposed"] = base.t()
    sd["sliced"] = base[1:, 2:]
    sd["stepped"] = base[:, ::2]
    sd["rows"] = base[1:3]
    sd["column"] = base[:, 1]
    sd["expanded"] = torch.arange(3, dtype=torch.float32).expand(2, 3)
    sd["f16_transposed"] = torch.randn(3, 2, generator=g).half().t()
    sd["shared"] = shared
    sd["shared_slice"] = shared[2:5]
    sd["shared_matrix"] = shared.view(2, 5)
    return sd


def module_state():
    torch.manual_seed(5)
    model = torch.nn.ModuleDict({
        "mlp": torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                   torch.nn.ReLU(), torch.nn.Linear(8, 3)),
        "tel": torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32),
    })
    model.train()
    model["mlp"](torch.randn(6, 4))  # BatchNorm statistics and num_batches_tracked move
    return model, model.state_dict()


def wenet_case(out, name, layout, kaldi_cmvn, checkpoint_name, seed):
    """A WeNet directory: final.pt (or checkpoint_name), train.yaml, units.txt,
    global_cmvn; returns (state dict, cmvn mean, istd, metadata)."""
    cfg = U2ppConfig(input_dim=80, vocab_size=30, output_size=32, attention_heads=4,
                     linear_units=48, num_blocks=2, cnn_module_kernel=5,
                     decoder_heads=4, decoder_linear_units=40, decoder_num_blocks=1,
                     decoder_r_num_blocks=1, persistent_pos_tables=layout == "v3",
                     pos_table_len=5000)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    units = make_units(cfg.vocab_size)
    with open(os.path.join(d, "units.txt"), "w", encoding="utf-8") as f:
        for i, u in enumerate(units):
            f.write(f"{u} {i}\n")
    # CMVN statistics of made-up features (sums over frames, in float64).
    g = torch.Generator().manual_seed(seed)
    frames = 1234
    feats = torch.randn(frames, cfg.input_dim, generator=g, dtype=torch.float64) * 3 + 7
    sums = feats.sum(0).tolist()
    squares = (feats * feats).sum(0).tolist()
    squares[5] = sums[5] * sums[5] / frames  # variance ~0: WeNet floors it at 1e-20
    cmvn_path = os.path.join(d, "global_cmvn")
    if kaldi_cmvn:
        with open(cmvn_path, "w") as f:  # compute-cmvn-stats --binary=false
            f.write(" [\n  " + " ".join(repr(v) for v in sums) + f" {frames}\n  "
                    + " ".join(repr(v) for v in squares) + " 0 ]\n")
        mean, istd = kaldi_cmvn_reference(cmvn_path)
    else:
        with open(cmvn_path, "w") as f:
            json.dump({"mean_stat": sums, "var_stat": squares, "frame_num": frames}, f)
        mean, istd = load_json_cmvn(cmvn_path)

    model = U2pp(cfg)
    init_random(model, seed)
    model.encoder.global_cmvn.mean.copy_(mean)
    model.encoder.global_cmvn.istd.copy_(istd)
    state = model.state_dict()
    if kaldi_cmvn:  # the loader must supply the buffers from the statistics
        del state["encoder.global_cmvn.mean"]
        del state["encoder.global_cmvn.istd"]
    torch.save(state, os.path.join(d, checkpoint_name))
    conf = train_yaml(cfg, "tiny", layout)
    if kaldi_cmvn:
        conf["cmvn_conf"]["is_json_cmvn"] = False
    with open(os.path.join(d, "train.yaml"), "w", encoding="utf-8") as f:
        f.write(yaml.dump(conf, allow_unicode=True))
    config = {"input_dim": cfg.input_dim, "vocab_size": cfg.vocab_size,
              "output_size": cfg.output_size, "attention_heads": cfg.attention_heads,
              "linear_units": cfg.linear_units, "num_blocks": cfg.num_blocks,
              "cnn_module_kernel": cfg.cnn_module_kernel, "causal": cfg.causal,
              "cnn_module_norm": cfg.cnn_module_norm, "decoder_num_blocks": cfg.decoder_num_blocks,
              "decoder_r_num_blocks": cfg.decoder_r_num_blocks, "sos": cfg.sos, "eos": cfg.eos,
              "ctc_weight": 0.3, "reverse_weight": 0.3}
    meta = {"dir": name, "checkpoint": checkpoint_name, "units": units, "config": config}
    return state, mean, istd, meta


def kaldi_cmvn_reference(path):
    """WeNet's _load_kaldi_cmvn, from its definition: a 2 x (D+1) text matrix."""
    with open(path) as f:
        arr = f.read().split()
    assert arr[0] == "[" and arr[-2] == "0" and arr[-1] == "]"
    dim = (len(arr) - 4) // 2
    count = float(arr[dim + 1])
    means, istds = [], []
    for i in range(dim):
        mean = float(arr[1 + i]) / count
        var = max(float(arr[dim + 2 + i]) / count - mean * mean, 1.0e-20)
        means.append(mean)
        istds.append(1.0 / math.sqrt(var))
    return (torch.tensor(means, dtype=torch.float64).float(),
            torch.tensor(istds, dtype=torch.float64).float())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = args.out
    os.makedirs(out, exist_ok=True)
    tensors, cases = {}, {}

    def record(case, file, state, container="", refused=None):
        cases[case] = {"file": file, "names": list(state.keys()), "container": container,
                       "converted": conversions(state), "refused": refused}
        for name, t in state.items():
            tensors[f"{case}/{name}"] = served(t)

    dtypes = dtype_case()
    torch.save(dtypes, os.path.join(out, "dtypes.pt"))
    record("dtypes", "dtypes.pt", dtypes)

    model, module_sd = module_state()
    torch.save(module_sd, os.path.join(out, "module.pt"))
    record("module", "module.pt", module_sd)

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model["mlp"](torch.randn(6, 4)).sum().backward()
    optimizer.step()
    wrapped = {"model": module_sd, "optimizer": optimizer.state_dict(), "epoch": 7,
               "args": argparse.Namespace(lr=0.1, name="run"), "tags": {"a", "b"},
               "blob": b"\x00\xff", "lr": 1e-3, "huge": 2**70, "note": "caf\u00e9"}
    torch.save(wrapped, os.path.join(out, "wrapped.pt"))
    record("wrapped", "wrapped.pt", module_sd, container="model")

    small = collections.OrderedDict(w=torch.randn(2, 2), b=torch.zeros(2))
    torch.save({"state_dict": small, "hyper_parameters": {"depth": 4}, "epoch": 3},
               os.path.join(out, "lightning.pt"))
    record("lightning", "lightning.pt", small, container="state_dict")

    params = dict(torch.nn.Linear(3, 2).named_parameters())  # nn.Parameter values
    torch.save(params, os.path.join(out, "parameters.pt"))
    record("parameters", "parameters.pt", params)

    torch.save(small, os.path.join(out, "protocol4.pt"), pickle_protocol=4)
    record("protocol4", "protocol4.pt", small)

    torch.save(small, os.path.join(out, "legacy.pt"), _use_new_zipfile_serialization=False)
    record("legacy", "legacy.pt", {}, refused={"code": "unsupported",
                                               "needles": ["legacy torch.save format"]})
    torch.save({"weights": torch.ones(2), "epoch": 3}, os.path.join(out, "no_model.pt"))
    record("no_model", "no_model.pt", {}, refused={
        "code": "corrupt", "needles": ["no 'model' or 'state_dict'", "'weights' (tensor)",
                                       "'epoch' (int 3)"]})

    for name, layout, kaldi, checkpoint, seed in [("wenet_v3", "v3", False, "final.pt", 4),
                                                  ("wenet_v2", "v2", False, "avg_10.pt", 5),
                                                  ("wenet_kaldi", "v3", True, "final.pt", 6)]:
        state, mean, istd, meta = wenet_case(out, name, layout, kaldi, checkpoint, seed)
        record(name, os.path.join(name, checkpoint), state)
        cases[name].update(meta)
        tensors[f"{name}/cmvn_mean"] = mean.contiguous()
        tensors[f"{name}/cmvn_istd"] = istd.contiguous()

    save_file(tensors, os.path.join(out, "cases.safetensors"),
              metadata={"cases": json.dumps(cases, ensure_ascii=False)})
    print(f"wrote {out}: {len(cases)} cases, {len(tensors)} tensors")


if __name__ == "__main__":
    main()

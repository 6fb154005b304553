"""Writes a random-weight NeMo FastConformer CTC .nemo of a published model's
encoder dimensions, for speed measurements (`oasr bench fastconformer`).

Presets (NeMo's model cards): parakeet-ctc-1.1b (42 layers) and
parakeet-ctc-0.6b (24 layers), both d_model 1024, 8 heads, FFN 4096, conv
kernel 9, dw_striding 8x subsampling with 256 channels, 80 mel bins;
fastconformer-ctc-0.1b (stt_en_fastconformer_ctc_large's 18 layers of 512,
8 heads, FFN 2048, 256 subsampling channels). --layers overrides the count.

The tokenizer, preprocessor and decoding settings come from --template (the
oracle's tests/oracle/fastconformer/data/ctc.nemo): its 48 pieces make a CTC
head of 49 outputs where the published models have 1025 (about 0.1 % of
the 1.1b encoder's multiply-adds; say so with the figures). The weights are
drawn from the template's parameter names with every layer's shapes scaled
to the preset (normal, 1/sqrt(fan_in) for weights; LayerNorm and BatchNorm
at their identity), saved float32 as NeMo saves them.

    make_fastconformer_random.py --template ctc.nemo --out model.nemo
        [--preset parakeet-ctc-1.1b] [--layers N] [--seed 0]
Needs torch and PyYAML.
"""
import argparse
import io
import pathlib
import re
import sys
import tarfile

PRESETS = {
    "parakeet-ctc-1.1b": dict(n_layers=42, d_model=1024, n_heads=8, channels=256),
    "parakeet-ctc-0.6b": dict(n_layers=24, d_model=1024, n_heads=8, channels=256),
    "fastconformer-ctc-0.1b": dict(n_layers=18, d_model=512, n_heads=8, channels=256),
}
FF_EXPANSION = 4


def read_template(path):
    with tarfile.open(path) as tar:
        members = {m.name.lstrip("./"): tar.extractfile(m).read() for m in tar if m.isfile()}
    return members


def scaled_shape(name, shape, old, new):
    """The template tensor's shape with each dimension that is a model size
    replaced by the preset's (each size is a distinct number in the
    template, checked in main)."""
    if name.startswith("preprocessor."):
        return tuple(shape)
    mapping = {
        old["d_model"]: new["d_model"],
        FF_EXPANSION * old["d_model"]: FF_EXPANSION * new["d_model"],
        2 * old["d_model"]: 2 * new["d_model"],
        old["channels"]: new["channels"],
        old["channels"] * old["freq"]: new["channels"] * new["freq"],
        old["n_heads"]: new["n_heads"],
        old["d_model"] // old["n_heads"]: new["d_model"] // new["n_heads"],
    }
    if name.startswith("decoder."):  # the CTC head keeps its classes
        return tuple(mapping[d] if i == 1 else d for i, d in enumerate(shape))
    # Kernel sizes (1, 3, 9) are none of the sizes, so they stay.
    return tuple(mapping.get(d, d) for d in shape)


def random_tensor(torch, name, shape, generator):
    if name.endswith("num_batches_tracked"):
        return torch.zeros((), dtype=torch.int64)
    if re.search(r"(norm_[a-z_0-9]+|batch_norm)\.weight$", name) or name.endswith("running_var"):
        return torch.ones(shape)
    if re.search(r"(norm_[a-z_0-9]+|batch_norm)\.bias$", name) or name.endswith("running_mean"):
        return torch.zeros(shape)
    if len(shape) >= 2 and not name.endswith(("pos_bias_u", "pos_bias_v")):
        fan_in = 1
        for d in shape[1:]:
            fan_in *= d
        return torch.randn(shape, generator=generator) / fan_in ** 0.5
    return 0.02 * torch.randn(shape, generator=generator)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--preset", default="parakeet-ctc-1.1b", choices=sorted(PRESETS))
    parser.add_argument("--layers", type=int, default=0, help="override the layer count")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import torch
    import yaml

    members = read_template(args.template)
    config = yaml.safe_load(members["model_config.yaml"].decode())
    enc = config["encoder"]
    if config["target"].split(".")[-1] != "EncDecCTCModelBPE":
        sys.exit(f"{args.template}: a CTC template (EncDecCTCModelBPE) is needed")
    preset = dict(PRESETS[args.preset])
    if args.layers:
        preset["n_layers"] = args.layers
    freq = enc["feat_in"]
    for _ in range(3):  # three stride-2 stages of 8x subsampling
        freq = (freq - 1) // 2 + 1
    old = dict(d_model=enc["d_model"], n_heads=enc["n_heads"],
               channels=enc["subsampling_conv_channels"], freq=freq)
    new = dict(preset, freq=freq)
    sizes = [old["d_model"], FF_EXPANSION * old["d_model"], 2 * old["d_model"], old["channels"],
             old["channels"] * freq, old["n_heads"], old["d_model"] // old["n_heads"]]
    if len(set(sizes)) != len(sizes) or enc["ff_expansion_factor"] != FF_EXPANSION:
        sys.exit(f"{args.template}: its sizes {sizes} are not distinct; shapes cannot be scaled")

    state = torch.load(io.BytesIO(members["model_weights.ckpt"]), map_location="cpu")
    generator = torch.Generator().manual_seed(args.seed)
    out_state = {}
    layer0 = [k for k in state if k.startswith("encoder.layers.0.")]
    for name, tensor in state.items():
        if name.startswith("encoder.layers."):
            continue
        if name.startswith("preprocessor."):
            out_state[name] = tensor
            continue
        shape = scaled_shape(name, tensor.shape, old, new)
        out_state[name] = random_tensor(torch, name, shape, generator)
    for layer in range(new["n_layers"]):
        for name in layer0:
            target = name.replace("encoder.layers.0.", f"encoder.layers.{layer}.", 1)
            shape = scaled_shape(name, state[name].shape, old, new)
            out_state[target] = random_tensor(torch, target, shape, generator)

    enc.update(n_layers=new["n_layers"], d_model=new["d_model"], n_heads=new["n_heads"],
               subsampling_conv_channels=new["channels"])
    config["decoder"]["feat_in"] = new["d_model"]
    buffer = io.BytesIO()
    torch.save(out_state, buffer)
    members["model_weights.ckpt"] = buffer.getvalue()
    members["model_config.yaml"] = yaml.safe_dump(config, sort_keys=False,
                                                  allow_unicode=True).encode()
    out = pathlib.Path(args.out)
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    partial.replace(out)
    params = sum(t.numel() for k, t in out_state.items() if not k.startswith("preprocessor."))
    print(f"{out}: {args.preset}, {new['n_layers']} layers of {new['d_model']}, "
          f"{params / 1e6:.1f} M parameters", file=sys.stderr)


if __name__ == "__main__":
    main()

"""The PyTorch baseline of `oasr bench fastconformer`: transformers'
ParakeetForCTC (the Hugging Face port of NeMo's FastConformer CTC model)
loaded with a .nemo archive's weights under the names transformers'
convert_nemo_to_hf.py maps them to, timed on random log-mel input of the
same shape and seed convention as oasr's (normal(0, 1), every row full
length), the log-probabilities brought back to the host as oasr's are.

Modes: eager (SDPA attention: "impl":"pytorch"), NeMo's own modules
("nemo": ConformerEncoder and ConvASRDecoder built from the archive's
config and weights, eager, where nemo_toolkit is installed), the CPU's
dynamic int8 ("pytorch_dynamic_int8": torch.ao quantize_dynamic on every
nn.Linear of ParakeetForCTC, the int8 a PyTorch user has on a CPU),
torch.compile
("pytorch_compile", inductor default mode) and
torch.compile(mode="reduce-overhead") ("pytorch_compile_cudagraphs", CUDA
graphs), each compiled with dynamic=False during its warm-up runs. One JSON
line per mode and batch size on stdout:

  {"bench":"fastconformer","impl":"pytorch_compile_cudagraphs","batch":16,
   "median_ms":...,"min_ms":...,"rtfx":...,"attention":"sdpa",...}

    fastconformer_torch_bench.py --ckpt model.nemo [--device cuda]
        [--dtype float16] [--batch 1,16] [--seconds 10] [--modes eager,...]
Needs torch and transformers >= 5 (ParakeetForCTC) and PyYAML.
"""
import argparse
import io
import json
import re
import statistics
import sys
import tarfile
import time

NEMO_TO_HF = [  # as transformers' convert_nemo_to_hf.py renames them
    (r"^encoder\.pre_encode\.conv\.", "encoder.subsampling.layers."),
    (r"^encoder\.pre_encode\.out\.", "encoder.subsampling.linear."),
    (r"^encoder\.pos_enc\.", "encoder.encode_positions."),
    (r"^encoder\.layers\.(\d+)\.conv\.batch_norm\.", r"encoder.layers.\1.conv.norm."),
    (r"^decoder\.decoder_layers\.0\.(weight|bias)$", r"ctc_head.\1"),
    (r"\.linear_pos\.", ".relative_k_proj."),
    (r"\.linear_([kv])\.", r".\1_proj."),
    (r"\.linear_out\.", ".o_proj."),
    (r"\.linear_q\.", ".q_proj."),
    (r"\.pos_bias_([uv])$", r".bias_\1"),
]
FRAMES_PER_SECOND = 100


def hf_name(name):
    for pattern, replacement in NEMO_TO_HF:
        name = re.sub(pattern, replacement, name)
    return name


def read_nemo(path, torch, yaml):
    import pathlib
    path = pathlib.Path(path)
    if path.is_dir():
        config = yaml.safe_load((path / "model_config.yaml").read_text())
        state = torch.load(path / "model_weights.ckpt", map_location="cpu", weights_only=True)
        return config, state
    with tarfile.open(path) as tar:
        files = {m.name.lstrip("./"): m for m in tar if m.isfile()}
        config = yaml.safe_load(tar.extractfile(files["model_config.yaml"]).read().decode())
        state = torch.load(io.BytesIO(tar.extractfile(files["model_weights.ckpt"]).read()),
                           map_location="cpu", weights_only=True)
    return config, state


def build_model(config, state, torch):
    import transformers
    enc = config["encoder"]
    if config["target"].split(".")[-1] != "EncDecCTCModelBPE":
        sys.exit("fastconformer_torch_bench.py: only CTC checkpoints (EncDecCTCModelBPE)")
    encoder_config = transformers.ParakeetEncoderConfig(
        hidden_size=enc["d_model"], num_hidden_layers=enc["n_layers"],
        num_attention_heads=enc["n_heads"],
        intermediate_size=enc["d_model"] * enc["ff_expansion_factor"],
        conv_kernel_size=enc["conv_kernel_size"], subsampling_factor=enc["subsampling_factor"],
        subsampling_conv_channels=enc["subsampling_conv_channels"], num_mel_bins=enc["feat_in"],
        max_position_embeddings=enc["pos_emb_max_len"], scale_input=enc["xscaling"],
        attention_bias=enc.get("use_bias", True), convolution_bias=enc.get("use_bias", True),
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, layerdrop=0.0)
    classes = config["decoder"]["num_classes"] + 1
    ctc_config = transformers.ParakeetCTCConfig(
        vocab_size=classes, pad_token_id=classes - 1, encoder_config=encoder_config.to_dict())
    model = transformers.ParakeetForCTC._from_config(ctc_config, attn_implementation="sdpa")
    weights = {hf_name(k): v for k, v in state.items() if not k.startswith("preprocessor.")}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # Buffers transformers computes itself may be absent from NeMo's names.
    missing = [k for k in missing if not k.endswith(("inv_freq", "num_batches_tracked"))]
    if missing or unexpected:
        sys.exit(f"fastconformer_torch_bench.py: the weights do not fit ParakeetForCTC: "
                 f"missing {missing[:8]}, unexpected {unexpected[:8]}")
    return model.eval()


def build_nemo_model(config, state, torch):
    """NeMo's ConformerEncoder and ConvASRDecoder from the archive's config
    (the model class itself needs the tokenizer set-up and restore_from,
    which Debian 12's Python 3.11.2 tarfile cannot run); forward(features
    [B, T, F]) -> log-probabilities [B, T', classes], as EncDecCTCModel's."""
    from nemo.collections.asr.modules import ConformerEncoder, ConvASRDecoder

    enc_args = {k: v for k, v in config["encoder"].items() if k != "_target_"}
    dec_args = {k: v for k, v in config["decoder"].items() if k != "_target_"}
    encoder, decoder = ConformerEncoder(**enc_args), ConvASRDecoder(**dec_args)
    encoder.load_state_dict({k[len("encoder."):]: v for k, v in state.items()
                             if k.startswith("encoder.")}, strict=True)
    decoder.load_state_dict({k[len("decoder."):]: v for k, v in state.items()
                             if k.startswith("decoder.")}, strict=True)

    class NemoCtc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.decoder = encoder, decoder

        def forward(self, input_features):
            lengths = torch.full((input_features.shape[0],), input_features.shape[1],
                                 dtype=torch.int64, device=input_features.device)
            encoded, _ = self.encoder(audio_signal=input_features.transpose(1, 2),
                                      length=lengths)
            return self.decoder(encoder_output=encoded)

    return NemoCtc().eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch", default="1,16")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", default="",
                        help="eager,nemo,dynamic_int8,compile,compile_cudagraphs (default: eager,compile,"
                             "compile_cudagraphs on cuda, eager on cpu)")
    args = parser.parse_args()
    import torch
    import yaml

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    on_cuda = args.device.startswith("cuda")
    modes = [m for m in (args.modes or ("eager,compile,compile_cudagraphs" if on_cuda
                                        else "eager")).split(",") if m]
    impl_of = {"eager": "pytorch", "nemo": "nemo", "dynamic_int8": "pytorch_dynamic_int8",
               "compile": "pytorch_compile",
               "compile_cudagraphs": "pytorch_compile_cudagraphs"}
    for mode in modes:
        if mode not in impl_of:
            sys.exit(f"--modes: unknown mode '{mode}'; choose from {', '.join(impl_of)}")
    dtype = {"float32": torch.float32, "float16": torch.float16,
             "bfloat16": torch.bfloat16}[args.dtype]
    config, state = read_nemo(args.ckpt, torch, yaml)
    model = build_model(config, state, torch).to(device=args.device, dtype=dtype)
    frames = int(round(args.seconds * FRAMES_PER_SECOND))
    bins = config["encoder"]["feat_in"]
    generator = torch.Generator().manual_seed(args.seed)

    def forward(module, features):
        logits = module(input_features=features).logits
        return logits.float().log_softmax(-1)

    for mode in modes:
        if mode == "eager":
            run = forward
        elif mode == "nemo":
            nemo_model = build_nemo_model(config, state, torch).to(device=args.device,
                                                                     dtype=dtype)
            run = lambda _, features, m=nemo_model: m(features).float()
        elif mode == "dynamic_int8":
            if on_cuda or dtype != torch.float32:
                sys.exit("--modes dynamic_int8: a CPU float32 baseline")
            quantized = torch.ao.quantization.quantize_dynamic(
                model, {torch.nn.Linear}, dtype=torch.qint8)
            run = lambda _, features, m=quantized: forward(m, features)
        else:
            torch._dynamo.reset()
            compiled = torch.compile(
                model, dynamic=False,
                mode="reduce-overhead" if mode == "compile_cudagraphs" else "default")
            run = lambda _, features, compiled=compiled: forward(compiled, features)
        for batch in [int(b) for b in args.batch.split(",")]:
            features = torch.randn(batch, frames, bins, generator=generator).to(
                device=args.device, dtype=dtype)
            times = []
            if on_cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            with torch.inference_mode():
                for i in range(args.warmup + args.iters):
                    start = time.perf_counter()
                    out = run(model, features).cpu()
                    stop = time.perf_counter()
                    if i >= args.warmup:
                        times.append((stop - start) * 1e3)
            median = statistics.median(times)
            line = {"bench": "fastconformer", "impl": impl_of[mode], "device": args.device,
                    "dtype": args.dtype, "batch": batch, "seconds": args.seconds,
                    "median_ms": round(median, 3), "min_ms": round(min(times), 3),
                    "rtfx": round(batch * args.seconds / (median / 1e3), 3),
                    "attention": "nemo rel_pos" if mode == "nemo"
                    else model.config._attn_implementation,
                    "frames_out": int(out.shape[1]), "torch": torch.__version__}
            if on_cuda:
                line["peak_mem_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 3)
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()

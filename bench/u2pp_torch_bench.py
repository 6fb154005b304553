"""PyTorch baseline for `oasr bench encoder`: times the oracle U2++ encoder
(tests/oracle/u2pp/u2pp_model.py, full attention, inference mode) on the same
synthetic input shape and prints one JSON line per batch size, in the shape
oasr prints its own lines.

    u2pp_torch_bench.py --ckpt-dir DIR [--seconds 10] [--batch 1,4]
                        [--warmup 2] [--iters 5] [--threads N] [--seed 0]
                        [--dynamic-int8] [--device cpu|cuda[:N]]
                        [--dtype float32|float16|bfloat16] [--compile]
                        [--torchao int8_dynamic|fp8_rowwise]

--device cuda times the encoder of tools/train/model.py instead (same
weights, batched masks, fused attention: see load_serving_encoder) on the GPU in --dtype (model.to(device, dtype),
the input made there in the same dtype); every timed run ends with
torch.cuda.synchronize(), and each line carries peak_mem_mb
(torch.cuda.max_memory_allocated over that batch size's runs).

--compile adds, per batch size, a line "impl":"pytorch_compile" timed on
torch.compile(model.encoder) in the default mode (inductor, no CUDA graphs,
dynamic=False so every batch shape gets its own specialised graph; the
compilation happens during the warm-up runs, at least 3 of them), after
the eager line "impl":"pytorch"; on cuda also "pytorch_compile_cudagraphs",
mode="reduce-overhead" (CUDA graphs: the strongest a PyTorch user has).

--dynamic-int8 applies PyTorch's dynamic int8 quantization to every
nn.Linear (torch.ao.quantization.quantize_dynamic: int8 weights per tensor,
activations quantized per batch at run time), the baseline for oasr's
int8_w8a8 on CPU.

--torchao (cuda) applies torchao's quantize_ to every nn.Linear of the
encoder before timing: int8_dynamic is Int8DynamicActivationInt8WeightConfig
(int8 weights per channel, activations per token at run time),
fp8_rowwise is Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())
(e4m3, per-row scales): the strongest W8A8 a PyTorch user assembles, meant
with --compile (torchao's kernels come from inductor). Lines carry
"quantization":"torchao_<name>".

--onnxruntime (cpu) also times ONNX Runtime, the engine under sherpa-onnx
and WeNet's ONNX runtime: the serving encoder of tools/train/model.py (same
weights) exported with torch.onnx.export (opset 17, batch and time dynamic),
run by an InferenceSession on the CPUExecutionProvider with
intra_op_num_threads = --threads; lines "impl":"onnxruntime". With
--dynamic-int8 also "impl":"onnxruntime_int8": the same graph through
onnxruntime.quantization.quantize_dynamic (int8 weights, activations
quantized at run time, what its documentation offers for transformer
models). Before timing, the exported graph's output is checked against the
PyTorch encoder on one input (max abs difference 1e-3, else the script
stops). Without onnxruntime (and, for int8, onnx) installed, the lines are
left out with the reason on stderr.

DIR is a WeNet experiment directory (train.yaml, final.pt, units.txt,
global_cmvn), e.g. one written by tests/oracle/u2pp/make_u2pp_case.py; oasr
loads the same directory, so both time the same weights. The input values
are random like oasr's (normal, fixed seed) but not the same numbers: the
encoder's cost does not depend on them.
"""

import argparse
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch

ORACLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle",
                          "u2pp")
sys.path.insert(0, ORACLE_DIR)

from u2pp_reference import load_model_dir  # noqa: E402

TRAIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "train")


def load_serving_encoder(ckpt_dir: str):
    """The encoder of tools/train/model.py (WeNet module names, batched
    masks, fused scaled_dot_product_attention) with the WeNet directory's
    weights: the form in which a PyTorch user serves a U2++ on a GPU. The
    oracle model builds per-utterance masks in Python and breaks
    torch.compile's graph, so it is not a fair GPU baseline."""
    import yaml
    sys.path.insert(0, TRAIN_DIR)
    from model import ModelConfig, U2ppModel  # noqa: E402
    with open(os.path.join(ckpt_dir, "train.yaml"), encoding="utf-8") as f:
        conf = yaml.safe_load(f)
    enc = conf["encoder_conf"]
    dec = conf["decoder_conf"]
    wanted = {"input_layer": "conv2d", "cnn_module_norm": "layer_norm", "causal": True,
              "pos_enc_layer_type": "rel_pos", "activation_type": "swish"}
    for key, value in wanted.items():
        if enc.get(key, value) != value:
            raise SystemExit(f"the GPU baseline serves {key}={value}; {ckpt_dir} has "
                             f"{enc.get(key)}")
    cfg = ModelConfig(input_dim=conf["input_dim"], vocab_size=conf["output_dim"],
                      output_size=enc["output_size"], attention_heads=enc["attention_heads"],
                      linear_units=enc["linear_units"], num_blocks=enc["num_blocks"],
                      cnn_module_kernel=enc["cnn_module_kernel"],
                      decoder_linear_units=dec["linear_units"],
                      decoder_num_blocks=dec["num_blocks"],
                      decoder_r_num_blocks=dec.get("r_num_blocks", 0))
    model = U2ppModel(cfg)
    state = torch.load(os.path.join(ckpt_dir, "final.pt"), map_location="cpu")
    missing, unexpected = model.load_state_dict(state, strict=False)
    # WeNet 2.x checkpoints may hold the sinusoid tables, which this model
    # recomputes (non-persistent buffers).
    unexpected = [name for name in unexpected if not name.endswith(".pe")]
    if missing or unexpected:
        raise SystemExit(f"weights of {ckpt_dir} do not fit tools/train/model.py: missing "
                         f"{missing[:5]}, unexpected {unexpected[:5]}")
    return model

FRAMES_PER_SECOND = 100  # 10 ms fbank frame shift
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def batch_sizes(text: str):
    sizes = [int(part) for part in text.split(",") if part.strip()]
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"--batch '{text}' must list positive integers")
    return sizes


def synchronize(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_encoder(encode, feats, lengths, warmup: int, iters: int, device: torch.device):
    """Median and minimum ms of `iters` timed calls after `warmup` untimed
    ones, and the peak device memory in MiB (None on the CPU)."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    times_ms = []
    with torch.inference_mode():
        for run in range(warmup + iters):
            start = time.perf_counter()
            encode(feats, lengths)  # full attention (chunk_size -1)
            synchronize(device)
            elapsed_ms = (time.perf_counter() - start) * 1e3
            if run >= warmup:
                times_ms.append(elapsed_ms)
    peak = None
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device) / float(1 << 20)
    return statistics.median(times_ms), min(times_ms), peak


def onnxruntime_variants(ckpt_dir: str, threads: int, int8: bool, workdir: str):
    """[(impl, encode)] for ONNX Runtime (see --onnxruntime), or [] with the
    reason on stderr when the packages are missing."""
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as error:
        print(f"u2pp_torch_bench: ONNX Runtime left out ({error}); see bench/README.md",
              file=sys.stderr)
        return []
    encoder = load_serving_encoder(ckpt_dir).encoder

    class EncoderOutput(torch.nn.Module):

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, feats, lengths):
            return self.inner(feats, lengths)[0]

    # eval() on the wrapper: torch.onnx.export restores the wrapper's mode
    # afterwards, and a wrapper left in training mode would turn dropout on.
    wrapped = EncoderOutput(encoder).eval()
    probe = torch.randn(2, 300, wrapped.inner.cfg.input_dim,
                        generator=torch.Generator().manual_seed(1))
    probe_lengths = torch.tensor([300, 217], dtype=torch.int64)
    fp32_path = os.path.join(workdir, "u2pp_encoder.onnx")
    with torch.inference_mode():
        expected = wrapped(probe, probe_lengths).numpy()
    torch.onnx.export(wrapped, (probe, probe_lengths), fp32_path, opset_version=17,
                      input_names=["feats", "lengths"], output_names=["encoded"],
                      dynamic_axes={"feats": {0: "batch", 1: "frames"}, "lengths": {0: "batch"},
                                    "encoded": {0: "batch", 1: "encoded_frames"}})
    paths = [("onnxruntime", fp32_path)]
    if int8:
        try:
            from onnxruntime.quantization import QuantType, quantize_dynamic
        except ImportError as error:
            print(f"u2pp_torch_bench: ONNX Runtime int8 left out ({error}); see bench/README.md",
                  file=sys.stderr)
        else:
            int8_path = os.path.join(workdir, "u2pp_encoder_int8.onnx")
            quantize_dynamic(fp32_path, int8_path, weight_type=QuantType.QInt8)
            paths.append(("onnxruntime_int8", int8_path))
    options = ort.SessionOptions()
    if threads > 0:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    variants = []
    for impl, path in paths:
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        if impl == "onnxruntime":
            got = session.run(None, {"feats": probe.numpy(), "lengths": probe_lengths.numpy()})[0]
            error = float(np.abs(got - expected).max())
            if not error <= 1e-3:
                raise SystemExit(f"the exported ONNX encoder differs from PyTorch by {error} "
                                 "(max abs); not timing it")

        def encode(f, n, session=session):
            return session.run(None, {"feats": f.numpy(), "lengths": n.numpy()})

        variants.append((impl, encode))
    return variants


def check_onnx_on(variants, ckpt_dir: str, feats, lengths):
    """The exported fp32 graph against PyTorch on a timed input shape too (the
    export traced 2 x 300 frames): a shape frozen into the graph would show."""
    encode = dict(variants).get("onnxruntime")
    if encode is None:
        return
    import numpy as np
    encoder = load_serving_encoder(ckpt_dir).encoder.eval()
    with torch.inference_mode():
        expected = encoder(feats, lengths)[0].numpy()
    error = float(np.abs(encode(feats, lengths)[0] - expected).max())
    if not error <= 1e-3:
        raise SystemExit(f"the exported ONNX encoder differs from PyTorch by {error} (max abs) at "
                         f"{tuple(feats.shape)}; not timing it")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=batch_sizes, default=[1, 4])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="0: torch's default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dynamic-int8", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--torchao", choices=["int8_dynamic", "fp8_rowwise"], default=None)
    parser.add_argument("--onnxruntime", action="store_true",
                        help="cpu: also time ONNX Runtime (fp32, and int8 with --dynamic-int8)")
    parser.add_argument("--only-cudagraphs", action="store_true",
                        help="with --compile on cuda: time only torch.compile "
                        "mode=reduce-overhead (torchao's eager W8A8 takes ~0.25 s a call)")
    args = parser.parse_args()
    if args.iters < 1 or args.warmup < 0 or args.seconds <= 0:
        parser.error("need --iters >= 1, --warmup >= 0, --seconds > 0")
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but this torch sees no CUDA GPU")
    if device.type == "cpu" and dtype != torch.float32:
        parser.error("the CPU baseline is float32 (as oasr's CPU path)")
    if args.dynamic_int8 and device.type != "cpu":
        parser.error("--dynamic-int8 is a CPU baseline")
    if args.torchao and device.type != "cuda":
        parser.error("--torchao is a CUDA baseline")
    if args.onnxruntime and device.type != "cpu":
        parser.error("--onnxruntime is a CPU baseline")

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    serving = device.type == "cuda"
    if serving:
        model = load_serving_encoder(args.ckpt_dir)
    else:
        model, _, _ = load_model_dir(args.ckpt_dir)
    model.eval()
    if args.dynamic_int8:
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                       dtype=torch.qint8)
    model = model.to(device=device, dtype=dtype)
    quantization = "dynamic_int8_linear" if args.dynamic_int8 else "none"
    if args.torchao:
        try:
            from torchao.quantization import (Float8DynamicActivationFloat8WeightConfig,
                                              Int8DynamicActivationInt8WeightConfig, PerRow,
                                              quantize_)
        except ImportError as error:
            raise SystemExit(f"--torchao needs the torchao package ({error}); pip install torchao")
        config = (Int8DynamicActivationInt8WeightConfig() if args.torchao == "int8_dynamic" else
                  Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))
        quantize_(model.encoder, config)
        quantization = f"torchao_{args.torchao}"

    if serving:
        variants = [("pytorch", lambda f, n: model.encoder(f, n))]
    else:
        variants = [("pytorch", lambda f, n: model.encode(f, n))]
    if args.only_cudagraphs and not (args.compile and serving):
        parser.error("--only-cudagraphs needs --compile and --device cuda")
    if args.only_cudagraphs:
        variants = [("pytorch_compile_cudagraphs", "reduce-overhead")]
    elif args.compile and serving:
        # Each compiled variant starts from a reset dynamo cache: both wrap the
        # same forward, and a cached graph of one mode must not serve the other.
        variants.append(("pytorch_compile", "default"))
        variants.append(("pytorch_compile_cudagraphs", "reduce-overhead"))
    elif args.compile:
        variants.append(("pytorch_compile", "default"))

    workdir = tempfile.mkdtemp(prefix="u2pp_onnx_")
    atexit.register(shutil.rmtree, workdir, True)
    if args.onnxruntime:
        variants += onnxruntime_variants(args.ckpt_dir, args.threads, args.dynamic_int8, workdir)

    frames = int(round(args.seconds * FRAMES_PER_SECOND))
    generator = torch.Generator(device="cpu").manual_seed(args.seed)
    inputs = []
    for batch in args.batch:
        feats = torch.randn(batch, frames, model.cfg.input_dim, generator=generator,
                            dtype=torch.float32, device="cpu").to(device=device, dtype=dtype)
        # The oracle takes host lengths (it turns them into Python ints); the
        # serving encoder takes them beside the features.
        lengths = torch.full((batch,), frames, dtype=torch.int64,
                             device=device if serving else "cpu")
        inputs.append((batch, feats, lengths))
    if args.onnxruntime:
        for _, feats, lengths in inputs:
            check_onnx_on(variants, args.ckpt_dir, feats, lengths)
    for impl, encode in variants:
        compile_mode = None
        if isinstance(encode, str):
            compile_mode = encode
            torch._dynamo.reset()
            compiled = torch.compile(model.encoder, mode=compile_mode, dynamic=False)
            encode = lambda f, n, compiled=compiled: compiled(f, n)  # noqa: E731
        for batch, feats, lengths in inputs:
            # compilation (and CUDA graph recording) happens in the warm-up runs
            warmup = max(args.warmup, 3) if compile_mode else args.warmup
            median_ms, min_ms, peak = time_encoder(encode, feats, lengths, warmup, args.iters,
                                                   device)
            onnx = impl.startswith("onnxruntime")
            line = {
                "bench": "encoder", "impl": impl, "device": args.device, "batch": batch,
                "seconds": args.seconds, "median_ms": round(median_ms, 3),
                "min_ms": round(min_ms, 3),
                "rtfx": round(batch * args.seconds / (median_ms / 1e3), 3),
                "threads": (args.threads or "onnxruntime default") if onnx else
                torch.get_num_threads(),
                "quantization": ("dynamic_int8" if impl == "onnxruntime_int8" else "none")
                if onnx else quantization,
                "dtype": args.dtype,
                "model": "tools/train/model.py" if serving else "tests/oracle/u2pp",
            }
            if onnx:
                line["model"] = "tools/train/model.py exported to ONNX"
                line["onnxruntime"] = sys.modules["onnxruntime"].__version__
            if peak is not None:
                line["peak_mem_mb"] = round(peak, 3)
            if compile_mode:
                line["compile_mode"] = compile_mode
            print(json.dumps(line, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Resumable checkpoints as safetensors shards of at most 15 MiB each, so a
run can be carried between separate machine calls in small files.

DIR/checkpoint.json     step, config, CMVN stats, timing, the shard list
DIR/model-NNNNN.safetensors   fp32 model state (WeNet names)
DIR/optim-NNNNN.safetensors   AdamW moments (bf16 or fp32) and step counts
                              (optional: without them resume restarts Adam)

The safetensors format (8-byte little-endian header length, JSON header,
raw little-endian bytes) is written and read here with torch only, because
the GPU machine has no safetensors package.
"""

import json
import os
from typing import Dict, List, Tuple

import torch

SHARD_BYTES = 15 * 1024 * 1024
_DTYPE_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
                torch.int64: "I64", torch.int32: "I32"}
_NAME_DTYPES = {v: k for k, v in _DTYPE_NAMES.items()}


def _raw_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path: str, tensors: Dict[str, torch.Tensor]) -> None:
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = _raw_bytes(t)
        header[name] = {"dtype": _DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


def read_safetensors(path: str) -> Dict[str, torch.Tensor]:
    with open(path, "rb") as f:
        data = f.read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    base = 8 + size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _NAME_DTYPES[info["dtype"]]
        buf = bytearray(data[base + start:base + end])
        if dtype in (torch.bfloat16, torch.float16):
            t = torch.frombuffer(buf, dtype=torch.int16).view(dtype)
        else:
            t = torch.frombuffer(buf, dtype=dtype)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def _write_sharded(out_dir: str, prefix: str, tensors: Dict[str, torch.Tensor]) -> List[str]:
    shards: List[Dict[str, torch.Tensor]] = [{}]
    used = 0
    for name, t in tensors.items():
        size = t.numel() * t.element_size()
        if size > SHARD_BYTES - 4096:
            raise ValueError(f"tensor {name} ({size} bytes) exceeds one shard")
        if used + size > SHARD_BYTES - 65536 and shards[-1]:
            shards.append({})
            used = 0
        shards[-1][name] = t
        used += size
    names = []
    for k, shard in enumerate(shards):
        name = f"{prefix}-{k:05d}.safetensors"
        write_safetensors(os.path.join(out_dir, name), shard)
        names.append(name)
    return names


def save_checkpoint(out_dir: str, model: torch.nn.Module, optimizer, meta: dict,
                    optimizer_dtype: str = "bf16") -> None:
    """optimizer_dtype: 'bf16', 'fp32' or 'none' (model only)."""
    os.makedirs(out_dir, exist_ok=True)
    for old in os.listdir(out_dir):
        if old.endswith(".safetensors"):
            os.remove(os.path.join(out_dir, old))
    state = {k: v.float() for k, v in model.state_dict().items()}
    files = {"model": _write_sharded(out_dir, "model", state)}
    if optimizer is not None and optimizer_dtype != "none":
        dtype = torch.bfloat16 if optimizer_dtype == "bf16" else torch.float32
        names = {id(p): n for n, p in model.named_parameters()}
        moments: Dict[str, torch.Tensor] = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                st = optimizer.state.get(p)
                if not st:
                    continue
                n = names[id(p)]
                moments[f"{n}/exp_avg"] = st["exp_avg"].to(dtype)
                moments[f"{n}/exp_avg_sq"] = st["exp_avg_sq"].to(dtype)
                moments[f"{n}/step"] = torch.tensor([float(st["step"])], dtype=torch.float32)
        files["optim"] = _write_sharded(out_dir, "optim", moments)
    meta = dict(meta, files=files)
    tmp = os.path.join(out_dir, "checkpoint.json.tmp")
    with open(tmp, "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(tmp, os.path.join(out_dir, "checkpoint.json"))


def load_checkpoint(ckpt_dir: str) -> Tuple[dict, Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """Returns (meta, model state, optimizer moments or {})."""
    with open(os.path.join(ckpt_dir, "checkpoint.json")) as f:
        meta = json.load(f)
    model_state: Dict[str, torch.Tensor] = {}
    for name in meta["files"]["model"]:
        model_state.update(read_safetensors(os.path.join(ckpt_dir, name)))
    moments: Dict[str, torch.Tensor] = {}
    optim_files = meta["files"].get("optim", [])
    if all(os.path.exists(os.path.join(ckpt_dir, n)) for n in optim_files):
        for name in optim_files:
            moments.update(read_safetensors(os.path.join(ckpt_dir, name)))
    return meta, model_state, moments


def restore_optimizer(optimizer, model: torch.nn.Module, moments: Dict[str, torch.Tensor]) -> int:
    """Loads saved AdamW moments into `optimizer`; returns how many params."""
    restored = 0
    # fused / capturable AdamW keep the step count on the parameter's device
    on_device = bool(optimizer.defaults.get("fused") or optimizer.defaults.get("capturable"))
    for n, p in model.named_parameters():
        if f"{n}/exp_avg" not in moments:
            continue
        step = moments[f"{n}/step"][0]
        optimizer.state[p] = {
            "step": torch.tensor(float(step), device=p.device if on_device else "cpu"),
            "exp_avg": moments[f"{n}/exp_avg"].to(p.device, torch.float32),
            "exp_avg_sq": moments[f"{n}/exp_avg_sq"].to(p.device, torch.float32),
        }
        restored += 1
    return restored


def shrink_for_carry(src_dir: str, dst_dir: str) -> int:
    """Copies a checkpoint's model with floating weights in fp16 and without
    optimizer state, to fit the GPU machine's upload limit (a 10 M model is
    40 MB in fp32). The global CMVN buffers stay fp32: rounding them shifts
    every feature. Returns the bytes written."""
    meta, state, _ = load_checkpoint(src_dir)
    small = {k: (v if "global_cmvn" in k or not v.is_floating_point() else v.half())
             for k, v in state.items()}
    os.makedirs(dst_dir, exist_ok=True)
    for old in os.listdir(dst_dir):
        if old.endswith(".safetensors") or old == "checkpoint.json":
            os.remove(os.path.join(dst_dir, old))
    files = {"model": _write_sharded(dst_dir, "model", small)}
    with open(os.path.join(dst_dir, "checkpoint.json"), "w") as f:
        json.dump(dict(meta, files=files), f, indent=1)
    return sum(os.path.getsize(os.path.join(dst_dir, n)) for n in files["model"])


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="checkpoint utilities")
    parser.add_argument("--shrink", nargs=2, metavar=("SRC", "DST"), required=True,
                        help="write SRC's model as fp16 (CMVN fp32), without optimizer, to DST")
    args = parser.parse_args()
    print(f"wrote {shrink_for_carry(*args.shrink)} bytes to {args.shrink[1]}")

#!/usr/bin/env python3
"""Oracle for oasr's CTranslate2 model.bin reader (io/ct2_model).

Generate (--out DIR). Files written by ct2_format.py, a writer built from
CTranslate2's format definition (not from oasr's reader):
  DIR/<case>.bin        readable files: binary versions 6, 5, 4 (dtype ids,
                        every CTranslate2 type, scalars, payloads at odd
                        offsets, aliases incl. an alias of an alias), 3
                        (item sizes, aliases), 2 (no aliases), 1 (no spec)
  DIR/<bad>.bin         refused files: truncated at several places, a bad
                        version, an unknown dtype id, a payload size that
                        disagrees with the shape, trailing bytes, a dangling
                        alias, an empty file, a zero-length string
  DIR/cases.safetensors "<case>/<variable>" holds each variable as oasr must
                        serve it (int16 widened to int32, bfloat16 as is).
Metadata "cases": JSON {case: {"file", "version", "spec", "revision",
"size", "variables": [{"name", "dtype", "shape", "offset"}], "aliases":
[[alias, target]], "refused": null | {"code", "needles"}}}; the needles are
offsets and sizes this generator computed while writing the file.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ct2_format  # noqa: E402
from ct2_format import Variable, serialize  # noqa: E402


def rich_variables(rng):
    """Every CTranslate2 dtype, scalars and odd payload offsets."""
    return [
        ("encoder/num_heads", ct2_format.scalar(6, "int16")),
        ("decoder/activation", ct2_format.scalar(3, "int8")),
        ("a/float32", Variable.from_numpy(rng.standard_normal((2, 3)).astype(np.float32))),
        ("b/odd", Variable.from_numpy(np.array([7], np.int8))),  # next payload is misaligned
        ("c/float16", Variable.from_numpy(rng.standard_normal(5).astype(np.float16))),
        ("d/bfloat16", Variable.bfloat16(rng.standard_normal((2, 2)).astype(np.float32))),
        ("e/int8", Variable.from_numpy(rng.integers(-128, 128, (3, 2)).astype(np.int8))),
        ("f/int16", Variable.from_numpy(np.array([-32768, -1, 0, 32767], np.int16))),
        ("g/int32", Variable.from_numpy(np.array([[-2**31, 5], [2**31 - 1, 0]], np.int32))),
        ("h/weight", Variable.from_numpy(rng.integers(-127, 128, (2, 4)).astype(np.int8))),
        ("h/weight_scale", Variable.from_numpy(np.array([0.5, 2.0], np.float32))),
        ("i/empty", Variable.from_numpy(np.zeros((0, 3), np.float32))),
        ("j/3d", Variable.from_numpy(rng.standard_normal((2, 3, 4)).astype(np.float32))),
    ]


RICH_ALIASES = [("p/weight", "h/weight"), ("q/weight", "p/weight"), ("r", "a/float32")]


def old_variables(rng):
    """The three types binary versions 1-3 can express."""
    return [
        ("x/float32", Variable.from_numpy(rng.standard_normal((3, 2)).astype(np.float32))),
        ("x/int16", Variable.from_numpy(np.array([[1, -2], [300, -400]], np.int16))),
        ("x/int8", Variable.from_numpy(np.array([-5, 5, 127], np.int8))),
        ("x/scalar", ct2_format.scalar(4, "int16")),
    ]


def served(var):
    """The tensor oasr must return for a variable."""
    if var.dtype == "bfloat16":
        values = torch.from_numpy(var.numpy().copy())
        return values.to(torch.bfloat16)  # exact: the float32 came from bfloat16 bits
    array = var.numpy().copy()
    if var.dtype == "int16":
        array = array.astype(np.int32)
    return torch.from_numpy(array.copy())  # (ascontiguousarray would make a scalar 1-D)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(20240607)
    cases, tensors = {}, {}

    def write(case, data):
        path = os.path.join(args.out, case + ".bin")
        with open(path, "wb") as f:
            f.write(data)
        return path

    def readable(case, variables, aliases, version, spec="WhisperSpec", revision=3):
        data, layout = serialize(variables, aliases if version >= 3 else (), version, spec,
                                 revision)
        write(case, data)
        # The independent reader must agree with the writer.
        parsed = ct2_format.parse(data)
        assert parsed[0] == version and set(parsed[3]) == {n for n, _ in variables}
        cases[case] = {
            "file": case + ".bin", "version": version, "spec": spec if version >= 2 else "",
            "revision": revision if version >= 2 else 1, "size": len(data), "refused": None,
            "variables": [{"name": n, "dtype": v.dtype, "shape": list(v.shape),
                           "offset": layout[n]["payload"]} for n, v in variables],
            "aliases": [list(a) for a in aliases] if version >= 3 else [],
        }
        for name, var in variables:
            tensors[f"{case}/{name}"] = served(var)
        return data, layout

    def refused(case, data, code, needles):
        write(case, data)
        cases[case] = {"file": case + ".bin", "refused": {"code": code, "needles": needles}}

    rich = rich_variables(rng)
    v6, layout = readable("v6", rich, RICH_ALIASES, 6)
    readable("v5", rich, RICH_ALIASES, 5, spec="TransformerSpec", revision=7)
    readable("v4", rich, RICH_ALIASES, 4)
    old = old_variables(rng)
    readable("v3", old, [("y/alias", "x/int16")], 3, spec="TransformerSpec", revision=2)
    readable("v2", old, [], 2, spec="TransformerSpec", revision=1)
    readable("v1", old, [], 1)

    # ---- refused files: offsets computed from the writer's layout -------------
    names = [n for n, _ in rich]
    spot = layout["c/float16"]
    cut = spot["payload"] + 3  # inside the float16 payload (10 bytes)
    refused("truncated_payload", v6[:cut], "kCorruptFile",
            ["truncated", "variable #4 'c/float16'", "needs 10 bytes",
             f"offset {spot['payload']}", f"file ends at {cut}"])
    name_at = layout["e/int8"]["name"]
    refused("truncated_name", v6[:name_at + 5], "kCorruptFile",
            ["truncated", "the name of variable #6", f"offset {name_at + 2}"])
    refused("truncated_aliases", v6[:len(v6) - 4], "kCorruptFile", ["truncated", "alias #2"])
    refused("truncated_header", v6[:3], "kCorruptFile",
            ["truncated", "binary version", "needs 4 bytes", "offset 0"])
    refused("empty", b"", "kCorruptFile", ["truncated", "file ends at 0"])
    refused("bad_version", (7).to_bytes(4, "little") + v6[4:], "kUnsupported",
            ["binary version 7", "1..6"])
    refused("zero_version", (0).to_bytes(4, "little") + v6[4:], "kCorruptFile",
            ["binary version 0"])
    bad_dtype = bytearray(v6)
    dtype_at = layout["d/bfloat16"]["dtype"]
    bad_dtype[dtype_at] = 9
    refused("bad_dtype", bytes(bad_dtype), "kCorruptFile",
            ["'d/bfloat16'", "dtype id 9", f"offset {dtype_at}"])
    bad_size = bytearray(v6)
    size_at = layout["g/int32"]["dtype"] + 1
    bad_size[size_at:size_at + 4] = (12).to_bytes(4, "little")  # 16 bytes are needed
    refused("size_mismatch", bytes(bad_size), "kCorruptFile",
            ["'g/int32'", "declares 12 payload bytes", "int32[2, 2] needs 16"])
    refused("trailing", v6 + b"\0\0\0\0\0", "kCorruptFile",
            ["5 unexpected bytes", f"offset {len(v6)}"])
    dangling, _ = serialize(rich, [("z", "nowhere")], 6)
    refused("dangling_alias", dangling, "kCorruptFile", ["alias #0 'z'", "'nowhere'"])
    zero_string = bytearray(v6)
    at = layout[names[1]]["name"]
    zero_string[at:at + 2] = (0).to_bytes(2, "little")
    refused("zero_length_name", bytes(zero_string), "kCorruptFile",
            ["length 0", f"offset {at}"])
    dup, _ = serialize(rich + [("a/float32", rich[2][1])], [], 6)
    refused("duplicate_name", dup, "kCorruptFile", ["'a/float32' appears twice"])

    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(cases)})


if __name__ == "__main__":
    main()

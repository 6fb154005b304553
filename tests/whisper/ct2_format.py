"""CTranslate2 model.bin, written and read from the format's definition
(CTranslate2's ModelSpec._serialize and models::Model::load), independently
of oasr's C++ reader; shared by the Whisper test generators.

Layout (little-endian): u32 version; version >= 2: string spec, u32 revision;
u32 count; per variable: string name, u8 rank, u32 dims, then (version >= 4)
u8 dtype id + u32 byte count or (version <= 3) u8 item size + u32 element
count, then the payload; version >= 3: u32 alias count, (string, string) pairs.
A string is u16 length (counting a trailing NUL), the bytes, the NUL.

The Whisper helpers map an HF WhisperForConditionalGeneration state dict to
CTranslate2's WhisperSpec variables the way ct2-transformers-converter does
(fused [q; k; v] self-attention with a zero key-bias slot, fused [k; v]
cross-attention, gamma/beta layer norms, projection aliased to embeddings).
"""

import struct

import numpy as np

# CTranslate2's DataType numbering (include/ctranslate2/types.h).
DTYPE_IDS = {"float32": 0, "int8": 1, "int16": 2, "int32": 3, "float16": 4, "bfloat16": 5}
ID_DTYPES = {v: k for k, v in DTYPE_IDS.items()}
ITEM_SIZES = {"float32": 4, "int8": 1, "int16": 2, "int32": 4, "float16": 2, "bfloat16": 2}
NUMPY = {"float32": "<f4", "int8": "i1", "int16": "<i2", "int32": "<i4", "float16": "<f2"}


class Variable:
    """A payload: `data` is raw little-endian bytes of `dtype` and `shape`."""

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, tuple(shape), bytes(data)
        count = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        assert len(self.data) == count * ITEM_SIZES[dtype], (dtype, shape, len(self.data))

    @staticmethod
    def from_numpy(array, dtype=None):
        array = np.asarray(array)
        dtype = dtype or {np.dtype("float32"): "float32", np.dtype("float16"): "float16",
                          np.dtype("int8"): "int8", np.dtype("int16"): "int16",
                          np.dtype("int32"): "int32"}[array.dtype]
        return Variable(dtype, array.shape, np.ascontiguousarray(array, NUMPY[dtype]).tobytes())

    @staticmethod
    def bfloat16(values_f32):
        """bfloat16 by round-to-nearest-even of float32 bits."""
        bits = np.ascontiguousarray(values_f32, "<f4").view("<u4").astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
        return Variable("bfloat16", np.shape(values_f32), rounded.tobytes())

    def numpy(self):
        if self.dtype == "bfloat16":
            bits = np.frombuffer(self.data, "<u2").astype("<u4") << 16
            return bits.view("<f4").reshape(self.shape)
        return np.frombuffer(self.data, NUMPY[self.dtype]).reshape(self.shape)


def _string(text):
    raw = text.encode("utf-8")
    return struct.pack("<H", len(raw) + 1) + raw + b"\0"


def serialize(variables, aliases=(), version=6, spec="WhisperSpec", revision=3):
    """Bytes of a model.bin; `variables` is a list of (name, Variable).
    Returns (bytes, layout) where layout maps each name to the byte offset
    of its name string, its dtype field and its payload."""
    out = bytearray(struct.pack("<I", version))
    if version >= 2:
        out += _string(spec) + struct.pack("<I", revision)
    out += struct.pack("<I", len(variables))
    layout = {}
    for name, var in variables:
        entry = {"name": len(out)}
        out += _string(name) + struct.pack("<B", len(var.shape))
        for dim in var.shape:
            out += struct.pack("<I", dim)
        entry["dtype"] = len(out)
        if version >= 4:
            out += struct.pack("<BI", DTYPE_IDS[var.dtype], len(var.data))
        else:
            size = ITEM_SIZES[var.dtype]
            assert var.dtype in ("float32", "int16", "int8"), "versions 1-3 know 3 types"
            out += struct.pack("<BI", size, len(var.data) // size)
        entry["payload"] = len(out)
        out += var.data
        layout[name] = entry
    if version >= 3:
        out += struct.pack("<I", len(aliases))
        for alias, target in aliases:
            out += _string(alias) + _string(target)
    return bytes(out), layout


def parse(data):
    """The inverse of serialize: (version, spec, revision, {name: Variable}, {alias: target})."""
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return values

    def string():
        nonlocal pos
        (length,) = take("<H")
        text = data[pos:pos + length - 1].decode("utf-8")
        pos += length
        return text

    (version,) = take("<I")
    spec, revision = ("", 1)
    if version >= 2:
        spec = string()
        (revision,) = take("<I")
    (count,) = take("<I")
    variables = {}
    for _ in range(count):
        name = string()
        (rank,) = take("<B")
        shape = take("<%dI" % rank)
        if version >= 4:
            type_id, nbytes = take("<BI")
            dtype = ID_DTYPES[type_id]
        else:
            size, elements = take("<BI")
            dtype = {4: "float32", 2: "int16", 1: "int8"}[size]
            nbytes = size * elements
        variables[name] = Variable(dtype, shape, data[pos:pos + nbytes])
        pos += nbytes
    aliases = {}
    if version >= 3:
        (count,) = take("<I")
        for _ in range(count):
            alias = string()
            aliases[alias] = string()
    assert pos == len(data), "trailing bytes"
    return version, spec, revision, variables, aliases


def read(path):
    with open(path, "rb") as f:
        return parse(f.read())


def resolve(variables, aliases, name):
    while name not in variables:
        name = aliases[name]
    return variables[name]


# ---- Whisper ------------------------------------------------------------------

def scalar(value, dtype):
    return Variable.from_numpy(np.array(value, dtype=NUMPY[dtype]), dtype)


def _float(array, dtype):
    array = np.asarray(array, np.float32)
    if dtype == "bfloat16":
        return Variable.bfloat16(array)
    return Variable.from_numpy(array.astype(NUMPY[dtype]), dtype)


def _quantize_int8(array):
    """CTranslate2's int8: scale = 127 / amax per row (rows of a 2-D view), q = rint(w * scale)."""
    array = np.asarray(array, np.float32)
    flat = array.reshape(array.shape[0], -1)
    amax = np.amax(np.abs(flat), axis=1)
    amax[amax == 0] = 127.0
    scale = (127.0 / amax).astype(np.float32)
    q = np.rint(flat * scale[:, None]).astype(np.int8).reshape(array.shape)
    return q, scale


def whisper_variables(state, config, dtype="float32", quantize_int8=False, revision=3):
    """CTranslate2 WhisperSpec variables (in the converter's sorted order)
    for an HF state dict of numpy float32 arrays. With quantize_int8, the
    linear, conv and embedding weights are int8 with a float32 "_scale"
    (CTranslate2's int8_float32 / int8_float16 types)."""
    d = config["d_model"]
    out = {}

    def weight(name, array):
        if quantize_int8:
            q, scale = _quantize_int8(array)
            out[name] = Variable.from_numpy(q, "int8")
            out[name + "_scale"] = Variable.from_numpy(scale, "float32")
        else:
            out[name] = _float(array, dtype)

    def plain(name, array):
        out[name] = _float(array, dtype)

    def norm(prefix, hf):
        plain(prefix + "/gamma", state[hf + ".weight"])
        plain(prefix + "/beta", state[hf + ".bias"])

    def linear(prefix, hf):
        weight(prefix + "/weight", state[hf + ".weight"])
        plain(prefix + "/bias", state[hf + ".bias"])

    def fused(prefix, hf, parts):
        weight(prefix + "/weight", np.concatenate([state[f"{hf}.{p}_proj.weight"] for p in parts]))
        biases = [state.get(f"{hf}.{p}_proj.bias", np.zeros(d, np.float32)) for p in parts]
        plain(prefix + "/bias", np.concatenate(biases))

    for stack, layers in (("encoder", config["encoder_layers"]),
                          ("decoder", config["decoder_layers"])):
        hf_stack = "model." + stack
        for i in range(layers):
            src, dst = f"{hf_stack}.layers.{i}", f"{stack}/layer_{i}"
            fused(dst + "/self_attention/linear_0", src + ".self_attn", ("q", "k", "v"))
            linear(dst + "/self_attention/linear_1", src + ".self_attn.out_proj")
            norm(dst + "/self_attention/layer_norm", src + ".self_attn_layer_norm")
            if stack == "decoder":
                linear(dst + "/attention/linear_0", src + ".encoder_attn.q_proj")
                fused(dst + "/attention/linear_1", src + ".encoder_attn", ("k", "v"))
                linear(dst + "/attention/linear_2", src + ".encoder_attn.out_proj")
                norm(dst + "/attention/layer_norm", src + ".encoder_attn_layer_norm")
            linear(dst + "/ffn/linear_0", src + ".fc1")
            linear(dst + "/ffn/linear_1", src + ".fc2")
            norm(dst + "/ffn/layer_norm", src + ".final_layer_norm")
        norm(stack + "/layer_norm", hf_stack + ".layer_norm")
        plain(stack + "/position_encodings/encodings", state[hf_stack + ".embed_positions.weight"])
    for conv in ("conv1", "conv2"):
        weight(f"encoder/{conv}/weight", state[f"model.encoder.{conv}.weight"])
        plain(f"encoder/{conv}/bias", state[f"model.encoder.{conv}.bias"])
    weight("decoder/embeddings/weight", state["model.decoder.embed_tokens.weight"])
    out["encoder/num_heads"] = scalar(config["encoder_attention_heads"], "int16")
    out["decoder/num_heads"] = scalar(config["decoder_attention_heads"], "int16")
    out["decoder/activation"] = scalar(3 if revision >= 3 else 1, "int8")  # GELU
    out["decoder/pre_norm"] = scalar(1, "int8")
    out["decoder/alignment_layer"] = scalar(-1, "int16")
    out["decoder/alignment_heads"] = scalar(1, "int16")
    out["decoder/scale_embeddings"] = scalar(0, "int8")
    out["decoder/alibi"] = scalar(0, "int8")
    out["decoder/start_from_zero_embedding"] = scalar(0, "int8")
    aliases = [("decoder/projection/weight", "decoder/embeddings/weight")]
    return sorted(out.items()), aliases


def whisper_config_json(suppress_ids, suppress_ids_begin, lang_ids, alignment_heads):
    return {"alignment_heads": alignment_heads, "lang_ids": lang_ids,
            "suppress_ids": suppress_ids, "suppress_ids_begin": suppress_ids_begin}


def unfuse(variables, aliases, config):
    """The HF state dict (numpy float32) a CTranslate2 Whisper model means:
    the inverse of whisper_variables, written independently of oasr."""
    d = config["d_model"]

    def get(name):
        var = resolve(variables, aliases, name)
        values = var.numpy().astype(np.float32)
        if var.dtype in ("int8", "int16"):
            scale = resolve(variables, aliases, name + "_scale").numpy().astype(np.float32)
            shape = (-1,) + (1,) * (values.ndim - 1) if scale.ndim else ()
            values = values / scale.reshape(shape)
        return values

    out = {}
    out["model.encoder.conv1.weight"] = get("encoder/conv1/weight")
    out["model.encoder.conv1.bias"] = get("encoder/conv1/bias")
    out["model.encoder.conv2.weight"] = get("encoder/conv2/weight")
    out["model.encoder.conv2.bias"] = get("encoder/conv2/bias")
    for stack, layers in (("encoder", config["encoder_layers"]),
                          ("decoder", config["decoder_layers"])):
        hf_stack = "model." + stack
        out[hf_stack + ".embed_positions.weight"] = get(stack + "/position_encodings/encodings")
        for i in range(layers):
            src, dst = f"{stack}/layer_{i}", f"{hf_stack}.layers.{i}"
            w, b = get(src + "/self_attention/linear_0/weight"), get(
                src + "/self_attention/linear_0/bias")
            for k, p in enumerate("qkv"):
                out[f"{dst}.self_attn.{p}_proj.weight"] = w[k * d:(k + 1) * d]
                if p != "k":
                    out[f"{dst}.self_attn.{p}_proj.bias"] = b[k * d:(k + 1) * d]
            out[f"{dst}.self_attn.out_proj.weight"] = get(src + "/self_attention/linear_1/weight")
            out[f"{dst}.self_attn.out_proj.bias"] = get(src + "/self_attention/linear_1/bias")
            pairs = [("self_attention/layer_norm", "self_attn_layer_norm"),
                     ("ffn/layer_norm", "final_layer_norm")]
            if stack == "decoder":
                pairs.append(("attention/layer_norm", "encoder_attn_layer_norm"))
                a = src + "/attention"
                out[f"{dst}.encoder_attn.q_proj.weight"] = get(a + "/linear_0/weight")
                out[f"{dst}.encoder_attn.q_proj.bias"] = get(a + "/linear_0/bias")
                kv_w, kv_b = get(a + "/linear_1/weight"), get(a + "/linear_1/bias")
                out[f"{dst}.encoder_attn.k_proj.weight"] = kv_w[:d]
                out[f"{dst}.encoder_attn.v_proj.weight"] = kv_w[d:]
                out[f"{dst}.encoder_attn.v_proj.bias"] = kv_b[d:]
                out[f"{dst}.encoder_attn.out_proj.weight"] = get(a + "/linear_2/weight")
                out[f"{dst}.encoder_attn.out_proj.bias"] = get(a + "/linear_2/bias")
            for ct2, hf in pairs:
                out[f"{dst}.{hf}.weight"] = get(f"{src}/{ct2}/gamma")
                out[f"{dst}.{hf}.bias"] = get(f"{src}/{ct2}/beta")
            for k in ("0", "1"):
                hf = "fc1" if k == "0" else "fc2"
                out[f"{dst}.{hf}.weight"] = get(f"{src}/ffn/linear_{k}/weight")
                out[f"{dst}.{hf}.bias"] = get(f"{src}/ffn/linear_{k}/bias")
        out[hf_stack + ".layer_norm.weight"] = get(stack + "/layer_norm/gamma")
        out[hf_stack + ".layer_norm.bias"] = get(stack + "/layer_norm/beta")
    out["model.decoder.embed_tokens.weight"] = get("decoder/embeddings/weight")
    return out

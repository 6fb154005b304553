#!/usr/bin/env python3
"""Writes the seed inputs of the libFuzzer targets (tests/fuzz/*_fuzz.cc) to
tests/fuzz/corpus/<target>/seed-*: small, valid files of each format (and a
few that are one defect away from valid), built from the formats'
definitions. Files named crash-* (inputs that once crashed a parser, kept as
regressions) are left alone. Run with /usr/bin/python3 (the torch.save
seeds need Debian's python3-torch; without it they are skipped and the ones
committed stay); the output is deterministic, so a re-run changes nothing.

  /usr/bin/python3 tests/fuzz/make_corpus.py
"""

import io
import json
import math
import os
import pickle
import struct
import sys
import zipfile

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(folder, "seed-" + name), "wb") as f:
        f.write(data)


def compact(document):
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


# ---- safetensors --------------------------------------------------------------

def safetensors(tensors, metadata=None, align=8):
    """tensors: list of (name, dtype, shape, raw bytes), stored in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = compact(header).encode()
    text += b" " * ((-len(text) - 8) % align)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
    write("safetensors", "empty", safetensors([]))
    write("safetensors", "two", safetensors(
        [("w", "F32", [2, 2], f32), ("b", "I8", [3], b"\x01\x02\xff")], {"format": "pt"}))
    # Unpadded header: the BF16 and I64 tensors sit at misaligned offsets.
    write("safetensors", "misaligned", safetensors(
        [("x", "U8", [1], b"\x07"), ("h", "BF16", [2], b"\x80\x3f\x00\x40"),
         ("i", "I64", [1], struct.pack("<q", -5))], align=1))
    write("safetensors", "zero_size", safetensors(
        [("e", "F16", [0, 4], b""), ("s", "I32", [], struct.pack("<i", 7))]))
    write("safetensors", "fp8_f64", safetensors(
        [("q", "F8_E4M3", [2], b"\x38\x40"), ("d", "F64", [1], struct.pack("<d", 1.5))]))

    index = {"metadata": {"total_size": 20},
             "weight_map": {"a": "model-00001-of-00002.safetensors",
                            "b": "model-00001-of-00002.safetensors",
                            "c": "model-00002-of-00002.safetensors"}}
    write("safetensors_index", "index", json.dumps(index, indent=2))
    write("safetensors_index", "one_shard", compact(
        {"weight_map": {"c": "model-00002-of-00002.safetensors"}}))
    write("safetensors_index", "missing_shard", compact(
        {"weight_map": {"a": "model-00003-of-00003.safetensors"}}))


# ---- pickles and torch.save ------------------------------------------------------

def pickle_seeds():
    data = {"name": "conformer", "layers": [1, 2, 3], "ratio": 0.25, "flags": (True, False, None),
            "nested": {"a": [b"\x00\xff", "\u00e9\u4f60"], 7: {1.5, 2}}, "big": 2 ** 70,
            "neg": -(2 ** 40), "empty": ()}
    for protocol in (0, 2, 4):
        write("pickle", "protocol%d" % protocol, pickle.dumps(data, protocol=protocol))
    shared = [1, 2]
    write("pickle", "memo", pickle.dumps({"x": shared, "y": shared, "z": frozenset([3])},
                                         protocol=2))


def torch_seeds():
    try:
        import torch
    except ImportError:
        print("make_corpus: no torch; the torch.save seeds are left as they are", file=sys.stderr)
        return
    import collections
    # The wrapped mode (torch_checkpoint_fuzz.cc) gives the pickle two
    # storages, "0" of 64 bytes and "1" of 8 bytes: the tensors fit them.
    states = {
        "flat": collections.OrderedDict(
            [("encoder.weight", torch.zeros(2, 3)), ("encoder.bias", torch.zeros(4, dtype=torch.int16))]),
        "wrapped": {"model": {"w": torch.zeros(4, dtype=torch.float64)}, "epoch": 3,
                    "optimizer": {"lr": 0.001}},
        "views": {"t": torch.zeros(4, 4)[1:3, ::2], "half": torch.zeros(2, dtype=torch.float16)},
    }
    for name, state in states.items():
        buffer = io.BytesIO()
        torch.save(state, buffer, _use_new_zipfile_serialization=True)
        with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
            pkl = [n for n in archive.namelist() if n.endswith("/data.pkl")][0]
            write("torch_checkpoint", "pickle_" + name, archive.read(pkl))
            if name == "flat":
                write("torch_checkpoint", "zip_" + name, buffer.getvalue())
                write("pickle", "torch_" + name, archive.read(pkl))


# ---- CTranslate2 model.bin ---------------------------------------------------------

def ct2_string(text):
    raw = text.encode()
    return struct.pack("<H", len(raw) + 1) + raw + b"\0"


def ct2_model(version, variables, aliases=(), spec="WhisperSpec", revision=3):
    """variables: (name, dtype id, item size, shape, raw bytes)."""
    out = struct.pack("<I", version)
    if version >= 2:
        out += ct2_string(spec) + struct.pack("<I", revision)
    out += struct.pack("<I", len(variables))
    for name, dtype_id, item_size, shape, raw in variables:
        out += ct2_string(name) + struct.pack("<B", len(shape))
        out += b"".join(struct.pack("<I", d) for d in shape)
        if version >= 4:
            out += struct.pack("<BI", dtype_id, len(raw))
        else:
            out += struct.pack("<BI", item_size, len(raw) // item_size)
        out += raw
    if version >= 3:
        out += struct.pack("<I", len(aliases))
        for alias, target in aliases:
            out += ct2_string(alias) + ct2_string(target)
    return out


def ct2_seeds():
    f32 = struct.pack("<3f", 0.5, -1.0, 2.0)
    i16 = struct.pack("<2h", -3, 300)
    new = [("encoder/num_heads", 3, 4, [], struct.pack("<i", 6)),
           ("encoder/conv1/weight", 0, 4, [1, 3], f32),
           ("decoder/embeddings/weight", 4, 2, [2, 1], b"\x00\x3c\x00\xc0"),
           ("decoder/embeddings/weight_scale", 0, 4, [1], struct.pack("<f", 0.1)),
           ("decoder/q", 1, 1, [2], b"\x7f\x81"),
           ("decoder/bf", 5, 2, [1], b"\x80\x3f"),
           ("decoder/s16", 2, 2, [2], i16)]
    aliases = [("decoder/projection/weight", "decoder/embeddings/weight"),
               ("decoder/projection2/weight", "decoder/projection/weight")]
    write("ct2_model", "v6", ct2_model(6, new, aliases))
    write("ct2_model", "v4_no_alias", ct2_model(4, new[:3], spec="TransformerSpec", revision=1))
    old = [("w", 0, 4, [3], f32), ("s", 0, 2, [2], i16), ("q", 0, 1, [1, 1], b"\x05"),
           ("n", 0, 1, [], b"\x02")]
    write("ct2_model", "v3", ct2_model(3, old, [("alias_w", "w")]))
    write("ct2_model", "v2", ct2_model(2, old))
    write("ct2_model", "v1", ct2_model(1, old))


# ---- audio ----------------------------------------------------------------------

def wav(samples, rate=16000, channels=1, fmt=1, bits=16, extensible=False, data_size=None,
        extra_chunks=b""):
    """A RIFF/WAVE file; `samples` are interleaved floats in [-1, 1]."""
    if fmt == 3:
        payload = b"".join(struct.pack("<f", s) for s in samples)
    elif bits == 8:
        payload = bytes(int(round(s * 127)) + 128 for s in samples)
    elif bits == 24:
        payload = b"".join(struct.pack("<i", int(s * 8388607))[:3] for s in samples)
    else:
        payload = b"".join(struct.pack("<h", int(s * 32767)) for s in samples)
    block = channels * bits // 8
    if extensible:
        sub_format = struct.pack("<H", fmt) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
        fmt_chunk = struct.pack("<HHIIHHHHI", 0xFFFE, channels, rate, rate * block, block, bits,
                                22, bits, (1 << channels) - 1) + sub_format
    else:
        fmt_chunk = struct.pack("<HHIIHH", fmt, channels, rate, rate * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt_chunk)) + fmt_chunk + extra_chunks
    body += b"data" + struct.pack("<I", len(payload) if data_size is None else data_size) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def sndfile_seed(name, major, subtype, rate, samples):
    """FLAC / Ogg seeds written by the system libsndfile (through ctypes)."""
    import ctypes
    import ctypes.util
    import tempfile
    library = ctypes.util.find_library("sndfile")
    if library is None:
        print("make_corpus: no libsndfile; seed-%s skipped" % name, file=sys.stderr)
        return
    sf = ctypes.CDLL(library)

    class SfInfo(ctypes.Structure):
        _fields_ = [("frames", ctypes.c_int64), ("samplerate", ctypes.c_int),
                    ("channels", ctypes.c_int), ("format", ctypes.c_int),
                    ("sections", ctypes.c_int), ("seekable", ctypes.c_int)]

    sf.sf_open.restype = ctypes.c_void_p
    sf.sf_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(SfInfo)]
    sf.sf_writef_float.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64]
    sf.sf_close.argtypes = [ctypes.c_void_p]
    info = SfInfo(0, rate, 1, major | subtype, 0, 0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "seed")
        handle = sf.sf_open(path.encode(), 0x20, ctypes.byref(info))  # SFM_WRITE
        if not handle:
            print("make_corpus: libsndfile cannot write seed-%s" % name, file=sys.stderr)
            return
        values = (ctypes.c_float * len(samples))(*samples)
        sf.sf_writef_float(handle, values, len(samples))
        sf.sf_close(handle)
        with open(path, "rb") as f:
            write("audio", name, f.read())


def audio_seeds():
    tone = [0.5 * math.sin(2 * math.pi * 440 * i / 8000) for i in range(160)]
    write("audio", "pcm16_8k", wav(tone, rate=8000))
    stereo = [v for s in tone[:80] for v in (s, -s)]
    write("audio", "float_stereo_16k", wav(stereo, rate=16000, channels=2, fmt=3, bits=32))
    write("audio", "u8_22k", wav(tone[:100], rate=22050, bits=8))
    write("audio", "pcm24_ext_48k", wav(tone[:60], rate=48000, bits=24, extensible=True,
                                        extra_chunks=b"LIST\x04\x00\x00\x00INFO"))
    write("audio", "truncated", wav(tone[:40], rate=16000, data_size=4000))
    write("audio", "float_loud", wav([0.1, 100.0, 0.2], fmt=3, bits=32))
    sndfile_seed("flac_16k", 0x170000, 0x0002, 16000, tone[:400])  # FLAC, PCM_16
    sndfile_seed("ogg_vorbis_8k", 0x200000, 0x0060, 8000, tone)     # OGG, VORBIS


# ---- text formats -----------------------------------------------------------------

TRAIN_YAML = """\
cmvn: global_cmvn
cmvn_conf:
  cmvn_file: data/train/global_cmvn
  is_json_cmvn: true
ctc: ctc
ctc_conf:
  ctc_blank_id: 0
dataset_conf:
  fbank_conf:
    dither: 1.0
    frame_length: 25
    frame_shift: 10
    num_mel_bins: 8
  resample_conf:
    resample_rate: 16000
decoder: bitransformer
decoder_conf:
  attention_heads: 2
  dropout_rate: 0.1
  linear_units: 16
  num_blocks: 1
  r_num_blocks: 1
encoder: conformer
encoder_conf:
  activation_type: swish
  attention_heads: 2
  causal: true
  cnn_module_kernel: 3
  cnn_module_norm: layer_norm
  input_layer: conv2d
  linear_units: 16
  normalize_before: true
  num_blocks: 1
  output_size: 8
  pos_enc_layer_type: rel_pos
  selfattention_layer_type: rel_selfattn
  use_cnn_module: true
  use_dynamic_chunk: true
input_dim: 8
model: asr_model
model_conf:
  ctc_weight: 0.3
  reverse_weight: 0.5
output_dim: 6
tokenizer: char
tokenizer_conf:
  bpe_path: null
  special_tokens:
    <blank>: 0
    <eos>: 5
    <sos>: 5
    <unk>: 1
  split_with_space: false
  symbol_table_path: data/dict/lang_char.txt
vocab_size: 6
"""

TRAIN_YAML_2X = """\
cmvn_file: exp/global_cmvn
is_json_cmvn: false
input_dim: 80
output_dim: 4233
encoder: conformer
encoder_conf: {output_size: 256, attention_heads: 4, linear_units: 2048, num_blocks: 12,
  input_layer: conv2d8, normalize_before: true, cnn_module_kernel: 15, use_cnn_module: true,
  activation_type: gelu, pos_enc_layer_type: rel_pos, selfattention_layer_type: rel_selfattn,
  causal: false, cnn_module_norm: batch_norm}
decoder: transformer
decoder_conf: &dec {attention_heads: 4, linear_units: 2048, num_blocks: 6}
dataset_conf:
  fbank_conf: {num_mel_bins: 80, frame_shift: 10, frame_length: 25, dither: 0.1}
model_conf: {ctc_weight: 0.3, lsm_weight: 0.1, reverse_weight: 0.0}
"""


def text_seeds():
    write("manifest", "eval", "".join(compact(e) + "\n" for e in [
        {"id": "utt1", "audio": "wav/a.wav", "text": "hello world"},
        {"id": "utt2", "audio": "/abs/b.flac", "text": "\u4f60\u597d", "duration": 1.5},
        {"id": "utt3", "audio": "c.wav", "text": ""}]))
    write("manifest", "crlf_blank", '{"id":"a","audio":"a.wav"}\r\n\r\n   \n{"id":"b","audio":"b.wav"}\r\n')
    write("manifest", "bad_lines", '{"id":"a","audio":"a.wav","text":"x"}\n[1,2]\n{"id":"a",'
                                   '"audio":"x","text":"y"}\n{"id":5}\nnot json\n')

    write("json_file", "object", json.dumps({"a": [1, 2.5, -3e10, True, None], "b": {"c": "\u00e9"}}))
    write("json_file", "nested", "[" * 40 + "]" * 40)
    write("json_file", "scalar", '"\\ud83d\\ude00 \\u0000"')

    write("wenet_train_yaml", "wenet3", TRAIN_YAML)
    write("wenet_train_yaml", "wenet2_flow", TRAIN_YAML_2X)

    write("wenet_cmvn", "json", compact({"mean_stat": [10.0, 20.0, -5.0], "var_stat": [60.0, 90.0, 40.0],
                                         "frame_num": 10}))
    write("wenet_cmvn", "kaldi", " [\n  10 20 -5 10\n  60 90 40 0 ]\n")

    write("units", "char", "<blank> 0\n<unk> 1\n\u4f60 2\n\u597d 3\n\u2581a 4\n<sos/eos> 5\n")
    write("units", "gaps", "a 0\nb 2\n\n c  1 \nd\t3\r\n")

    with open(os.path.join(os.path.dirname(CORPUS), "..", "..", "models",
                           "oasr-u2pp-char-8k", "oasr_config.json"), "rb") as f:
        native = json.load(f)
    write("native_config", "bundled", json.dumps(native, indent=1))
    quantized = dict(native, format_version=2, quantization={"scheme": "w8a8"})
    write("native_config", "quantized", compact(quantized))

    config = {"model_type": "whisper", "num_mel_bins": 80, "d_model": 384, "encoder_layers": 4,
              "encoder_attention_heads": 6, "decoder_layers": 4, "decoder_attention_heads": 6,
              "encoder_ffn_dim": 1536, "decoder_ffn_dim": 1536, "vocab_size": 51865,
              "max_source_positions": 1500, "max_target_positions": 448,
              "activation_function": "gelu", "scale_embedding": False,
              "decoder_start_token_id": 50258, "eos_token_id": 50257, "pad_token_id": 50257,
              "suppress_tokens": [1, 2, 7], "begin_suppress_tokens": [220, 50257]}
    generation = {"alignment_heads": [[2, 2], [3, 0]], "begin_suppress_tokens": [220, 50257],
                  "decoder_start_token_id": 50258, "eos_token_id": 50257, "pad_token_id": 50257,
                  "bos_token_id": 50257, "is_multilingual": True,
                  "lang_to_id": {"<|en|>": 50259, "<|de|>": 50261},
                  "task_to_id": {"transcribe": 50359, "translate": 50358},
                  "max_length": 448, "no_timestamps_token_id": 50363, "prev_sot_token_id": 50361,
                  "suppress_tokens": [1, 2, 7], "forced_decoder_ids": [[1, None], [2, 50359]]}
    write("whisper_config", "multilingual", compact(config) + "\0" + compact(generation))
    english = dict(config, vocab_size=51864)
    write("whisper_config", "english_no_generation", compact(english))
    write("whisper_config", "english_sparse", compact(english) + "\0" +
          compact({"no_timestamps_token_id": 50362, "eos_token_id": [50256, 3]}))

    # A byte-level BPE over "Hello world": the byte characters it uses
    # (GPT-2's map: a space is "\u0120"), merges up to whole words.
    vocab = {c: i for i, c in enumerate("Helowrd,.!\u0120")}
    merges = [("H", "e"), ("l", "l"), ("He", "ll"), ("Hell", "o"), ("\u0120", "w"),
              ("o", "r"), ("\u0120w", "or"), ("l", "d"), ("\u0120wor", "ld")]
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    added = [{"id": 50, "content": "<|endoftext|>", "special": True, "normalized": False,
              "lstrip": False, "rstrip": False, "single_word": False},
             {"id": 51, "content": " <x>", "special": False, "normalized": True,
              "lstrip": True, "rstrip": True, "single_word": False}]
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                 "normalizer": None,
                 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                                   "trim_offsets": True, "use_regex": True},
                 "post_processor": None,
                 "decoder": {"type": "ByteLevel", "add_prefix_space": True,
                             "trim_offsets": True, "use_regex": True},
                 "model": {"type": "BPE", "dropout": None, "unk_token": None,
                           "continuing_subword_prefix": "", "end_of_word_suffix": "",
                           "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                           "vocab": vocab, "merges": [a + " " + b for a, b in merges]}}
    write("bpe_tokenizer_json", "small", compact(tokenizer) + "\0Hello world, <|endoftext|>Hello")
    pairs = dict(tokenizer)
    pairs["model"] = dict(tokenizer["model"], merges=[[a, b] for a, b in merges])
    pairs["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True}
    write("bpe_tokenizer_json", "pair_merges", compact(pairs) + "\0 world <x> Hello")

    merges_txt = "#version: 0.2\n" + "".join(a + " " + b + "\n" for a, b in merges)
    vocab_eot = dict(vocab, **{"<|endoftext|>": 49})
    tokenizer_config = {"added_tokens_decoder": {"49": {"content": "<|endoftext|>", "special": True},
                                                 "52": {"content": "<|notimestamps|>"}}}
    write("bpe_vocab_merges", "gpt2", "\0".join([
        compact(vocab_eot), merges_txt, compact({"<|startoftranscript|>": 50, "<|en|>": 51}),
        compact(tokenizer_config)]))
    write("bpe_vocab_merges", "no_added", compact(vocab) + "\0" + merges_txt.replace("\n", "\r\n"))

    body = ("--XyZ\r\n"
            'Content-Disposition: form-data; name="file"; filename="a.wav"\r\n'
            "Content-Type: audio/wav\r\n\r\n"
            "RIFF....WAVE\r\n"
            "--XyZ\r\n"
            'Content-Disposition: form-data; name="model"\r\n\r\n'
            "whisper-1\r\n"
            "--XyZ--\r\n")
    write("multipart", "upload", "multipart/form-data; boundary=XyZ\0" + body)
    write("multipart", "quoted", 'multipart/form-data; charset=utf-8; boundary="a b"\0'
          '--a b\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n--a b--')
    write("multipart", "truncated", "multipart/form-data; boundary=B\0--B\r\n"
          'Content-Disposition: form-data; name="file"; filename="x"\r\n\r\nabc')


def main():
    safetensors_seeds()
    pickle_seeds()
    torch_seeds()
    ct2_seeds()
    audio_seeds()
    text_seeds()
    total = sum(os.path.getsize(os.path.join(root, name))
                for root, _, names in os.walk(CORPUS) for name in names)
    print("make_corpus: %d bytes under %s" % (total, CORPUS))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Oracle for oasr's Whisper directory loader and CTranslate2 converter
(models/whisper/whisper_dir, models/whisper/whisper_convert).

Generate (--out DIR). Two random-weight Whisper models built by transformers
(WhisperForConditionalGeneration; every parameter randomised, layer norms
included, so a swapped gamma/beta or q/k/v shows):
  en     English-only layout: vocab 51864, <|endoftext|> 50256 .. <|notimestamps|> 50362
  multi  large-v3 layout: vocab 51866, 128 mel bins, 100 languages
written as
  DIR/hf_en_safetensors/   save_pretrained (safetensors) + a full HF-style
                           generation_config.json + tokenizer.json
  DIR/hf_en_torch/         save_pretrained(safe_serialization=False) (pytorch_model.bin,
                           HF's minimal generation config) + vocab.json / merges.txt /
                           added_tokens.json
  DIR/hf_multi_sharded/    sharded safetensors + index, full generation config
  DIR/hf_multi_nogen/      pytorch_model.bin, no generation_config.json
  DIR/ct2_en_f32/, ct2_multi_f16/, ct2_en_int8/ (int8 weights + float32 scales, as
  CTranslate2's int8_float32), ct2_en_rev2_bf16/ (WhisperSpec revision 2, bfloat16):
                           CTranslate2 directories written by ct2_format.py from the
                           HF state dict, the way ct2-transformers-converter lays it out
  DIR/ct2_bad_*/           defective CTranslate2 directories
  DIR/hf_bad_untied/       hf_en_torch with a proj_out.weight that is not embed_tokens
  DIR/cases.safetensors    "<set>/<hf name>": the HF state dict (float32) of each model
                           ("en", "multi"), cast by torch ("multi_f16", "en_bf16"), and
                           CTranslate2's int8 dequantized by numpy ("en_int8": q / scale)
Metadata "cases": JSON {dir: {"kind": "hf" | "ct2", "tensors": set name,
"names": HF state-dict names in order (proj_out excluded), "config": the
WhisperConfig fields, "generation": the expected WhisperGeneration, "notes":
substrings expected among the notes} | {"refused": {"code", "needles"},
"loader": "hf" for HF directories (else CTranslate2)}}.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import WhisperConfig, WhisperForConditionalGeneration
from transformers.models.whisper.tokenization_whisper import LANGUAGES

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ct2_format  # noqa: E402

CONFIG_FIELDS = ["num_mel_bins", "d_model", "encoder_layers", "encoder_attention_heads",
                 "decoder_layers", "decoder_attention_heads", "encoder_ffn_dim",
                 "decoder_ffn_dim", "vocab_size", "max_source_positions", "max_target_positions"]

EN = dict(vocab_size=51864, num_mel_bins=80, d_model=16, encoder_layers=2,
          encoder_attention_heads=4, decoder_layers=3, decoder_attention_heads=2,
          encoder_ffn_dim=40, decoder_ffn_dim=56, max_source_positions=1500,
          max_target_positions=448, pad_token_id=50256, bos_token_id=50256, eos_token_id=50256,
          decoder_start_token_id=50257)
MULTI = dict(vocab_size=51866, num_mel_bins=128, d_model=24, encoder_layers=1,
             encoder_attention_heads=3, decoder_layers=2, decoder_attention_heads=2,
             encoder_ffn_dim=40, decoder_ffn_dim=56, max_source_positions=1500,
             max_target_positions=448, pad_token_id=50257, bos_token_id=50257,
             eos_token_id=50257, decoder_start_token_id=50258)


def special_tokens(multilingual):
    """Whisper's special tokens and ids, laid out as OpenAI's tokenizers do."""
    eot = 50257 if multilingual else 50256
    langs = list(LANGUAGES) if multilingual else list(LANGUAGES)[:99]
    tokens = [("<|endoftext|>", eot), ("<|startoftranscript|>", eot + 1)]
    tokens += [(f"<|{code}|>", eot + 2 + i) for i, code in enumerate(langs)]
    after = eot + 2 + len(langs)
    for i, name in enumerate(["translate", "transcribe", "startoflm", "startofprev",
                              "nospeech" if multilingual else "nocaptions", "notimestamps"]):
        tokens.append((f"<|{name}|>", after + i))
    return dict(tokens), [f"<|{code}|>" for code in langs]


def byte_vocab():
    """A few ordinary BPE entries (ids 0..) so the files look like tokenizers."""
    return {"!": 0, "\"": 1, "#": 2, "Ġ": 220, "Ġthe": 262}


def write_tokenizer_json(path, specials, eot):
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t, i in sorted(specials.items(),
                                                                       key=lambda kv: kv[1])]
    vocab = byte_vocab()
    vocab["<|endoftext|>"] = eot
    document = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                "normalizer": None, "pre_tokenizer": {"type": "ByteLevel"},
                "post_processor": None, "decoder": {"type": "ByteLevel"},
                "model": {"type": "BPE", "vocab": vocab, "merges": ["Ġ t", "h e"]}}
    with open(path, "w") as f:
        json.dump(document, f)


def write_vocab_merges(dir_path, specials, eot):
    vocab = byte_vocab()
    vocab["<|endoftext|>"] = eot
    with open(os.path.join(dir_path, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    with open(os.path.join(dir_path, "merges.txt"), "w") as f:
        f.write("#version: 0.2\nĠ t\nh e\n")
    with open(os.path.join(dir_path, "added_tokens.json"), "w") as f:
        json.dump({t: i for t, i in specials.items() if t != "<|endoftext|>"}, f)


SUPPRESS = [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92,
            93, 357, 366, 438, 532, 685, 705, 796, 930, 1058, 1220, 1267, 1279, 1303, 1343]


def expected_generation(specials, langs, multilingual, suppress, begin, alignment, max_length):
    eot = specials["<|endoftext|>"]
    gen = {"decoder_start_token_id": specials["<|startoftranscript|>"], "eos_token_id": eot,
           "pad_token_id": eot, "no_timestamps_token_id": specials["<|notimestamps|>"],
           "is_multilingual": multilingual, "suppress_tokens": suppress,
           "begin_suppress_tokens": begin, "max_length": max_length,
           "alignment_heads": alignment, "prev_sot_token_id": specials["<|startofprev|>"],
           "lang_to_id": {t: specials[t] for t in langs} if multilingual else {},
           "transcribe_token_id": specials["<|transcribe|>"] if multilingual else None,
           "translate_token_id": specials["<|translate|>"] if multilingual else None}
    return gen


def hf_generation_json(gen):
    """generation_config.json as HF's openai/whisper-* checkpoints have it."""
    out = {"alignment_heads": gen["alignment_heads"],
           "begin_suppress_tokens": gen["begin_suppress_tokens"],
           "bos_token_id": gen["eos_token_id"],
           "decoder_start_token_id": gen["decoder_start_token_id"],
           "eos_token_id": gen["eos_token_id"], "is_multilingual": gen["is_multilingual"],
           "max_initial_timestamp_index": 50, "max_length": gen["max_length"],
           "no_timestamps_token_id": gen["no_timestamps_token_id"],
           "pad_token_id": gen["pad_token_id"], "prev_sot_token_id": gen["prev_sot_token_id"],
           "return_timestamps": False, "suppress_tokens": gen["suppress_tokens"],
           "transformers_version": "4.46.3"}
    if gen["is_multilingual"]:
        out["forced_decoder_ids"] = [[1, None], [2, gen["transcribe_token_id"]]]
        out["lang_to_id"] = gen["lang_to_id"]
        out["task_to_id"] = {"transcribe": gen["transcribe_token_id"],
                             "translate": gen["translate_token_id"]}
    else:
        out["forced_decoder_ids"] = [[1, gen["no_timestamps_token_id"]]]
    return out


def random_model(fields, seed):
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(WhisperConfig(**fields)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            base = 1.0 if name.endswith("layer_norm.weight") else 0.0
            param.copy_(base + 0.1 * torch.randn_like(param))
    return model


def state_names(model):
    return [n for n in model.state_dict() if n != "proj_out.weight"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cases, tensors = {}, {}

    def fresh(name):
        path = os.path.join(args.out, name)
        if os.path.exists(path):
            shutil.rmtree(path)
        os.makedirs(path)
        return path

    def config_of(fields):
        return {k: fields[k] for k in CONFIG_FIELDS}

    models = {}
    for set_name, fields, multilingual, seed in (("en", EN, False, 11), ("multi", MULTI, True, 12)):
        model = random_model(fields, seed)
        specials, langs = special_tokens(multilingual)
        state = {n: t.detach().clone().contiguous() for n, t in model.state_dict().items()
                 if n != "proj_out.weight"}
        for n, t in state.items():
            tensors[f"{set_name}/{n}"] = t
        models[set_name] = (model, fields, multilingual, specials, langs, state)

    alignment_en = [[1, 0], [2, 1]]
    alignment_multi = [[1, 1]]

    # ---- Hugging Face directories -------------------------------------------
    model, fields, _, specials, langs, state = models["en"]
    gen_en = expected_generation(specials, langs, False, SUPPRESS, [220, 50256], alignment_en,
                                 448)
    path = fresh("hf_en_safetensors")
    model.save_pretrained(path)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump(hf_generation_json(gen_en), f, indent=2)
    write_tokenizer_json(os.path.join(path, "tokenizer.json"), specials, 50256)
    cases["hf_en_safetensors"] = {"kind": "hf", "tensors": "en", "names": state_names(model),
                                  "config": config_of(fields), "generation": gen_en, "notes": []}

    path = fresh("hf_en_torch")
    model.save_pretrained(path, safe_serialization=False)
    write_vocab_merges(path, specials, 50256)
    # HF's generation config of a fresh model: only token ids and begin_suppress_tokens.
    gen = dict(gen_en, suppress_tokens=[], alignment_heads=[])
    cases["hf_en_torch"] = {"kind": "hf", "tensors": "en", "names": state_names(model),
                            "config": config_of(fields), "generation": gen,
                            "notes": ["suppress_tokens not given", "is_multilingual not given",
                                      "proj_out.weight is the tied copy"]}

    model, fields, _, specials, langs, state = models["multi"]
    gen_multi = expected_generation(specials, langs, True, SUPPRESS + [50358, 50359],
                                    [220, 50257], alignment_multi, 448)
    path = fresh("hf_multi_sharded")
    model.save_pretrained(path, max_shard_size="1MB")
    assert os.path.exists(os.path.join(path, "model.safetensors.index.json"))
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump(hf_generation_json(gen_multi), f, indent=2)
    write_tokenizer_json(os.path.join(path, "tokenizer.json"), specials, 50257)
    cases["hf_multi_sharded"] = {"kind": "hf", "tensors": "multi", "names": state_names(model),
                                 "config": config_of(fields), "generation": gen_multi,
                                 "notes": []}

    path = fresh("hf_multi_nogen")
    model.save_pretrained(path, safe_serialization=False)
    os.remove(os.path.join(path, "generation_config.json"))
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    config["suppress_tokens"] = gen_multi["suppress_tokens"]
    config["begin_suppress_tokens"] = [220, 50257]
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_tokenizer_json(os.path.join(path, "tokenizer.json"), specials, 50257)
    cases["hf_multi_nogen"] = {"kind": "hf", "tensors": "multi", "names": state_names(model),
                               "config": config_of(fields),
                               "generation": dict(gen_multi, alignment_heads=[]),
                               "notes": ["no generation_config.json", "100 language tokens",
                                         "proj_out.weight is the tied copy"]}

    # ---- CTranslate2 directories --------------------------------------------
    def ct2_dir(name, set_name, dtype="float32", int8=False, revision=3, edit=None,
                config_edit=None, tokenizer=True, spec="WhisperSpec", truncate=0):
        model, fields, multilingual, specials, langs, state = models[set_name]
        numpy_state = {n: t.numpy() for n, t in state.items()}
        variables, aliases = ct2_format.whisper_variables(numpy_state, fields, dtype, int8,
                                                          revision)
        if edit:
            variables, aliases = edit(dict(variables), list(aliases))
            variables = sorted(variables.items())
        data, _ = ct2_format.serialize(variables, aliases, 6, spec, revision)
        path = fresh(name)
        with open(os.path.join(path, "model.bin"), "wb") as f:
            f.write(data[:len(data) - truncate])
        gen = gen_multi if multilingual else gen_en
        config = ct2_format.whisper_config_json(
            gen["suppress_tokens"], gen["begin_suppress_tokens"],
            [specials[t] for t in langs], gen["alignment_heads"])
        if config_edit:
            config_edit(config)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        if tokenizer:
            write_tokenizer_json(os.path.join(path, "tokenizer.json"), specials,
                                 specials["<|endoftext|>"])
        with open(os.path.join(path, "vocabulary.txt"), "w") as f:
            f.write("\n".join(["!", "\"", "#"]) + "\n")
        return variables, gen, fields, model

    for name, set_name, dtype, int8, revision in (
            ("ct2_en_f32", "en", "float32", False, 3),
            ("ct2_multi_f16", "multi", "float16", False, 3),
            ("ct2_en_int8", "en", "float32", True, 3),
            ("ct2_en_rev2_bf16", "en", "bfloat16", False, 2)):
        variables, gen, fields, model = ct2_dir(name, set_name, dtype, int8, revision)
        expected_set = {("en", "float32"): "en", ("multi", "float32"): "multi"}.get(
            (set_name, dtype)) if not int8 else "en_int8"
        if expected_set is None:
            expected_set = f"{set_name}_{'f16' if dtype == 'float16' else 'bf16'}"
            cast = torch.float16 if dtype == "float16" else torch.bfloat16
            for n, t in models[set_name][5].items():
                tensors[f"{expected_set}/{n}"] = t.to(cast).contiguous()
        if int8:
            # CTranslate2's int8 as this generator wrote it, dequantized by numpy.
            hf = ct2_format.unfuse(dict(variables), {"decoder/projection/weight":
                                                     "decoder/embeddings/weight"}, fields)
            for n in models[set_name][5]:
                tensors[f"{expected_set}/{n}"] = torch.from_numpy(
                    np.ascontiguousarray(hf[n], np.float32))
        cases[name] = {"kind": "ct2", "tensors": expected_set, "names": state_names(model),
                       "config": config_of(fields), "generation": gen,
                       "notes": ["quantized weights dequantized"] if int8 else []}

    # ---- defective CTranslate2 directories ----------------------------------
    def refused(name, code, needles, **kwargs):
        ct2_dir(name, "en", **kwargs)
        cases[name] = {"refused": {"code": code, "needles": needles}}

    def drop(victim):
        def edit(variables, aliases):
            del variables[victim]
            return variables, aliases
        return edit

    def replace(victim, variable):
        def edit(variables, aliases):
            variables[victim] = variable(variables)
            return variables, aliases
        return edit

    refused("ct2_bad_no_suppress", "kCorruptFile", ["config.json", "suppress_ids"],
            config_edit=lambda c: c.pop("suppress_ids"))
    refused("ct2_bad_no_tokenizer", "kNotFound", ["tokenizer.json"], tokenizer=False)
    refused("ct2_bad_spec", "kUnsupported", ["\"TransformerSpec\"", "WhisperSpec"],
            spec="TransformerSpec")
    refused("ct2_bad_revision", "kUnsupported", ["revision 4"], revision=4)
    refused("ct2_bad_missing_tensor", "kCorruptFile",
            ["decoder/layer_1/ffn/linear_1/bias is missing"],
            edit=drop("decoder/layer_1/ffn/linear_1/bias"))
    refused("ct2_bad_shape", "kCorruptFile",
            ["encoder/layer_0/ffn/linear_1/weight is [40, 16], expected [16, 40]"],
            edit=replace("encoder/layer_0/ffn/linear_1/weight",
                         lambda v: ct2_format.Variable.from_numpy(
                             v["encoder/layer_0/ffn/linear_1/weight"].numpy().T.copy())))
    refused("ct2_bad_unknown_variable", "kCorruptFile",
            ["does not know", "decoder/layer_0/self_attention/relative_position_keys"],
            edit=replace("decoder/layer_0/self_attention/relative_position_keys",
                         lambda v: ct2_format.Variable.from_numpy(np.zeros((4, 4), np.float32))))

    def untie(variables, aliases):
        embed = variables["decoder/embeddings/weight"].numpy()
        variables["decoder/projection/weight"] = ct2_format.Variable.from_numpy(embed + 1)
        return variables, []
    refused("ct2_bad_untied", "kUnsupported", ["decoder/projection/weight", "untied"], edit=untie)
    refused("ct2_bad_activation", "kCorruptFile", ["decoder/activation is 1 (expected 3"],
            edit=replace("decoder/activation", lambda v: ct2_format.scalar(1, "int8")))
    refused("ct2_bad_truncated", "kCorruptFile", ["truncated", "model.bin"], truncate=1000)

    # torch.save keeps the tied proj_out copy; one that differs is another model.
    path = fresh("hf_bad_untied")
    shutil.copytree(os.path.join(args.out, "hf_en_torch"), path, dirs_exist_ok=True)
    state = torch.load(os.path.join(path, "pytorch_model.bin"))
    state["proj_out.weight"] = state["proj_out.weight"].clone() + 1.0
    torch.save(state, os.path.join(path, "pytorch_model.bin"))
    cases["hf_bad_untied"] = {"loader": "hf", "refused": {
        "code": "kUnsupported", "needles": ["proj_out.weight differs", "untied"]}}

    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(cases)})


if __name__ == "__main__":
    main()

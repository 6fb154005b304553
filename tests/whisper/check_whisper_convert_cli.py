#!/usr/bin/env python3
"""`oasr convert` end to end, judged by transformers.

For the CTranslate2 directories gen_whisper_dirs.py wrote (random models
built by transformers, laid out as ct2-transformers-converter does), runs
`oasr convert` (explicit --from ct2, and auto-detection) and loads the
result with transformers' WhisperForConditionalGeneration.from_pretrained
and GenerationConfig.from_pretrained. Checks:
  - every state-dict tensor equals the original model's (float16 / int8
    sources: the original cast by torch / dequantized as the generator
    recorded), proj_out tied to embed_tokens;
  - the logits of a forward pass on random features equal those of the
    original model with the same (cast) weights, exactly;
  - generation_config.json has the fields transformers' Whisper generate()
    reads, with the expected values, and generate() runs on it;
  - `oasr convert --from hf` of an HF directory loads in transformers too;
  - refusals: an existing destination without --force, a defective source
    (the CLI exits non-zero with the library's message).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import torch
from safetensors import safe_open
from transformers import GenerationConfig, WhisperForConditionalGeneration


def run(command, expect_ok=True):
    result = subprocess.run(command, capture_output=True, text=True)
    output = result.stdout + result.stderr
    if expect_ok and result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} exited {result.returncode}:\n{output}")
    return result.returncode, output


def expected_state(cases_file, set_name, names):
    with safe_open(cases_file, "pt") as f:
        return {n: f.get_tensor(f"{set_name}/{n}").float() for n in names}


def check_model(directory, info, cases_file, failures):
    model = WhisperForConditionalGeneration.from_pretrained(directory).eval()
    state = model.state_dict()
    expected = expected_state(cases_file, info["tensors"], info["names"])
    for name, want in expected.items():
        if not torch.equal(state[name].float(), want):
            failures.append(f"{directory}: {name} differs")
    if state["proj_out.weight"].data_ptr() != state["model.decoder.embed_tokens.weight"].data_ptr():
        failures.append(f"{directory}: proj_out is not tied to embed_tokens")

    # The original model with the expected (cast / dequantized) weights.
    reference = WhisperForConditionalGeneration(model.config).eval()
    missing, unexpected = reference.load_state_dict(expected, strict=False)
    if set(missing) - {"proj_out.weight"} or unexpected:
        failures.append(f"{directory}: reference load missing {missing} unexpected {unexpected}")
    reference.tie_weights()
    torch.manual_seed(0)
    config = model.config
    features = torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions)
    tokens = torch.tensor([[config.decoder_start_token_id, 11, 12, 13]])
    with torch.no_grad():
        got = model(input_features=features, decoder_input_ids=tokens).logits
        want = reference(input_features=features, decoder_input_ids=tokens).logits
    if not torch.equal(got, want):
        failures.append(f"{directory}: logits differ by {(got - want).abs().max().item()}")

    gen = GenerationConfig.from_pretrained(directory)
    expect = info["generation"]
    for key in ("decoder_start_token_id", "eos_token_id", "pad_token_id",
                "no_timestamps_token_id", "is_multilingual", "suppress_tokens",
                "begin_suppress_tokens", "max_length", "alignment_heads", "prev_sot_token_id"):
        if getattr(gen, key, None) != expect[key]:
            failures.append(f"{directory}: generation_config {key} = {getattr(gen, key, None)}, "
                            f"expected {expect[key]}")
    if expect["is_multilingual"]:
        if gen.lang_to_id != expect["lang_to_id"]:
            failures.append(f"{directory}: lang_to_id differs")
        if gen.task_to_id != {"transcribe": expect["transcribe_token_id"],
                              "translate": expect["translate_token_id"]}:
            failures.append(f"{directory}: task_to_id = {gen.task_to_id}")
        forced = [[1, None], [2, expect["transcribe_token_id"]]]
    else:
        forced = [[1, expect["no_timestamps_token_id"]]]
        if hasattr(gen, "lang_to_id"):
            failures.append(f"{directory}: an English-only model with lang_to_id")
    if gen.forced_decoder_ids != forced:
        failures.append(f"{directory}: forced_decoder_ids = {gen.forced_decoder_ids}")
    # generate() accepts the directory's settings (language given for multilingual
    # models, so no detection pass decides the prompt).
    kwargs = {"language": "en"} if expect["is_multilingual"] else {}
    with torch.no_grad():
        out = model.generate(features, max_new_tokens=3, **kwargs)
    prompt = [config.decoder_start_token_id]
    if expect["is_multilingual"]:
        prompt += [expect["lang_to_id"]["<|en|>"], expect["transcribe_token_id"]]
    prompt.append(expect["no_timestamps_token_id"])
    if out[0, :len(prompt)].tolist() != prompt:
        failures.append(f"{directory}: generate's prompt {out[0].tolist()} does not start "
                        f"with {prompt}")
    if expect["is_multilingual"]:
        with torch.no_grad():  # language detection reads lang_to_id
            detected = model.generate(features, max_new_tokens=1)[0].tolist()
        if detected[1] not in expect["lang_to_id"].values():
            failures.append(f"{directory}: detected language token {detected[1]} unknown")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--oasr", required=True)
    parser.add_argument("--cases", required=True, help="the whisper_dirs oracle directory")
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    cases_file = os.path.join(args.cases, "cases.safetensors")
    with safe_open(cases_file, "pt") as f:
        cases = json.loads(f.metadata()["cases"])
    if os.path.exists(args.work):
        shutil.rmtree(args.work)
    os.makedirs(args.work)
    failures = []

    for name, auto in (("ct2_en_f32", False), ("ct2_multi_f16", True), ("ct2_en_int8", False),
                       ("ct2_en_rev2_bf16", True)):
        out = os.path.join(args.work, name)
        command = [args.oasr, "convert", os.path.join(args.cases, name), out]
        if not auto:
            command[2:2] = ["--from", "ct2"]
        _, printed = run(command)
        if "Hugging Face layout" not in printed or "tensors:" not in printed:
            failures.append(f"{name}: unexpected summary:\n{printed}")
        check_model(out, cases[name], cases_file, failures)
        print(f"ok: {name} ({'auto' if auto else '--from ct2'})")

    # --from hf: an HF directory (pytorch_model.bin, vocab.json tokenizer) rewritten.
    out = os.path.join(args.work, "hf_en_torch")
    run([args.oasr, "convert", "--from", "hf", os.path.join(args.cases, "hf_en_torch"), out])
    check_model(out, dict(cases["hf_en_torch"], generation=dict(
        cases["hf_en_torch"]["generation"], alignment_heads=None)), cases_file, failures)
    for tokenizer_file in ("vocab.json", "merges.txt", "added_tokens.json"):
        if not os.path.isfile(os.path.join(out, tokenizer_file)):
            failures.append(f"hf_en_torch: {tokenizer_file} not copied")
    print("ok: hf_en_torch (--from hf)")

    # Refusals.
    existing = os.path.join(args.work, "ct2_en_f32")
    code, printed = run([args.oasr, "convert", "--from", "ct2",
                         os.path.join(args.cases, "ct2_en_f32"), existing], expect_ok=False)
    if code == 0 or "--force" not in printed:
        failures.append(f"an existing destination was not refused: {code} {printed}")
    code, _ = run([args.oasr, "convert", "--from", "ct2", os.path.join(args.cases, "ct2_en_f32"),
                   existing, "--force", "--dtype", "float16"])
    with open(os.path.join(existing, "config.json")) as f:
        if json.load(f)["torch_dtype"] != "float16":
            failures.append("--dtype float16 was not applied")
    code, printed = run([args.oasr, "convert", os.path.join(args.cases, "ct2_bad_shape"),
                         os.path.join(args.work, "bad")], expect_ok=False)
    if code == 0 or "expected [16, 40]" not in printed or os.path.exists(
            os.path.join(args.work, "bad")):
        failures.append(f"a defective source was not refused cleanly: {code} {printed}")
    leftovers = [n for n in os.listdir(args.work) if ".tmp-" in n or ".old-" in n]
    if leftovers:
        failures.append(f"staging directories left behind: {leftovers}")

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The spec's snippets, verbatim, and the engine's results against `oasr
transcribe` (the same engine behind the CLI: results must be equal, text for
text), on the bundled U2++ model and on Whisper tiny.en."""
import json
import subprocess

import pytest

import oasr
from conftest import CLI, MODEL, cli_transcripts


def spec_forms(ignore_glob):
    """The spec's own snippet ("Using it"): int8, fp8, and the dict form with
    an ignore glob; with the `oasr transcribe` flags that ask the same."""
    return [
        ("int8_w8a8", ["--quantization", "int8_w8a8"]),
        ("fp8_w8a8", ["--quantization", "fp8_w8a8"]),
        ({"scheme": "int8_w8a8", "ignore": ignore_glob},
         ["--quantization", "int8_w8a8", "--quantization-option", f"ignore={ignore_glob}"]),
    ]


SPEC_FORMS = spec_forms("encoder.encoders.0.*")


@pytest.mark.parametrize("quantization,flags", SPEC_FORMS, ids=["int8", "fp8", "int8-ignore"])
def test_spec_snippet_on_the_bundled_model(quantization, flags, prompts):
    from oasr.engine import ASREngine, EngineConfig

    engine = ASREngine(EngineConfig(ckpt_dir=MODEL, quantization=quantization))
    results = engine.transcribe(prompts)
    expected = cli_transcripts(MODEL, prompts, *flags)
    assert [r.text for r in results] == [expected[p] for p in prompts]
    info = engine.quantization_info()
    assert info["source"] == "online"
    assert info["quantized_layers"] > 0
    scheme = quantization if isinstance(quantization, str) else quantization["scheme"]
    assert info["schemes"] == [scheme]
    if isinstance(quantization, dict):
        # The ignored block's layers are left in full precision, with why.
        assert not [l for l in info["layers"] if l["path"].startswith("encoder.encoders.0.")]
        assert any(s["path"].startswith("encoder.encoders.0.") for s in info["skipped"])


WHISPER_FORMS = spec_forms("model.encoder.layers.0.*")


@pytest.mark.parametrize("quantization,flags", WHISPER_FORMS, ids=["int8", "fp8", "int8-ignore"])
def test_spec_snippet_on_whisper_tiny_en(quantization, flags, prompts, whisper_dir):
    from oasr.engine import ASREngine, EngineConfig

    engine = ASREngine(EngineConfig(ckpt_dir=whisper_dir, quantization=quantization))
    some = prompts[:3]
    results = engine.transcribe(some)
    expected = cli_transcripts(whisper_dir, some, *flags)
    assert [r.text for r in results] == [expected[p] for p in some]
    assert engine.quantization_info()["quantized_layers"] > 0


def test_full_precision_every_method_equals_the_cli(prompts):
    for method in ["ctc_greedy_search", "ctc_prefix_beam_search", "attention_rescoring"]:
        engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL, decode_method=method))
        texts = [r.text for r in engine.transcribe(prompts)]
        expected = cli_transcripts(MODEL, prompts, "--decode-method", method)
        assert texts == [expected[p] for p in prompts], method
        assert engine.quantization_info()["source"] == "none"


def test_per_call_decode_options_equal_the_cli(prompts, whisper_dir):
    engine = oasr.ASREngine({"ckpt_dir": MODEL})
    chunked = engine.transcribe(prompts, chunk_size=16, decode_method="ctc_prefix_beam_search")
    expected = cli_transcripts(MODEL, prompts, "--chunk-size", "16",
                               "--decode-method", "ctc_prefix_beam_search")
    assert [r.text for r in chunked] == [expected[p] for p in prompts]
    whisper = oasr.ASREngine({"ckpt_dir": whisper_dir})
    beam = whisper.transcribe(prompts[0], decode_method="beam_search", beam_size=5)
    assert beam.text == cli_transcripts(whisper_dir, prompts[:1], "--decode-method", "beam_search",
                                        "--beam-size", "5")[prompts[0]]


def test_whisper_timestamps_give_the_cli_segments(prompts, whisper_dir):
    whisper = oasr.ASREngine({"ckpt_dir": whisper_dir})
    r = whisper.transcribe(prompts[0], timestamps=True)
    cli = subprocess.run([CLI, "transcribe", "--ckpt-dir", whisper_dir, "--timestamps",
                          "--output-format", "json", prompts[0]],
                         capture_output=True, text=True, check=True)
    expected = json.loads(cli.stdout)
    assert r.text == expected["text"] and r.tokens == expected["tokens"]
    assert [(s.start, s.end, s.text) for s in r.segments] == [
        (min(g["start"], r.duration), min(g["end"], r.duration), g["text"])
        for g in expected["segments"]]


def test_results_carry_tokens_times_segments_and_to_dict(prompts):
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL))
    r = engine.transcribe(prompts[0])
    assert isinstance(r, oasr.Transcript)
    assert r.text and r.tokens and len(r.token_times) == len(r.tokens)
    starts = [t[0] for t in r.token_times]
    assert starts == sorted(starts)
    assert 0.0 <= r.segments[0].start < r.segments[0].end <= r.duration
    d = r.to_dict()
    assert json.loads(json.dumps(d))["text"] == r.text
    assert d["segments"][0]["text"] == r.text
    # A list gives a list, in input order, each equal to its result alone.
    many = engine.transcribe(list(reversed(prompts)))
    alone = [engine.transcribe(p) for p in reversed(prompts)]
    assert [m.tokens for m in many] == [a.tokens for a in alone]
    assert [m.score for m in many] == [a.score for a in alone]


def test_version_recipes_and_repr():
    assert oasr.__version__.count(".") == 2
    assert "smoothquant_w8a8_fused" in oasr.recipes()
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL, beam_size=4))
    assert engine.sample_rate == 8000
    assert engine.architecture == "u2pp_conformer"
    assert "ckpt_dir" in repr(engine)

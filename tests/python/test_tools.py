"""oasr.quantize and oasr.convert mirror the CLI commands; python -m oasr
runs the CLI."""
import json
import os
import subprocess
import sys

import pytest

import oasr
from conftest import CLI, MODEL, cli_transcripts


def test_quantize_writes_a_checkpoint_served_as_the_cli_serves_it(tmp_path, prompts):
    dst = tmp_path / "u2pp-int8"
    report = oasr.quantize(MODEL, dst, recipe="int8_w8a8_rtn", progress=False)
    assert report["destination"] == str(dst)
    assert report["quantized_layers"] > 0
    assert json.loads((dst / "quantization_report.json").read_text())
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=dst))
    info = engine.quantization_info()
    assert info["source"] == "checkpoint" and info["quantized_layers"] == report["quantized_layers"]
    expected = cli_transcripts(str(dst), prompts)
    assert [r.text for r in engine.transcribe(prompts)] == [expected[p] for p in prompts]
    # The same refusals as oasr quantize: an existing destination, a bad recipe.
    with pytest.raises(oasr.Error, match="--force"):
        oasr.quantize(MODEL, dst, recipe="int8_w8a8_rtn", progress=False)
    with pytest.raises(oasr.ConfigError, match="recipe"):
        oasr.quantize(MODEL, tmp_path / "x", recipe="int3_magic", progress=False)
    with pytest.raises(oasr.ConfigError, match="calib"):
        oasr.quantize(MODEL, tmp_path / "y", recipe="smoothquant_w8a8", progress=False)


def test_convert_writes_what_oasr_convert_writes(tmp_path, prompts):
    ours = tmp_path / "py"
    theirs = tmp_path / "cli"
    printed = oasr.convert(MODEL, ours, dtype="float32")
    assert str(ours) in printed
    subprocess.run([CLI, "convert", MODEL, str(theirs), "--dtype", "float32"], check=True,
                   capture_output=True)
    assert (ours / "model.safetensors").read_bytes() == (theirs / "model.safetensors").read_bytes()
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=ours))
    assert engine.transcribe(prompts[0]).text == cli_transcripts(MODEL, prompts[:1])[prompts[0]]
    with pytest.raises(oasr.ConfigError, match="from_='bogus'"):
        oasr.convert(MODEL, tmp_path / "z", from_="bogus")


def test_python_dash_m_oasr_runs_the_cli(prompts):
    run = [sys.executable, "-m", "oasr"]
    version = subprocess.run(run + ["--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == f"oasr {oasr.__version__}"
    out = subprocess.run(run + ["transcribe", "--ckpt-dir", MODEL, prompts[0]],
                         capture_output=True, text=True, check=True).stdout
    assert out == subprocess.run([CLI, "transcribe", "--ckpt-dir", MODEL, prompts[0]],
                                 capture_output=True, text=True, check=True).stdout
    bad = subprocess.run(run + ["transcribe", "--ckpt-dir", MODEL, "/nonexistent.wav"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "/nonexistent.wav" in bad.stderr

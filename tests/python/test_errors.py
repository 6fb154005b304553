"""Bad configurations, checkpoints and audio raise the oasr.errors class of
what was wrong, with the CLI's message for the same mistake."""
import os
import shutil

import numpy as np
import pytest

import oasr
from conftest import MODEL, cli_error


def test_bad_configurations_raise_config_error_with_the_cli_message(prompts):
    # A range the architecture decides is checked when the engine is built.
    with pytest.raises(oasr.ConfigError) as caught:
        oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL, beam_size=0))
    assert str(caught.value) == cli_error("transcribe", "--ckpt-dir", MODEL, "--beam-size", "0",
                                          prompts[0])
    assert caught.value.code == "invalid_argument"
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, oasr.Error)
    with pytest.raises(oasr.ConfigError, match="max_batch_size"):
        oasr.EngineConfig(ckpt_dir=MODEL, max_batch_size=0)
    with pytest.raises(oasr.ConfigError, match="dtype"):
        oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL, dtype="float16"))  # the CPU serves float32
    with pytest.raises(oasr.ConfigError, match="scheme"):
        oasr.EngineConfig(ckpt_dir=MODEL, quantization={"scheme": "int4"})
    with pytest.raises(oasr.ConfigError, match="unknown key 'bogus'"):
        oasr.EngineConfig(ckpt_dir=MODEL, quantization={"scheme": "int8_w8a8", "bogus": 1})
    with pytest.raises(TypeError):
        oasr.EngineConfig(ckpt_dir=MODEL, beam=3)  # not a field
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL))
    with pytest.raises(oasr.ConfigError, match="unknown decode option"):
        engine.transcribe(prompts[0], beam=3)
    with pytest.raises(oasr.ConfigError, match="length_penalty"):
        engine.transcribe(prompts[0], length_penalty=1.0)  # a Whisper knob


def test_bad_checkpoints_raise_checkpoint_error(tmp_path, prompts):
    missing = tmp_path / "nowhere"
    with pytest.raises(oasr.CheckpointError) as caught:
        oasr.ASREngine(oasr.EngineConfig(ckpt_dir=missing))
    assert str(caught.value) == cli_error("transcribe", "--ckpt-dir", str(missing), prompts[0])
    broken = tmp_path / "truncated"
    shutil.copytree(MODEL, broken)
    weights = broken / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(os.path.getsize(weights) // 2)
    with pytest.raises(oasr.CheckpointError, match="model.safetensors") as caught:
        oasr.ASREngine(oasr.EngineConfig(ckpt_dir=broken))
    assert caught.value.code == "corrupt_file"
    assert str(caught.value) == cli_error("transcribe", "--ckpt-dir", str(broken), prompts[0])


def test_bad_audio_raises_audio_error_naming_the_input(tmp_path, prompts):
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL))
    missing = str(tmp_path / "missing.wav")
    with pytest.raises(oasr.AudioError) as caught:
        engine.transcribe(missing)
    assert missing in str(caught.value)
    assert caught.value.code == "not_found"
    with pytest.raises(oasr.AudioError, match="input 0: not a readable audio file"):
        engine.transcribe(b"RIFF this is not audio at all")
    with pytest.raises(oasr.AudioError, match="input 1: sample 3 is not a finite number"):
        bad = np.zeros(8000, dtype=np.float32)
        bad[3] = np.nan
        engine.transcribe([prompts[0], bad], sample_rate=8000)
    with pytest.raises(oasr.AudioError, match="not normalised"):
        engine.transcribe(np.full(8000, 1e30, dtype=np.float32), sample_rate=8000)
    with pytest.raises(oasr.AudioError, match="pass sample_rate="):
        engine.transcribe(np.zeros(8000, dtype=np.float32))
    with pytest.raises(oasr.AudioError, match="shorter than one 25 ms"):
        engine.transcribe(np.zeros(10, dtype=np.float32), sample_rate=8000)
    with pytest.raises(oasr.AudioError, match="expected a path, bytes"):
        engine.transcribe([[0.0, 0.1]])
    with pytest.raises(oasr.AudioError, match="int32|expected a path"):
        engine.transcribe(np.zeros(8000, dtype=np.int32).reshape(80, 100), sample_rate=8000)
    # The engine still serves after every refusal.
    assert engine.transcribe(prompts[0]).text

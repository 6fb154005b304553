"""Fixtures for the Python package tests: the package from the build tree
(PYTHONPATH), the bundled U2++ model, Whisper tiny.en (converted by the
whisper_tiny_en ctest fixture) and the CLI the results must equal."""
import os
import subprocess

import pytest

CLI = os.environ.get("OASR_CLI_BINARY", "")
MODEL = os.environ.get("OASR_MODEL_DIR", "")
WHISPER = os.environ.get("OASR_WHISPER_DIR", "")
SOUNDS = "/usr/share/asterisk/sounds/en"
PROMPTS = ["vm-goodbye", "demo-echotest", "vm-options", "agent-loginok", "vm-nomore"]


def sound(name):
    return os.path.join(SOUNDS, name + ".wav")


@pytest.fixture(scope="session")
def prompts():
    if not os.path.isdir(SOUNDS):
        pytest.skip(f"{SOUNDS} is missing (asterisk-core-sounds-en-wav, installed by scripts/setup.sh)")
    paths = [sound(p) for p in PROMPTS]
    missing = [p for p in paths if not os.path.exists(p)]
    assert not missing, f"missing prompts: {missing}"
    return paths


@pytest.fixture(scope="session")
def whisper_dir():
    if not os.path.isfile(os.path.join(WHISPER, "oasr_config.json")):
        pytest.fail(f"{WHISPER} is not a converted Whisper directory (the whisper_tiny_en fixture)")
    return WHISPER


def cli_transcripts(ckpt_dir, paths, *flags):
    """`oasr transcribe` of the files in one call: {path: text}."""
    assert CLI and os.path.exists(CLI), f"OASR_CLI_BINARY '{CLI}' does not exist"
    r = subprocess.run([CLI, "transcribe", "--ckpt-dir", ckpt_dir, *flags, *paths],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        path, _, text = line.partition("\t")
        out[path] = text
    return out


def cli_error(*args):
    """The one-line error the CLI prints for a failing command."""
    r = subprocess.run([CLI, *args], capture_output=True, text=True)
    assert r.returncode != 0, r.stdout
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("oasr: error: "), r.stderr
    return line[len("oasr: error: "):]

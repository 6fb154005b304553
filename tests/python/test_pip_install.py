"""`pip install .` as a user runs it: a clean copy of the repository (the
files git tracks or would track, nothing built), a fresh venv with no
packages, only the wheels scripts/setup.sh downloaded (scikit-build-core,
nanobind; no network), the CPU build; then `import oasr` outside the source
tree transcribes a prompt as the CLI does, and `python -m oasr` runs."""
import os
import shutil
import subprocess
import sys
import time

import pytest

SOURCE = os.environ.get("OASR_SOURCE_DIR", "")
MODEL = os.environ.get("OASR_MODEL_DIR", "")
CLI = os.environ.get("OASR_CLI_BINARY", "")
PROMPT = "/usr/share/asterisk/sounds/en/vm-goodbye.wav"


def run(*args, **kwargs):
    r = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert r.returncode == 0, f"{' '.join(map(str, args))}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def test_pip_install_into_a_fresh_venv(tmp_path):
    wheelhouse = os.path.join(SOURCE, ".venv", "wheelhouse")
    if not os.path.isdir(wheelhouse):
        pytest.fail(f"{wheelhouse} is missing: run bash scripts/setup.sh (it downloads the build wheels)")
    clone = tmp_path / "oasr"
    listed = run("git", "-C", SOURCE, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        source = os.path.join(SOURCE, name)
        if os.path.isfile(source):  # a listed file deleted in the work tree is skipped
            target = clone / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    venv = tmp_path / "venv"
    run("/usr/bin/python3", "-m", "venv", str(venv))  # Debian's python, no packages
    python = str(venv / "bin" / "python")
    started = time.perf_counter()
    run(python, "-m", "pip", "install", "--no-index", "--find-links", wheelhouse,
        "--disable-pip-version-check", "--config-settings=cmake.define.OASR_WITH_CUDA=OFF", str(clone))
    print(f"\npip install . (CPU build): {time.perf_counter() - started:.0f} s")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = ("import oasr, sys\n"
              "from oasr.engine import ASREngine, EngineConfig\n"
              "assert 'site-packages' in oasr.__file__, oasr.__file__\n"
              "engine = ASREngine(EngineConfig(ckpt_dir=sys.argv[1], quantization='int8_w8a8'))\n"
              "print(engine.transcribe(sys.argv[2]).text)\n")
    text = run(python, "-c", script, MODEL, PROMPT, cwd=elsewhere).strip()
    expected = run(CLI, "transcribe", "--ckpt-dir", MODEL, "--quantization", "int8_w8a8", PROMPT)
    assert text == expected.rstrip("\n").split("\t", 1)[1]
    assert run(python, "-m", "oasr", "--version", cwd=elsewhere).startswith("oasr ")

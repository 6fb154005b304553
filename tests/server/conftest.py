"""Fixtures for the oasr-server tests: a server process on a free port,
started from the binary named by OASR_SERVER_BINARY on the bundled model."""
import os
import re
import signal
import subprocess
import time

import pytest

SERVER = os.environ.get("OASR_SERVER_BINARY", "")
CLI = os.environ.get("OASR_CLI_BINARY", "")
MODEL = os.environ.get("OASR_MODEL_DIR", "")
SOUNDS = "/usr/share/asterisk/sounds/en"


class Server:
    def __init__(self, *flags, model=MODEL):
        self.proc = subprocess.Popen(
            [SERVER, "--ckpt-dir", model, "--port", "0", *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log = []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            found = re.search(r"listening on http://([0-9.]+):(\d+)", line)
            if found:
                self.url = f"http://{found.group(1)}:{found.group(2)}"
                self.port = int(found.group(2))
                return
        self.proc.kill()
        raise RuntimeError("oasr-server did not start:\n" + "".join(self.log))

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.log += self.proc.stderr.readlines()
        return code


def require_binaries():
    if not SERVER or not os.path.exists(SERVER):
        pytest.fail(f"OASR_SERVER_BINARY '{SERVER}' does not exist; build the oasr-server target")
    if not os.path.isdir(SOUNDS):
        pytest.skip(f"{SOUNDS} is missing (asterisk-core-sounds-en-wav, installed by scripts/setup.sh)")


@pytest.fixture(scope="module")
def server():
    require_binaries()
    s = Server("--max-batch-size", "8", "--max-batch-delay-ms", "100")
    yield s
    assert s.stop() == 0, "".join(s.log)


def sound(name):
    return os.path.join(SOUNDS, name + ".wav")


def cli_transcripts(paths, *flags):
    """`oasr transcribe` of each file alone: the reference every server reply must equal."""
    out = {}
    for path in paths:
        r = subprocess.run([CLI, "transcribe", "--ckpt-dir", MODEL, *flags, path],
                           capture_output=True, text=True, check=True)
        out[path] = r.stdout.rstrip("\n").split("\t", 1)[1]
    return out

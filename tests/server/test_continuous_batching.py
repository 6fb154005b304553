"""oasr-server's iteration-level (continuous) batching, on the random-weight
Qwen2-Audio of the qwen2_audio oracle fixture (tests/oracle/qwen2_audio/
make_qwen2_audio_case.py): staggered concurrent requests, some with their own
max_new_tokens, are each answered with exactly the tokens the same request
gets alone, none is lost, and the decode iterations held several requests at
once. The two oracle utterances' tokens are also transformers' greedy tokens
(the fixture's reference), so the served path is checked against upstream."""
import concurrent.futures
import json
import os
import re
import struct
import subprocess
import time
import urllib.request

import pytest
from safetensors.numpy import load_file

from conftest import Server, require_binaries, sound

ORACLE = os.environ.get("OASR_QWEN2_AUDIO_DIR", "")
SOUNDS = [sound(n) for n in ("agent-loginok", "vm-goodbye", "auth-thankyou", "vm-password",
                             "conf-onlyperson", "vm-intro", "agent-pass", "privacy-thankyou")]


def write_float_wav(path, samples, rate=16000):
    """A mono IEEE-float WAV: the oracle's waveform reaches the server unrounded."""
    data = samples.astype("<f4").tobytes()
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(data), b"WAVE", b"fmt ", 16,
                         3, 1, rate, rate * 4, 4, 32, b"data", len(data))
    with open(path, "wb") as f:
        f.write(header + data)


def tokens_of(url, path, max_new_tokens=None, beams=None):
    """The server's tokens for one upload (verbose_json's one segment) and its HTTP status."""
    form = ["-F", f"file=@{path}", "-F", "model=model", "-F", "response_format=verbose_json"]
    if max_new_tokens is not None:
        form += ["-F", f"max_new_tokens={max_new_tokens}"]
    if beams is not None:
        form += ["-F", "decode_method=beam_search", "-F", f"beam_size={beams}"]
    r = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", *form,
                        url + "/v1/audio/transcriptions"], capture_output=True, text=True,
                       check=True, timeout=120)
    body, status = r.stdout.rsplit("\n", 1)
    if status != "200":
        return int(status), body
    return 200, [t for s in json.loads(body)["segments"] for t in s["tokens"]]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    require_binaries()
    if not ORACLE or not os.path.isdir(os.path.join(ORACLE, "model")):
        pytest.skip("OASR_QWEN2_AUDIO_DIR (the qwen2_audio oracle fixture) is absent")
    reference = load_file(os.path.join(ORACLE, "reference", "reference.safetensors"))
    wavs, beams = {}, {}
    for uid in ("u00", "u01"):
        path = str(tmp_path_factory.mktemp("audio") / f"{uid}.wav")
        write_float_wav(path, reference[f"{uid}.audio"])
        wavs[path] = [int(t) for t in reference[f"{uid}.greedy"]]
        beams[path] = [int(t) for t in reference[f"{uid}.beam3"]]
    return wavs, beams


def test_staggered_requests_get_their_tokens_alone(oracle):
    oracle, beamed = oracle
    # Requests: every file with the default budget (16 tokens), every other
    # one again with its own (3 or 40: shorter and longer than the default,
    # the longer one outgrowing the pool's default sizing), and the oracle
    # utterances with beam search (3 beams).
    requests = [(path, None, None) for path in [*oracle, *SOUNDS]]
    requests += [(path, 3 if i % 4 == 0 else 40, None)
                 for i, path in enumerate([*oracle, *SOUNDS]) if i % 2 == 0]
    requests += [(path, None, 3) for path in oracle]
    server = Server("--max-batch-size", "4", model=os.path.join(ORACLE, "model"))
    try:
        assert any("continuous batching of up to 4 requests" in line for line in server.log), \
            "".join(server.log)
        alone = {}
        for path, budget, beams in requests:
            status, tokens = tokens_of(server.url, path, budget, beams)
            assert status == 200, tokens
            alone[(path, budget, beams)] = tokens
        # The upstream oracle: transformers' greedy tokens of the fixture's utterances.
        # A budget of its own: greedy's first tokens, up to the budget.
        for path, expected in beamed.items():
            assert alone[(path, None, 3)] == expected
        for (path, budget, beams), tokens in alone.items():
            assert 0 < len(tokens) <= (budget or 16), (path, budget, tokens)
            if path in oracle and beams is None:
                shared = min(budget or 16, 16)
                assert tokens[:shared] == oracle[path][:shared], (path, budget, tokens)

        def staggered(k):
            time.sleep(0.004 * k)
            key = requests[k % len(requests)]
            return key, tokens_of(server.url, *key)

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(staggered, range(3 * len(requests))))
        assert len(replies) == 3 * len(requests)
        for key, (status, tokens) in replies:
            assert status == 200, (key, tokens)
            assert tokens == alone[key], (key, tokens, alone[key])
        with urllib.request.urlopen(server.url + "/metrics") as r:
            metrics = r.read().decode()
        # Iterations that held more than one request: sequences joined a running batch.
        count = int(re.search(r"^oasr_batch_size_count (\d+)$", metrics, re.M).group(1))
        singles = int(re.search(r'^oasr_batch_size_bucket\{le="1"\} (\d+)$', metrics, re.M)
                      .group(1))
        assert count - singles > 0, metrics
        ok = int(re.search(
            r'^oasr_requests_total\{route="/v1/audio/transcriptions",code="200"\} (\d+)$',
            metrics, re.M).group(1))
        assert ok == 4 * len(requests), metrics
    finally:
        assert server.stop() == 0, "".join(server.log)


def test_a_request_that_can_never_fit_is_refused_alone(oracle):
    """A budget past the LM's positions is refused by name (400) while the
    requests around it are served."""
    oracle, _ = oracle
    path = next(iter(oracle))
    server = Server("--max-batch-size", "2", model=os.path.join(ORACLE, "model"))
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            good = [pool.submit(tokens_of, server.url, path) for _ in range(2)]
            status, body = tokens_of(server.url, path, 4096)
            assert status == 400, body
            assert "max_new_tokens" in json.loads(body)["error"]["message"], body
            assert all(g.result()[1] == oracle[path] for g in good)
    finally:
        assert server.stop() == 0, "".join(server.log)

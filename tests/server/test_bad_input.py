"""The bad-input corpus of oasr-server: each case gets its status code and a
message naming the problem; the server stays up and answers /health after."""
import http.client
import io
import json
import os
import signal
import socket
import subprocess
import threading
import time
import wave

import pytest

from conftest import MODEL, SERVER, Server, require_binaries, sound

MODEL_NAME = os.path.basename(os.path.normpath(MODEL))
GOOD = sound("vm-goodbye")


def form(fields, boundary="oasrtestboundary"):
    body = b""
    for name, value, filename in fields:
        body += f"--{boundary}\r\n".encode()
        disposition = f'Content-Disposition: form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        body += disposition.encode() + b"\r\n\r\n" + value + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def post(server, body, content_type, path="/v1/audio/transcriptions", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", path, body=body,
                 headers={"Content-Type": content_type, **(headers or {})})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data, r


def error_of(data):
    e = json.loads(data)["error"]
    assert set(e) == {"message", "type", "code"}
    return e


def good_fields(extra=()):
    with open(GOOD, "rb") as f:
        return [("file", f.read(), "goodbye.wav"), ("model", MODEL_NAME.encode(), None), *extra]


def wav_bytes(seconds, rate=8000):
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x00\x10" * int(seconds * rate))
    return out.getvalue()


@pytest.fixture(scope="module")
def strict():
    require_binaries()
    s = Server("--max-upload-mb", "1", "--max-audio-seconds", "20", "--idle-timeout-s", "2",
               "--api-key", "sekret")
    yield s
    assert s.stop() == 0, "".join(s.log)


AUTH = {"Authorization": "Bearer sekret"}

CASES = [
    # (name, fields or raw (body, content_type), status, code, words in the message)
    ("no file", [("model", MODEL_NAME.encode(), None)], 400, "invalid_field", ["'file' is missing"]),
    ("no model", [("file", b"x", "a.wav")], 400, "invalid_field", ["'model' is missing"]),
    ("wrong model", [("file", b"x", "a.wav"), ("model", b"whisper-1", None)], 404,
     "model_not_found", ["whisper-1", MODEL_NAME]),
    ("language", "extra:language=en", 400, "invalid_field", ["'language' is not supported"]),
    ("prompt", "extra:prompt=hello", 400, "invalid_field", ["'prompt'"]),
    ("unknown field", "extra:colour=red", 400, "invalid_field", ["unknown field 'colour'"]),
    ("response format", "extra:response_format=xml", 400, "invalid_field",
     ["'xml'", "json, text, verbose_json, srt, vtt"]),
    ("temperature", "extra:temperature=0.7", 400, "invalid_field", ["temperature", "0.7"]),
    ("word timestamps", "extra:timestamp_granularities[]=word", 400, "invalid_field", ["'word'"]),
    ("beam size 0", "extra:beam_size=0", 400, "invalid_field", ["beam_size", "[1, 128]"]),
    ("beam size nan", "extra:length_penalty=nan", 400, "invalid_field", ["length_penalty"]),
    ("not audio", [("file", b"this is not audio" * 10, "notes.txt"),
                   ("model", MODEL_NAME.encode(), None)], 400, "invalid_audio", ["notes.txt"]),
    ("too short", [("file", wav_bytes(0.01), "blip.wav"), ("model", MODEL_NAME.encode(), None)],
     400, "invalid_audio", ["blip.wav", "25 ms"]),
    ("too long", [("file", wav_bytes(30), "long.wav"), ("model", MODEL_NAME.encode(), None)], 422,
     "audio_too_long", ["long.wav", "--max-audio-seconds"]),
    ("json body", (b'{"file": "x"}', "application/json"), 415, "unsupported_media_type",
     ["multipart/form-data"]),
    ("no boundary", (b"--x\r\n", "multipart/form-data"), 400, "invalid_multipart", ["boundary"]),
    ("truncated form", "truncated", 400, "invalid_multipart", ["truncated"]),
    ("too large", (b"0" * (2 << 20), "multipart/form-data; boundary=b"), 413,
     "request_too_large", ["--max-upload-mb"]),
]


@pytest.mark.parametrize("name,spec,status,code,words", CASES, ids=[c[0] for c in CASES])
def test_bad_request(strict, name, spec, status, code, words):
    if isinstance(spec, tuple):
        body, content_type = spec
    elif spec == "truncated":
        body, content_type = form(good_fields())
        body = body[: len(body) // 2]
    elif isinstance(spec, str):
        key, value = spec[len("extra:"):].split("=", 1)
        body, content_type = form(good_fields([(key, value.encode(), None)]))
    else:
        body, content_type = form(spec)
    got, data, _ = post(strict, body, content_type, headers=AUTH)
    assert got == status, data
    e = error_of(data)
    assert e["code"] == code, e
    for word in words:
        assert word in e["message"], e


def test_api_key(strict):
    body, content_type = form(good_fields())
    status, data, r = post(strict, body, content_type)
    assert status == 401 and "Authorization: Bearer" in error_of(data)["message"]
    assert r.getheader("WWW-Authenticate") == "Bearer"
    status, data, _ = post(strict, body, content_type, headers={"Authorization": "Bearer nope"})
    assert status == 401 and error_of(data)["code"] == "invalid_api_key"
    status, data, _ = post(strict, body, content_type, headers=AUTH)
    assert status == 200, data
    # Probes take no key.
    conn = http.client.HTTPConnection("127.0.0.1", strict.port, timeout=10)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200


@pytest.mark.parametrize("flags, words", [
    (["--max-upload-mb", "nan"], ["--max-upload-mb", "'nan' is not a number in [0.001, 4096"]),
    (["--max-audio-seconds", "nan"], ["--max-audio-seconds", "'nan' is not a number"]),
    (["--max-audio-seconds", "inf"], ["--max-audio-seconds", "'inf' is not a number"]),
    (["--max-upload-mb", "25MB"], ["--max-upload-mb", "'25MB' is not a number"]),
    (["--api-key", ""], ["--api-key", "an empty key would leave the server open"]),
])
def test_a_limit_a_typo_would_switch_off_is_refused(flags, words):
    # NaN passes every comparison, so a plain range check would start the
    # server with the limit off; an empty key would start it open.
    require_binaries()
    r = subprocess.run([SERVER, "--ckpt-dir", MODEL, "--port", "0", *flags],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    for word in words:
        assert word in r.stderr, r.stderr


def test_start_up_says_the_server_is_open_and_names_its_dtype():
    require_binaries()
    s = Server()
    try:
        log = "".join(s.log)
        assert "no --api-key: the /v1 routes answer anyone who can reach 127.0.0.1" in log, log
        assert "dtype float32" in log, log
    finally:
        assert s.stop() == 0


def test_the_audio_limit_is_the_models_where_it_takes_less():
    # The bundled U2++ model takes 200.075 s at once (5000 positions x 40 ms): the
    # default --max-audio-seconds 600 is capped at start-up, and a longer
    # upload gets 422 naming both limits instead of a 400 from the decoder.
    require_binaries()
    s = Server()
    try:
        log = "".join(s.log)
        assert ("the audio limit of 600 s (--max-audio-seconds) is over what this U2++ model "
                "takes at once: 200.075 s") in log, log
        body, content_type = form([("file", wav_bytes(205), "long.wav"),
                                   ("model", MODEL_NAME.encode(), None)])
        status, data, _ = post(s, body, content_type)
        assert status == 422, data
        e = error_of(data)
        assert e["code"] == "audio_too_long", e
        for word in ["long.wav): 205 s of audio is over --max-audio-seconds (200.075)",
                     "the U2++ model takes at most 200.075 s at once (its positional table holds "
                     "5000 encoder frames of 4 x 10 ms"]:
            assert word in e["message"], e
    finally:
        assert s.stop() == 0


def test_routes_and_methods(strict):
    conn = http.client.HTTPConnection("127.0.0.1", strict.port, timeout=10)
    conn.request("GET", "/v1/audio/transcriptions", headers=AUTH)
    r = conn.getresponse()
    assert r.status == 405 and "use POST" in error_of(r.read())["message"]
    conn.request("GET", "/nope", headers=AUTH)
    r = conn.getresponse()
    assert r.status == 404 and "/v1/audio/transcriptions" in error_of(r.read())["message"]


def raw(port, data, wait_reply=True):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    reply = s.recv(65536) if wait_reply else b""
    return s, reply


def test_hostile_clients_leave_the_server_up(strict):
    # Malformed request line.
    s, reply = raw(strict.port, b"NOT HTTP AT ALL\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400"), reply
    s.close()
    # A client that promises a body and disconnects half-way.
    s, _ = raw(strict.port, b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n"
               + b"x" * 1000, wait_reply=False)
    s.close()
    # A slow client: headers never finished; the server drops it after --idle-timeout-s.
    s, _ = raw(strict.port, b"GET /health HTTP/1.1\r\nHo", wait_reply=False)
    started = time.time()
    assert s.recv(100) == b""  # closed by the server
    assert time.time() - started < 8
    s.close()
    # Many connections at once, each dropped.
    for _ in range(50):
        raw(strict.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")[0].close()
    conn = http.client.HTTPConnection("127.0.0.1", strict.port, timeout=10)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200
    assert strict.proc.poll() is None


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1])


def test_bad_requests_do_not_grow_memory(strict):
    """Hundreds of refused, truncated and abandoned requests: the resident set
    settles (a leak per request of even a few KiB of upload would show)."""
    body, content_type = form(good_fields())

    def round_of_abuse():
        for i in range(60):
            post(strict, body[: len(body) // 2], content_type, headers=AUTH)  # truncated form
            post(strict, b"x" * 5000, "multipart/form-data; boundary=zz", headers=AUTH)
            s, _ = raw(strict.port, b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Length: 90000\r\n\r\n" + b"y" * 20000, wait_reply=False)
            s.close()

    round_of_abuse()  # warm-up: allocator pools and buffers reach their size
    before = rss_kib(strict.proc.pid)
    for _ in range(3):
        round_of_abuse()
    after = rss_kib(strict.proc.pid)
    print(f"server RSS {before} KiB -> {after} KiB after 540 abusive requests")
    assert after - before < 8 * 1024, (before, after)
    conn = http.client.HTTPConnection("127.0.0.1", strict.port, timeout=10)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200


def test_queue_full_timeout_and_drain():
    require_binaries()
    # Batches close after 1.5 s, the queue holds 2, requests time out after 1 s.
    s = Server("--max-batch-size", "8", "--max-batch-delay-ms", "1500", "--max-queue", "2",
               "--request-timeout-s", "1")
    body, content_type = form(good_fields())
    results = []

    def send():
        results.append(post(s, body, content_type)[:2])

    threads = [threading.Thread(target=send) for _ in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.2)
    for t in threads:
        t.join()
    statuses = sorted(code for code, _ in results)
    assert statuses == [429, 504, 504], results
    for code, data in results:
        e = error_of(data)
        assert e["code"] == {429: "queue_full", 504: "timeout"}[code], e
    assert s.stop() == 0

    # SIGTERM while a request waits in the batch window: it is answered, exit 0.
    s = Server("--max-batch-delay-ms", "1000")
    t = threading.Thread(target=send)
    results.clear()
    t.start()
    time.sleep(0.3)
    assert s.stop(signal.SIGTERM) == 0, "".join(s.log)
    t.join()
    assert results and results[0][0] == 200, results
    assert any("draining" in line for line in s.log)

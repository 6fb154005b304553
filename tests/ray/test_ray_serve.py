"""oasr.ray.serve on a three-node loopback cluster: two replicas on the two
worker nodes answer the official openai SDK with `oasr transcribe`'s texts,
answer every request byte for byte as oasr-server does (bad input too), and
lose no request when a worker node dies under load."""
import json
import os
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed

import openai
import pytest
import requests
from conftest import MODEL, SERVER, cli_transcripts, free_port, ray

from ray import serve  # noqa: E402

MODEL_NAME = os.path.basename(os.path.normpath(MODEL))
KEY = "ray-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
# Reply headers both front ends must agree on (besides the status and body).
COMPARED_HEADERS = ("content-type", "retry-after", "www-authenticate")


def retryable(r):
    """A reply a client may retry: Ray's own (the replica the request reached
    died; its proxy answers 500 in plain text) or a 502-504. A 500 that is
    oasr's error JSON is the service's failure, never retried."""
    if r.status_code in (502, 503, 504):
        return True
    return r.status_code == 500 and not r.text.startswith('{"error"')


def write_config(path, port):
    config = {
        "name": "oasr",
        "http": {"host": "127.0.0.1", "port": port},
        "proxy_location": "HeadOnly",
        "engine": {"ckpt_dir": MODEL, "max_batch_size": 8},
        "service": {"max_batch_delay_ms": 20, "max_upload_mb": 1, "api_key": KEY},
        "deployment": {"num_replicas": 2, "num_cpus": 1, "resources": {"oasr_engine": 1},
                       "max_replicas_per_node": 1, "health_check_period_s": 1,
                       "health_check_timeout_s": 20, "max_ongoing_requests": 16},
    }
    path.write_text(json.dumps(config))
    return str(path)


def replicas_running():
    app = serve.status().applications.get("oasr")
    if app is None or "oasr" not in app.deployments:
        return 0
    return app.deployments["oasr"].replica_states.get("RUNNING", 0)


def wait_for(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


@pytest.fixture(scope="module")
def ingress(cluster, tmp_path_factory):
    from oasr.ray.serve import run_serve

    port = free_port()
    run_serve(write_config(tmp_path_factory.mktemp("serve") / "serve.json", port), blocking=False)
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: replicas_running() == 2, 120, "two running replicas")
    yield url
    serve.shutdown()


@pytest.fixture(scope="module")
def oasr_server():
    """oasr-server on the same model and limits: the reference for every reply."""
    import subprocess

    assert SERVER and os.path.exists(SERVER), f"OASR_SERVER_BINARY '{SERVER}' does not exist"
    proc = subprocess.Popen([SERVER, "--ckpt-dir", MODEL, "--port", "0", "--max-batch-size", "8",
                             "--max-upload-mb", "1", "--api-key", KEY], stderr=subprocess.PIPE,
                            text=True)
    url = None
    for _ in range(200):
        line = proc.stderr.readline()
        if "listening on http://" in line:
            url = "http://" + line.split("listening on http://")[1].split()[0].rstrip("/")
            break
    assert url, "oasr-server did not start"
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_two_replicas_one_per_worker_node(ingress):
    assert replicas_running() == 2
    # Each worker node offers one oasr_engine and each replica takes one:
    # none left means one replica on each worker node.
    assert ray.available_resources().get("oasr_engine", 0) == 0
    assert ray.cluster_resources()["oasr_engine"] == 2


def test_openai_sdk_gives_the_cli_texts(ingress, prompts):
    expected = cli_transcripts(prompts)
    client = openai.OpenAI(base_url=ingress + "/v1", api_key=KEY, max_retries=0)
    for path in prompts:
        with open(path, "rb") as f:
            got = client.audio.transcriptions.create(model=MODEL_NAME, file=f)
        assert got.text == expected[path], path
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL_NAME]


def _exchange(url, method, route, body=None, headers=None):
    request = urllib.request.Request(url + route, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, [r.headers.get(h) for h in COMPARED_HEADERS], r.read()
    except urllib.error.HTTPError as e:
        return e.code, [e.headers.get(h) for h in COMPARED_HEADERS], e.read()


def _form(fields):
    boundary = "oasrboundary"
    parts = []
    for name, value, filename in fields:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        parts.append(f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def _requests(prompts):
    with open(prompts[0], "rb") as f:
        audio = f.read()
    good = [("file", audio, "a.wav"), ("model", MODEL_NAME.encode(), None)]
    body, headers = _form(good)
    cases = {
        "no key": ("POST", "/v1/audio/transcriptions", body, headers),
        "wrong key": ("POST", "/v1/audio/transcriptions", body,
                      {**headers, "Authorization": "Bearer nope"}),
        "models": ("GET", "/v1/models", None, AUTH),
        "health": ("GET", "/health", None, None),
        "ready": ("GET", "/ready", None, None),
        "unknown route": ("GET", "/v1/nothing", None, AUTH),
        "wrong method": ("GET", "/v1/audio/transcriptions", None, AUTH),
        "trace with a body": ("TRACE", "/v1/audio/transcriptions", b"x", AUTH),
        "json body": ("POST", "/v1/audio/transcriptions", b'{"file": "x"}',
                      {**AUTH, "Content-Type": "application/json"}),
        "no boundary": ("POST", "/v1/audio/transcriptions", b"--x\r\n",
                        {**AUTH, "Content-Type": "multipart/form-data"}),
        "too large": ("POST", "/v1/audio/transcriptions", b"0" * (2 << 20),
                      {**AUTH, "Content-Type": "multipart/form-data; boundary=b"}),
    }
    for name, fields in {
        "json": good,
        "text": good + [("response_format", b"text", None)],
        "verbose_json": good + [("response_format", b"verbose_json", None)],
        "srt": good + [("response_format", b"srt", None)],
        "wrong model": [("file", audio, "a.wav"), ("model", b"whisper-1", None)],
        "unknown field": good + [("colour", b"red", None)],
        "response format": good + [("response_format", b"xml", None)],
        "beam size 0": good + [("beam_size", b"0", None)],
        "not audio": [("file", b"this is not audio" * 10, "notes.txt"), ("model", MODEL_NAME.encode(), None)],
        "no file": [("model", MODEL_NAME.encode(), None)],
    }.items():
        body, headers = _form(fields)
        cases[name] = ("POST", "/v1/audio/transcriptions", body, {**headers, **AUTH})
    return cases


def test_every_reply_is_oasr_servers(ingress, oasr_server, prompts):
    # The same code answers both: status, the compared headers and the body
    # are equal, the error JSON ({"error": {"message", "type", "code"}}) and
    # the 401's WWW-Authenticate included.
    for name, (method, route, body, headers) in _requests(prompts).items():
        ours = _exchange(ingress, method, route, body, headers)
        reference = _exchange(oasr_server, method, route, body, headers)
        assert ours == reference, (name, ours[:2], ours[2][:300], reference[2][:300])
    # /metrics is the replica's own (per-replica counters), in the server's format.
    status, content_type, text = _exchange(ingress, "GET", "/metrics")
    assert status == 200 and b"oasr_requests_total" in text, text[:300]


def test_a_worker_node_dies_under_load(ingress, cluster, prompts):
    expected = cli_transcripts(prompts)
    retried = {"replies": 0, "connections": 0}
    lock = threading.Lock()

    def transcribe(i):
        path = prompts[i % len(prompts)]
        for attempt in range(8):
            try:
                with open(path, "rb") as f:
                    r = requests.post(ingress + "/v1/audio/transcriptions",
                                      files={"file": ("a.wav", f)}, data={"model": MODEL_NAME},
                                      headers=AUTH, timeout=120)
                if r.status_code == 200:
                    return path, r.json()["text"]
                assert retryable(r), (r.status_code, r.text[:300])
                with lock:
                    retried["replies"] += 1
            except requests.ConnectionError:
                with lock:
                    retried["connections"] += 1
            time.sleep(0.5 * (attempt + 1))
        raise AssertionError(f"request {i} failed 8 times")

    requests_total = 48
    done = 0
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [pool.submit(transcribe, i) for i in range(requests_total)]
        killed = False
        for future in as_completed(futures):
            path, text = future.result()
            assert text == expected[path], path
            done += 1
            if done == 8 and not killed:
                cluster.kill(cluster.workers[0])
                killed = True
    assert done == requests_total
    print(f"\n{requests_total} requests, a worker node killed after 8: all answered; "
          f"retried {retried['replies']} replies and {retried['connections']} connections")
    # Serve recovers: the lost replica comes back once a node can hold it.
    cluster.add_worker()
    wait_for(lambda: replicas_running() == 2, 180, "the second replica to come back")
    with open(prompts[1], "rb") as f:
        r = requests.post(ingress + "/v1/audio/transcriptions", files={"file": ("a.wav", f)},
                          data={"model": MODEL_NAME}, headers=AUTH, timeout=120)
    assert r.status_code == 200 and r.json()["text"] == expected[prompts[1]]

"""The entry points a user types: `python -m oasr serve-ray CONFIG` serves
until SIGTERM and exits 0; `python -m oasr.ray transcribe` writes the
manifest's transcripts and a re-run writes nothing; a bad config is refused
by name before Ray is touched."""
import json
import os
import signal
import subprocess
import sys
import threading

import requests
from ray import serve
from conftest import MODEL, cli_transcripts, free_port

ENV = dict(os.environ, PYTHONUNBUFFERED="1")
MODEL_NAME = os.path.basename(os.path.normpath(MODEL))


def test_serve_ray_until_sigterm(cluster, prompts, tmp_path):
    port = free_port()
    config = tmp_path / "serve.yaml"
    config.write_text(f"""
address: {cluster.cluster.address}
name: cli
http: {{host: 127.0.0.1, port: {port}}}
proxy_location: HeadOnly
engine: {{ckpt_dir: {MODEL}, max_batch_size: 4}}
deployment: {{num_replicas: 1, num_cpus: 1, resources: {{oasr_engine: 1}}}}
""")
    proc = subprocess.Popen([sys.executable, "-m", "oasr", "serve-ray", str(config)], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # A blocked readline is bounded too: the process is killed at the deadline.
    watchdog = threading.Timer(180, proc.kill)
    watchdog.start()
    try:
        line = ""
        while "serving 'cli' on" not in line:
            line = proc.stdout.readline()
            assert line, "serve-ray exited (or was killed at the 180 s deadline) before serving"
        watchdog.cancel()
        assert f"http://127.0.0.1:{port}/v1/audio/transcriptions" in line, line
        with open(prompts[0], "rb") as f:
            r = requests.post(f"http://127.0.0.1:{port}/v1/audio/transcriptions",
                              files={"file": ("a.wav", f)}, data={"model": MODEL_NAME}, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["text"] == cli_transcripts(prompts[:1])[prompts[0]]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        # Serve itself (controller, proxy) outlives the application on the
        # cluster, with this test's HTTP options: stop it for the next test.
        serve.shutdown()
    assert proc.returncode == 0, out
    assert "oasr.ray: stopped" in out


def test_transcribe_command(cluster, prompts, tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"id": f"p{i}", "audio": p}) + "\n"
                                for i, p in enumerate(prompts)))
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"address": cluster.cluster.address,
                                  "engine": {"ckpt_dir": MODEL}}))
    output = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "oasr.ray", "transcribe", str(config), str(manifest),
               str(output), "--parquet", str(tmp_path / "out.parquet")]
    r = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    counts = json.loads(r.stdout.strip().splitlines()[-1])
    assert counts["written"] == len(prompts) and counts["failed"] == 0
    expected = cli_transcripts(prompts)
    rows = {row["id"]: row for row in map(json.loads, output.read_text().splitlines())}
    assert {rows[f"p{i}"]["text"] for i in range(len(prompts))} == set(expected.values())
    for i, p in enumerate(prompts):
        assert rows[f"p{i}"]["text"] == expected[p]
    again = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["written"] == 0


def test_a_bad_config_is_refused_before_ray(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"engine": {"ckpt_dir": MODEL, "quantisation": "int8_w8a8"}}))
    r = subprocess.run([sys.executable, "-m", "oasr.ray", "serve", str(config)], env=ENV,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith(f"oasr.ray: error: {config}: engine: unknown key(s) quantisation"), r.stderr

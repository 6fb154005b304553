"""oasr-server through the clients users have: the official openai SDK, curl,
and many concurrent requests (dynamic batching must not change a result)."""
import concurrent.futures
import json
import os
import re
import subprocess
import urllib.request

import openai
import pytest

from conftest import MODEL, Server, cli_transcripts, sound

MODEL_NAME = os.path.basename(os.path.normpath(MODEL))
FILES = [sound(n) for n in ("agent-loginok", "vm-goodbye", "auth-thankyou", "vm-password",
                            "conf-onlyperson", "vm-intro", "agent-pass", "privacy-thankyou")]


def client(server, key="unused"):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def test_sdk_formats_equal_the_cli(server):
    expected = cli_transcripts(FILES[:2])
    segment_times = {}
    c = client(server)
    for path in FILES[:2]:
        with open(path, "rb") as f:
            r = c.audio.transcriptions.create(model=MODEL_NAME, file=f)
        assert r.text == expected[path]
        with open(path, "rb") as f:
            text = c.audio.transcriptions.create(model=MODEL_NAME, file=f, response_format="text")
        assert text.strip() == expected[path]
        with open(path, "rb") as f:
            v = c.audio.transcriptions.create(model=MODEL_NAME, file=f,
                                              response_format="verbose_json",
                                              timestamp_granularities=["segment"])
        assert v.text == expected[path]
        assert v.duration > 0.5
        assert len(v.segments) == 1
        # The segment spans the CTC-aligned tokens: inside the audio, on the
        # 40 ms encoder frame grid (4 x 10 ms).
        start, end = v.segments[0].start, v.segments[0].end
        assert 0.0 <= start < end <= v.duration, (start, end, v.duration)
        assert abs(start / 0.04 - round(start / 0.04)) < 1e-6
        segment_times[path] = (start, end)
        with open(path, "rb") as f:
            srt = c.audio.transcriptions.create(model=MODEL_NAME, file=f, response_format="srt")
        lines = srt.strip().split("\n")
        assert lines[0] == "1"
        start, end = segment_times[path]
        stamp = lambda s, sep: f"00:00:{int(s):02d}{sep}{round(s * 1000) % 1000:03d}"  # noqa: E731
        assert lines[1] == f"{stamp(start, ',')} --> {stamp(end, ',')}", lines
        assert lines[2] == expected[path]
        with open(path, "rb") as f:
            vtt = c.audio.transcriptions.create(model=MODEL_NAME, file=f, response_format="vtt")
        assert vtt.startswith(f"WEBVTT\n\n{stamp(start, '.')} --> {stamp(end, '.')}\n")


def test_models_and_quantization_routes(server):
    models = client(server).models.list()
    assert [m.id for m in models.data] == [MODEL_NAME]
    with urllib.request.urlopen(server.url + "/v1/quantization") as r:
        info = json.load(r)
    assert info["quantized_layers"] == 0 and info["summary"].startswith("full precision")


def test_curl_multipart_and_a_decode_option_per_request(server):
    path = FILES[2]
    expected = cli_transcripts([path], "--decode-method", "ctc_greedy_search")[path]
    r = subprocess.run(["curl", "-sS", "-F", f"file=@{path}", "-F", f"model={MODEL_NAME}",
                        "-F", "decode_method=ctc_greedy_search",
                        server.url + "/v1/audio/transcriptions"],
                       capture_output=True, text=True, check=True)
    assert json.loads(r.stdout) == {"text": expected}


def test_concurrent_requests_are_batched_and_unchanged(server):
    expected = cli_transcripts(FILES)
    c = client(server)

    def one(path):
        with open(path, "rb") as f:
            return path, c.audio.transcriptions.create(model=MODEL_NAME, file=f).text

    with concurrent.futures.ThreadPoolExecutor(len(FILES)) as pool:
        got = dict(pool.map(one, FILES * 2))
    assert got == expected
    with urllib.request.urlopen(server.url + "/metrics") as r:
        metrics = r.read().decode()
    # Some batch held more than one request (the 100 ms window collects them).
    count = int(re.search(r"^oasr_batch_size_count (\d+)$", metrics, re.M).group(1))
    singles = int(re.search(r'^oasr_batch_size_bucket\{le="1"\} (\d+)$', metrics, re.M).group(1))
    assert count > singles, metrics
    assert re.search(r'^oasr_requests_total\{route="/v1/audio/transcriptions",code="200"\} \d+$',
                     metrics, re.M)
    assert float(re.search(r"^oasr_audio_seconds_total (\S+)$", metrics, re.M).group(1)) > 10
    rss = int(re.search(r"^process_resident_memory_bytes (\d+)$", metrics, re.M).group(1))
    assert 10 << 20 < rss < 8 << 30, rss
    assert "oasr_device_memory" not in metrics  # served on the CPU


def test_whisper_through_the_sdk():
    """The other architecture behind the same API: Whisper tiny.en (converted
    by the whisper fixture), 16 kHz model, 8 kHz prompt resampled by the server."""
    whisper = os.environ.get("OASR_WHISPER_DIR", "")
    if not whisper or not os.path.isdir(whisper):
        pytest.skip("OASR_WHISPER_DIR (Whisper tiny.en, converted by the whisper fixture) is absent")
    path = FILES[0]
    r = subprocess.run([os.environ["OASR_CLI_BINARY"], "transcribe", "--ckpt-dir", whisper, path],
                       capture_output=True, text=True, check=True)
    expected = r.stdout.rstrip("\n").split("\t", 1)[1]
    s = Server(model=whisper)
    try:
        name = os.path.basename(os.path.normpath(whisper))
        with open(path, "rb") as f:
            got = client(s).audio.transcriptions.create(model=name, file=f)
        assert got.text == expected
        beam = subprocess.run(["curl", "-sS", "-F", f"file=@{path}", "-F", f"model={name}",
                               "-F", "decode_method=beam_search", "-F", "beam_size=5",
                               s.url + "/v1/audio/transcriptions"],
                              capture_output=True, text=True, check=True)
        cli_beam = subprocess.run([os.environ["OASR_CLI_BINARY"], "transcribe", "--ckpt-dir",
                                   whisper, "--decode-method", "beam_search", "--beam-size", "5",
                                   path], capture_output=True, text=True, check=True)
        assert json.loads(beam.stdout)["text"] == cli_beam.stdout.rstrip("\n").split("\t", 1)[1]
        # verbose_json / srt ask Whisper for its timestamp tokens: the
        # segments are those of `oasr transcribe --timestamps`.
        timed = json.loads(subprocess.run(
            [os.environ["OASR_CLI_BINARY"], "transcribe", "--ckpt-dir", whisper, "--timestamps",
             "--output-format", "json", path], capture_output=True, text=True, check=True).stdout)
        assert timed["segments"], timed
        with open(path, "rb") as f:
            v = client(s).audio.transcriptions.create(model=name, file=f,
                                                      response_format="verbose_json",
                                                      timestamp_granularities=["segment"])
        assert v.text == timed["text"]
        assert [(g.start, g.end, g.text) for g in v.segments] == [
            (min(g["start"], v.duration), min(g["end"], v.duration), g["text"])
            for g in timed["segments"]]
        with open(path, "rb") as f:
            srt = client(s).audio.transcriptions.create(model=name, file=f, response_format="srt")
        blocks = srt.strip().split("\n\n")
        assert len(blocks) == len(timed["segments"]), srt
        for number, (block, g) in enumerate(zip(blocks, timed["segments"]), 1):
            lines = block.split("\n")
            assert lines[0] == str(number) and lines[2] == g["text"].strip(), (block, g)
    finally:
        assert s.stop() == 0

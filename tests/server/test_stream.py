"""GET /v1/audio/stream: a real prompt streamed over a WebSocket in uneven
pieces gives the final text of `oasr transcribe --chunk-size 16`; bad
streams get an error message naming the problem, the server stays up."""
import asyncio
import json
import os
import sys
import wave
from pathlib import Path

import pytest
import websockets

from conftest import MODEL, Server, cli_transcripts, require_binaries, sound

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from stream_client import uneven  # noqa: E402  (pieces of 1, 333, 4097, 1, 12000, 7 bytes)

WHISPER = os.environ.get("OASR_WHISPER_DIR", "")


def pcm(path):
    with wave.open(path) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        return w.getframerate(), w.readframes(w.getnframes())


async def stream(url, start, pieces, end=True):
    # All the audio goes out at once, far ahead of real time, so a keepalive
    # ping waits in the socket behind up to 205 s of audio the server decodes
    # first: on a busy machine its pong came after websockets' default 20 s
    # ping timeout and the client dropped the connection (1006) before the
    # server's answer. A real-time client gets its pongs; this one pings not.
    messages = []
    async with websockets.connect(url, max_size=None, ping_interval=None) as ws:
        await ws.send(json.dumps(start))
        for piece in pieces:
            await ws.send(piece)
        if end:
            await ws.send(json.dumps({"type": "end"}))
        try:
            while True:
                messages.append(json.loads(await ws.recv()))
        except websockets.ConnectionClosed:
            pass
        return messages, ws.close_code


@pytest.fixture(scope="module")
def ws_server():
    require_binaries()
    s = Server("--idle-timeout-s", "3")
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.mark.parametrize("name", ["agent-loginok", "vm-goodbye", "conf-onlyperson"])
def test_uneven_pieces_give_the_chunked_transcript(ws_server, name):
    path = sound(name)
    expected = cli_transcripts([path], "--chunk-size", "16")[path]
    rate, data = pcm(path)
    messages, code = asyncio.run(stream(f"ws://127.0.0.1:{ws_server.port}/v1/audio/stream",
                                        {"sample_rate": rate, "format": "pcm_s16le"},
                                        uneven(data)))
    assert code == 1000
    assert messages[-1]["type"] == "final", messages
    assert messages[-1]["text"] == expected
    assert abs(messages[-1]["duration"] - len(data) / 2 / rate) < 1e-9
    partials = [m["text"] for m in messages[:-1]]
    assert all(m["type"] == "partial" for m in messages[:-1])
    assert partials, "no partial result while the audio arrived"
    assert len(set(partials)) == len(partials)  # sent only when the text changes


def test_float_samples_and_a_decode_option(ws_server):
    import array
    path = sound("vm-goodbye")
    expected = cli_transcripts([path], "--chunk-size", "8")[path]
    rate, data = pcm(path)
    ints = array.array("h", data)
    floats = array.array("f", (v / 32768.0 for v in ints)).tobytes()
    messages, _ = asyncio.run(stream(f"ws://127.0.0.1:{ws_server.port}/v1/audio/stream",
                                     {"sample_rate": rate, "format": "pcm_f32le",
                                      "chunk_size": 8}, uneven(floats)))
    assert messages[-1] == {"type": "final", "text": expected, "tokens": messages[-1]["tokens"],
                            "duration": messages[-1]["duration"]}


@pytest.mark.parametrize("rate", [16000, 44100])
def test_another_rate_is_resampled_as_a_file_of_that_rate_is(ws_server, tmp_path, rate):
    # The prompt at another rate (linear interpolation: any signal will do),
    # as a WAV file for the CLI and as PCM for the stream: the server's
    # piecewise resampling must give the CLI's one-shot result.
    import array
    src_rate, data = pcm(sound("vm-options"))
    x = array.array("h", data)
    n = len(x) * rate // src_rate
    y = array.array("h", (x[min(int(i * src_rate / rate), len(x) - 1)] for i in range(n)))
    path = str(tmp_path / f"vm-options-{rate}.wav")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(y.tobytes())
    expected = cli_transcripts([path], "--chunk-size", "16")[path]
    messages, code = asyncio.run(stream(f"ws://127.0.0.1:{ws_server.port}/v1/audio/stream",
                                        {"sample_rate": rate, "format": "pcm_s16le"},
                                        uneven(y.tobytes())))
    assert code == 1000, messages
    assert messages[-1]["type"] == "final" and messages[-1]["text"] == expected
    assert abs(messages[-1]["duration"] - n / rate) < 1e-9


def test_endpointed_stream_reports_segments_each_its_own_audios_transcript(ws_server, tmp_path):
    # Three prompts with 1.5 s of silence after each: rule 2 (1 s of silence
    # after text) ends a segment after each prompt. Each reported segment is
    # `oasr transcribe --chunk-size 16` of its own audio, [start, end) s.
    names = ["agent-loginok", "vm-goodbye", "conf-onlyperson"]
    rate, audio = None, b""
    for name in names:
        r, data = pcm(sound(name))
        assert rate in (None, r)
        rate = r
        audio += data + b"\x00\x00" * (rate * 3 // 2)
    messages, code = asyncio.run(stream(f"ws://127.0.0.1:{ws_server.port}/v1/audio/stream",
                                        {"sample_rate": rate, "format": "pcm_s16le",
                                         "endpoint": True}, uneven(audio)))
    assert code == 1000, messages
    final = messages[-1]
    assert final["type"] == "final", messages
    ended = [s for m in messages[:-1] for s in m.get("segments", [])]
    assert len(final["segments"]) >= len(names), final
    assert ended == final["segments"][:len(ended)]
    spoken = [s for s in final["segments"] if s["text"]]
    assert final["text"] == " ".join(s["text"] for s in spoken)
    for i, segment in enumerate(final["segments"]):
        first, last = round(segment["start"] * rate), round(segment["end"] * rate)
        path = str(tmp_path / f"segment{i}.wav")
        with wave.open(path, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(audio[2 * first:2 * last])
        assert cli_transcripts([path], "--chunk-size", "16")[path] == segment["text"], segment


def test_a_stream_past_the_models_table_needs_endpointing(ws_server):
    # 205 s of prompts and silence: without endpointing the stream is refused
    # at the model's 200.075 s (its positional table) with the way out; with
    # "endpoint": true it decodes to the end.
    rate, data = pcm(sound("vm-goodbye"))
    unit = data + b"\x00\x00" * (rate * 3 // 2)
    audio = unit * (205 * rate * 2 // len(unit) + 1)
    pieces = [audio[i:i + 64000] for i in range(0, len(audio), 64000)]
    url = f"ws://127.0.0.1:{ws_server.port}/v1/audio/stream"
    messages, code = asyncio.run(stream(url, {"sample_rate": rate}, pieces))
    assert messages[-1]["type"] == "error", messages[-1]
    for word in ["the stream is over its limit of 200.075 s", "positional table",
                 '"endpoint": true']:
        assert word in messages[-1]["error"]["message"], messages[-1]
    messages, code = asyncio.run(stream(url, {"sample_rate": rate, "endpoint": True}, pieces))
    assert code == 1000 and messages[-1]["type"] == "final", messages[-1]
    assert messages[-1]["duration"] > 205 and len(messages[-1]["segments"]) > 10


BAD = [
    ("not json", "hello", [], "not JSON"),
    ("no rate", {"format": "pcm_s16le"}, [], "sample_rate"),
    ("rate too low", {"sample_rate": 1000}, [], "4000 to 192000 Hz"),
    ("rate too high", {"sample_rate": 10**6}, [], "4000 to 192000 Hz"),
    ("bad format", {"sample_rate": 8000, "format": "mp3"}, [], "pcm_s16le"),
    ("unknown key", {"sample_rate": 8000, "colour": "red"}, [], "colour"),
    ("bad option", {"sample_rate": 8000, "beam_size": 0}, [], "beam_size"),
    ("stray byte", {"sample_rate": 8000}, [b"\x00\x01\x02"], "stray bytes"),
    ("nan float", {"sample_rate": 8000, "format": "pcm_f32le"}, [b"\x00\x00\xc0\x7f"], "finite"),
]


@pytest.mark.parametrize("name,start,pieces,words", BAD, ids=[b[0] for b in BAD])
def test_bad_streams_are_refused_by_name(ws_server, name, start, pieces, words):
    async def run():
        async with websockets.connect(f"ws://127.0.0.1:{ws_server.port}/v1/audio/stream") as ws:
            await ws.send(start if isinstance(start, str) else json.dumps(start))
            for piece in pieces:
                await ws.send(piece)
            await ws.send(json.dumps({"type": "end"}))
            reply = json.loads(await ws.recv())
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            return reply, ws.close_code

    reply, code = asyncio.run(run())
    assert reply["type"] == "error", reply
    assert words in reply["error"]["message"], reply
    assert code == 1008


def test_audio_before_the_start_and_silence(ws_server):
    async def early():
        async with websockets.connect(f"ws://127.0.0.1:{ws_server.port}/v1/audio/stream") as ws:
            await ws.send(b"\x00\x00" * 100)
            return json.loads(await ws.recv())

    reply = asyncio.run(early())
    assert "before the first message" in reply["error"]["message"]

    async def silent():
        async with websockets.connect(f"ws://127.0.0.1:{ws_server.port}/v1/audio/stream") as ws:
            await ws.send(json.dumps({"sample_rate": 8000}))
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), timeout=10)  # dropped after --idle-timeout-s

    asyncio.run(silent())
    import urllib.request
    with urllib.request.urlopen(ws_server.url + "/health") as r:
        assert r.status == 200


def test_a_model_that_does_not_stream_is_refused_by_name():
    if not WHISPER or not os.path.isdir(WHISPER):
        pytest.skip("OASR_WHISPER_DIR (Whisper tiny.en, converted by the whisper fixture) is absent")
    require_binaries()
    s = Server(model=WHISPER)
    try:
        messages, code = asyncio.run(stream(f"ws://127.0.0.1:{s.port}/v1/audio/stream",
                                            {"sample_rate": 16000}, []))
        assert messages[0]["type"] == "error"
        assert "Whisper does not stream" in messages[0]["error"]["message"], messages
        assert code == 1008
    finally:
        assert s.stop() == 0

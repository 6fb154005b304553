"""Streams WAV files to oasr-server's GET /v1/audio/stream WebSocket in
uneven pieces (1, 333, 4097, 1, 12000, 7 bytes, repeating: samples split
across messages) and prints, per file, "path<TAB>final text<TAB>partials".
bench/server_cuda.sh compares the texts with `oasr transcribe --chunk-size N`
on the same device.

  python3 bench/stream_client.py --url ws://127.0.0.1:PORT/v1/audio/stream \
      [--chunk-size 16] FILE.wav ...
"""
import argparse
import asyncio
import json
import sys
import wave

import websockets


def uneven(data):
    sizes = [1, 333, 4097, 1, 12000, 7]
    out, pos, i = [], 0, 0
    while pos < len(data):
        out.append(data[pos:pos + sizes[i % len(sizes)]])
        pos += sizes[i % len(sizes)]
        i += 1
    return out


async def stream(url, path, chunk_size):
    with wave.open(path) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            sys.exit(f"stream_client: {path}: expected 16-bit mono PCM")
        rate, data = w.getframerate(), w.readframes(w.getnframes())
    start = {"sample_rate": rate, "format": "pcm_s16le"}
    if chunk_size:
        start["chunk_size"] = chunk_size
    messages = []
    # The file goes out at once, ahead of real time: a keepalive ping would
    # wait behind the audio the server decodes first, so none is sent.
    async with websockets.connect(url, max_size=None, ping_interval=None) as ws:
        await ws.send(json.dumps(start))
        for piece in uneven(data):
            await ws.send(piece)
        await ws.send(json.dumps({"type": "end"}))
        try:
            while True:
                messages.append(json.loads(await ws.recv()))
        except websockets.ConnectionClosed:
            pass
    if not messages or messages[-1].get("type") != "final":
        sys.exit(f"stream_client: {path}: no final result, got {messages[-3:]}")
    return messages[-1]["text"], len(messages) - 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--chunk-size", type=int, default=0, help="decoding chunk (server default: 0)")
    p.add_argument("files", nargs="+")
    args = p.parse_args()
    for path in args.files:
        text, partials = asyncio.run(stream(args.url, path, args.chunk_size))
        print(f"{path}\t{text}\t{partials}", flush=True)


if __name__ == "__main__":
    main()

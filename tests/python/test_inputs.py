"""Every input kind gives the result of the file it came from: a path, the
file's bytes, its samples as an int16 or float32 numpy array (at the file's
rate, resampled by the engine where the model's differs), and lists mixing
them; streaming in uneven pieces gives `oasr transcribe --chunk-size 16`."""
import wave

import numpy as np
import pytest

import oasr
from conftest import MODEL, cli_transcripts


def pcm16(path):
    """The WAV file's samples, read by Python's wave module (not oasr)."""
    with wave.open(path) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.int16), w.getframerate()


def same(a, b):
    return a.text == b.text and a.tokens == b.tokens and a.score == b.score


def test_path_bytes_and_arrays_agree(prompts):
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL))
    for path in prompts:
        by_path = engine.transcribe(path)
        with open(path, "rb") as f:
            by_bytes = engine.transcribe(f.read())
        ints, rate = pcm16(path)
        floats = (ints.astype(np.float32) / np.float32(32768.0)).astype(np.float32)
        by_int16 = engine.transcribe(ints, sample_rate=rate)
        by_float32 = engine.transcribe(floats, sample_rate=rate)
        # A float64 array and a strided view are converted, with the same result.
        by_float64 = engine.transcribe(floats.astype(np.float64), sample_rate=rate)
        doubled = np.repeat(floats, 2)[::2]
        by_view = engine.transcribe(doubled, sample_rate=rate)
        for other in (by_bytes, by_int16, by_float32, by_float64, by_view):
            assert same(by_path, other), path
        assert by_path.duration == pytest.approx(len(ints) / rate)


def test_a_mixed_list_is_batched_in_input_order(prompts):
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL, max_batch_size=3))
    ints, rate = pcm16(prompts[1])
    with open(prompts[2], "rb") as f:
        data = f.read()
    mixed = engine.transcribe([prompts[0], ints, data, prompts[3]], sample_rate=[0, rate, 0, 0])
    alone = [engine.transcribe(p) for p in prompts[:4]]
    assert [m.tokens for m in mixed] == [a.tokens for a in alone]


def test_arrays_at_another_rate_are_resampled_like_files(prompts, whisper_dir):
    # Whisper takes 16 kHz; the prompts are 8 kHz files: both paths resample.
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=whisper_dir))
    ints, rate = pcm16(prompts[0])
    assert rate == 8000 and engine.sample_rate == 16000
    assert same(engine.transcribe(prompts[0]), engine.transcribe(ints, sample_rate=rate))


def test_streaming_in_uneven_pieces_equals_the_cli_chunked(prompts):
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL))
    expected = cli_transcripts(MODEL, prompts, "--chunk-size", "16")
    sizes = [1, 333, 4097, 80, 2000, 7]
    for path in prompts:
        ints, _ = pcm16(path)
        floats = ints.astype(np.float32) / np.float32(32768.0)
        session = engine.stream(chunk_size=16)
        assert session.partial() is None
        at, k, partials = 0, 0, []
        while at < len(floats):
            piece = floats[at:at + sizes[k % len(sizes)]]
            partials.append(session.accept(piece).text)
            at += len(piece)
            k += 1
        final = session.finish()
        assert session.finished
        assert final.text == expected[path], path
        assert session.partial() is final
        assert len(partials) == k  # one partial result per piece


def test_whisper_does_not_stream(whisper_dir):
    engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=whisper_dir))
    with pytest.raises(oasr.ConfigError, match="does not stream"):
        engine.stream()

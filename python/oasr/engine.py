"""The engine: ``EngineConfig`` says what to serve, ``ASREngine`` serves it.

    from oasr.engine import ASREngine, EngineConfig

    engine = ASREngine(EngineConfig(ckpt_dir="models/oasr-u2pp-char-8k",
                                    quantization="int8_w8a8"))
    print(engine.transcribe("a.wav").text)

The same engine the ``oasr`` CLI and ``oasr-server`` run: the option names,
their validation and their messages are the CLI's (``--beam-size`` is
``beam_size`` here). Work runs with the GIL released, so threads holding
their own engines decode in parallel; Ctrl-C stops a long call at its next
batch or decode step.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union, overload

from . import _oasr

PathLike = Union[str, "os.PathLike[str]"]
# A path, the bytes of an audio file, or a 1-D float32 / int16 array (numpy
# or anything exposing the buffer / DLPack protocol).
AudioInput = Any

# The decode options every registered architecture declares (the C++
# models::Architecture::decode_options): a request may set them, and each is
# a keyword of EngineConfig. Which apply is the loaded architecture's to say:
# the engine refuses a key it does not declare, by name.
_DECODE_DECLARATIONS: Tuple[Dict[str, Any], ...] = tuple(json.loads(_oasr.decode_option_declarations()))
DECODE_KEYS: Tuple[str, ...] = tuple(d["key"] for d in _DECODE_DECLARATIONS)
_DECODE_TYPES = {
    "integer": Optional[int],
    "number": Optional[float],
    "bool": Optional[bool],
    "text": Optional[str],
    "number_list": Union[None, str, Sequence[float]],
}
_LIST_KEYS = frozenset(d["key"] for d in _DECODE_DECLARATIONS if d["kind"] == "number_list")


def _decode_field_doc() -> str:
    lines = []
    for d in _DECODE_DECLARATIONS:
        takes = "; ".join(f"{a['name']}: {a['help']} ({a['takes']}, default {a['default']})"
                          for a in d["architectures"])
        lines.append(f"    ``{d['key']}``: {takes}")
    return "\n".join(lines)


class _EngineConfigMethods:
    def __post_init__(self) -> None:
        _oasr.check_engine_config(self.to_json())

    def to_dict(self) -> Dict[str, Any]:
        """The set fields, under the engine's option keys."""
        out: Dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None or (f.name == "quantization_option" and not value):
                continue
            if f.name == "ckpt_dir":
                value = os.fspath(value)
            elif f.name == "quantization" and isinstance(value, Mapping):
                value = dict(value)
            elif f.name == "quantization_option":
                value = [value] if isinstance(value, str) else list(value)
            elif f.name in _LIST_KEYS and not isinstance(value, str):
                value = [float(v) for v in value]
            out[f.name] = value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def dump(self) -> str:
        """One line, as the engine's startup log writes it."""
        return _oasr.check_engine_config(self.to_json())


# What an ``ASREngine`` serves: the engine keys, one field per decode key
# (generated from the declarations), then quantization.
EngineConfig = make_dataclass(
    "EngineConfig",
    [("ckpt_dir", PathLike),
     ("device", str, field(default="cpu")),
     ("dtype", Optional[str], field(default=None)),
     ("max_batch_size", int, field(default=8)),
     ("threads", int, field(default=0))]
    + [(d["key"], _DECODE_TYPES[d["kind"]], field(default=None)) for d in _DECODE_DECLARATIONS]
    + [("quantization", Union[None, str, Mapping[str, Any]], field(default=None)),
       ("quantization_option", Sequence[str], field(default_factory=tuple))],
    bases=(_EngineConfigMethods,),
)
EngineConfig.__module__ = __name__
EngineConfig.__doc__ = (
    """What an ``ASREngine`` serves. Validated when made (``ConfigError``).

    ``quantization`` is a scheme name (``"int8_w8a8"``, ``"fp8_w8a8"``, ...)
    or a dict ``{"scheme", "ignore", "module_types", "kv_cache"}``
    (``ignore`` / ``module_types``: a string, comma list or list of them).
    Decode fields left ``None`` take the checkpoint's defaults:

"""
    + _decode_field_doc()
)


@dataclass(frozen=True)
class Segment:
    id: int
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Transcript:
    """One utterance's result. ``token_times`` holds (start, end) seconds per
    token where the architecture aligns tokens (U2++: the CTC alignment of
    the chosen hypothesis), else it is empty. ``timed_segments`` holds the
    model's own (start, end, text) segments where it delimits them (Whisper
    decoded with ``timestamps=True``), else it is empty."""

    text: str
    tokens: List[int]
    score: float
    token_times: List[Tuple[float, float]]
    duration: float
    timed_segments: List[Tuple[float, float, str]] = field(default_factory=list)

    @property
    def segments(self) -> List[Segment]:
        """The model's segments where it delimits them, else one spanning the
        aligned tokens (the whole audio where the model gives no times), as
        oasr-server's verbose_json / srt / vtt."""
        if self.timed_segments:
            return [Segment(i, min(s, self.duration), min(e, self.duration), text)
                    for i, (s, e, text) in enumerate(self.timed_segments)]
        times = self.token_times
        start = min(times[0][0], self.duration) if times else 0.0
        end = min(times[-1][1], self.duration) if times else self.duration
        return [Segment(0, start, end, self.text)]

    def to_dict(self) -> Dict[str, Any]:
        return {
            "text": self.text,
            "tokens": list(self.tokens),
            "score": self.score,
            "duration": self.duration,
            "token_times": [list(t) for t in self.token_times],
            "segments": [vars(s).copy() for s in self.segments],
        }


def _transcript(values: Tuple[str, List[int], float, List[Tuple[float, float]], float,
                               List[Tuple[float, float, str]]]) -> Transcript:
    text, tokens, score, times, duration, segments = values
    return Transcript(text, list(tokens), score, [tuple(t) for t in times], duration,
                      [tuple(s) for s in segments])


def _decode_json(options: Mapping[str, Any]) -> str:
    unknown = sorted(set(options) - set(DECODE_KEYS))
    if unknown:
        from .errors import ConfigError

        raise ConfigError(
            f"unknown decode option(s) {', '.join(unknown)}; a request takes {', '.join(DECODE_KEYS)}"
        )
    return json.dumps({k: v for k, v in options.items() if v is not None})


def _is_single(x: Any) -> bool:
    if isinstance(x, (str, bytes, bytearray, os.PathLike)):
        return True
    # An array (numpy, DLPack, buffer) with a shape is one waveform.
    return hasattr(x, "shape") or hasattr(x, "__dlpack__")


def _prepare(item: Any) -> Any:
    if isinstance(item, os.PathLike):
        return os.fspath(item)
    if isinstance(item, bytearray):
        return bytes(item)
    if isinstance(item, (str, bytes)):
        return item
    # Arrays of another dtype or layout are converted (a copy); float32 and
    # int16 C-contiguous 1-D arrays go to the engine as they are.
    dtype = getattr(item, "dtype", None)
    if dtype is not None and str(dtype) not in ("float32", "int16"):
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - numpy absent
            return item
        return np.ascontiguousarray(item, dtype=np.float32)
    flags = getattr(item, "flags", None)
    if flags is not None and not flags["C_CONTIGUOUS"]:
        import numpy as np

        return np.ascontiguousarray(item)
    return item


class StreamingSession:
    """Audio in pieces of any size at the engine's rate (float32 in [-1, 1]
    or int16); ``accept`` returns the partial result, ``finish`` the final
    one, equal to ``transcribe`` with the same ``chunk_size``."""

    def __init__(self, session: "_oasr.Session") -> None:
        self._session = session
        self._partial: Optional[Transcript] = None

    def accept(self, samples: Any) -> Transcript:
        self._partial = _transcript(self._session.accept(_prepare(samples)))
        return self._partial

    def partial(self) -> Optional[Transcript]:
        """The latest partial result (None before any audio)."""
        return self._partial

    def finish(self) -> Transcript:
        self._partial = _transcript(self._session.finish())
        return self._partial

    @property
    def finished(self) -> bool:
        return self._session.finished


class ASREngine:
    """Audio in, text out, for one checkpoint directory of any architecture
    oasr serves (U2++ / WeNet, Whisper). Building it loads (and, when asked,
    quantizes) the model: ``CheckpointError`` / ``ConfigError`` on failure."""

    def __init__(self, config: Union[EngineConfig, Mapping[str, Any]]) -> None:
        if isinstance(config, Mapping):
            config = EngineConfig(**config)
        self.config = config
        self._engine = _oasr.Engine(config.to_json())

    @property
    def sample_rate(self) -> int:
        """The rate the model takes; other rates are resampled."""
        return self._engine.sample_rate

    @property
    def architecture(self) -> str:
        return self._engine.architecture

    @overload
    def transcribe(self, audio: Union[str, bytes, "os.PathLike[str]"], *, sample_rate: Optional[int] = None, **decode: Any) -> Transcript: ...
    @overload
    def transcribe(self, audio: Sequence[AudioInput], *, sample_rate: Optional[int] = None, **decode: Any) -> List[Transcript]: ...

    def transcribe(self, audio: Any, *, sample_rate: Optional[int] = None, **decode: Any) -> Any:
        """Transcribes one input or a list of them, batched by the engine.

        An input is a path, the bytes of an audio file (WAV, FLAC, OGG, MP3,
        ...), or a 1-D float32 (in [-1, 1]) or int16 array with
        ``sample_rate`` (an int for every array, or a list, one per input).
        A float32 C-contiguous array at the engine's rate is read in place.
        ``decode`` takes the request's decode options (``decode_method``,
        ``beam_size``, ``chunk_size``, ...). Returns a ``Transcript`` for one
        input, a list for a list; each equals what it gives alone."""
        single = _is_single(audio)
        items = [audio] if single else list(audio)
        if isinstance(sample_rate, (list, tuple)):
            if len(sample_rate) != len(items):
                from .errors import ConfigError

                raise ConfigError(f"sample_rate: {len(sample_rate)} rates for {len(items)} inputs; give one each")
            rates = [int(r or 0) for r in sample_rate]
        else:
            rates = [int(sample_rate or 0)] * len(items)
        prepared = [_prepare(item) for item in items]
        results = [_transcript(t) for t in self._engine.transcribe(prepared, rates, _decode_json(decode))]
        return results[0] if single else results

    def stream(self, **decode: Any) -> StreamingSession:
        """A streaming session (architectures that stream; U2++ uses
        ``chunk_size``, 16 unless given)."""
        decode.setdefault("chunk_size", self.config.chunk_size or 16)
        return StreamingSession(self._engine.stream(_decode_json(decode)))

    def quantization_info(self) -> Dict[str, Any]:
        """What is served: source, schemes, quantized layer count, KV-cache
        format, per layer its scheme, kernel lane and input quantizer, and
        the skipped layers with their reasons."""
        return json.loads(self._engine.quantization_info_json())

    def __repr__(self) -> str:
        return f"ASREngine({self._engine.config_dump()})"


__all__ = ["ASREngine", "EngineConfig", "Transcript", "Segment", "StreamingSession", "DECODE_KEYS"]

"""oasr: 8-bit (W8A8 int8 / fp8) speech recognition inference.

    from oasr.engine import ASREngine, EngineConfig
    engine = ASREngine(EngineConfig(ckpt_dir=..., quantization="int8_w8a8"))
    print(engine.transcribe("audio.wav").text)

``oasr.quantize`` and ``oasr.convert`` mirror the ``oasr quantize`` and
``oasr convert`` commands; ``python -m oasr`` runs the CLI itself.
"""

from . import _oasr
from .engine import ASREngine, EngineConfig, Segment, StreamingSession, Transcript
from .errors import AudioError, CheckpointError, ConfigError, Error
from .tools import convert, quantize, recipes

__version__: str = _oasr.__version__

__all__ = [
    "ASREngine",
    "EngineConfig",
    "Segment",
    "StreamingSession",
    "Transcript",
    "Error",
    "ConfigError",
    "CheckpointError",
    "AudioError",
    "convert",
    "quantize",
    "recipes",
    "__version__",
]

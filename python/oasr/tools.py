"""Checkpoint tools, as the ``oasr convert`` and ``oasr quantize`` commands."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _oasr

PathLike = Union[str, "os.PathLike[str]"]


def convert(src: PathLike, dst: PathLike, *, from_: str = "auto", dtype: Optional[str] = None,
            force: bool = False) -> str:
    """Writes ``src`` (a WeNet experiment, a native directory, a CTranslate2 /
    faster-whisper or Hugging Face Whisper model) as an oasr native directory
    ``dst``, atomically. ``from_`` names the layout (``"auto"`` detects it);
    ``dtype`` stores floating weights as float32, float16 or bfloat16.
    Returns what ``oasr convert`` prints."""
    return _oasr.convert(os.fspath(src), os.fspath(dst), from_, dtype, force)


def recipes() -> List[str]:
    """The quantization recipes ``quantize`` takes."""
    return list(_oasr.recipes())


def quantize(src: PathLike, dst: PathLike, *, recipe: str,
             calib_manifest: Optional[PathLike] = None, audio_root: Optional[PathLike] = None,
             calib_utterances: Optional[int] = None, alpha: Optional[float] = None,
             ignore: Union[None, str, Sequence[str]] = None, module_types: Optional[str] = None,
             calib_device: str = "cpu", calib_dtype: str = "float32",
             options: Sequence[str] = (), force: bool = False,
             progress: bool = True) -> Dict[str, Any]:
    """Quantizes the full-precision checkpoint ``src`` into a native
    format_version 2 checkpoint ``dst`` by ``recipe`` (see ``recipes()``),
    calibrating on ``calib_manifest`` where the recipe needs it; as
    ``oasr quantize``. Returns ``{destination, schemes, quantized_layers,
    calibration_utterances, report}`` (``report``: quantization_report.json)."""
    if ignore is None:
        ignore_list: List[str] = []
    elif isinstance(ignore, str):
        ignore_list = [ignore]
    else:
        ignore_list = list(ignore)
    out = _oasr.quantize(
        os.fspath(src), os.fspath(dst), recipe,
        None if calib_manifest is None else os.fspath(calib_manifest),
        None if audio_root is None else os.fspath(audio_root),
        calib_utterances, alpha, ignore_list, module_types or "", calib_device, calib_dtype,
        list(options), force, progress)
    return json.loads(out)


__all__ = ["convert", "quantize", "recipes"]

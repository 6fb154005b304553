"""Bulk transcription on a Ray cluster: ``transcribe_dataset``.

The pipeline is Ray Data's: audio is decoded in CPU tasks
(``_oasr.load_audio``, the engine's own reader), transcribed in an actor
pool of engines (GPU actors where ``num_gpus`` is set), and streamed back to
the driver, which alone writes the output. Exactly once per id comes from
that single writer: it appends each result to the jsonl file, skips ids it
has already written (a batch Ray re-runs after a worker or node dies comes
back twice; the second copy is dropped), and fsyncs after every batch; a
re-run reads the file back and transcribes only the ids it lacks. An
utterance that cannot be read or decoded is written with its error, never
dropped.

Output lines: ``{"id", "text", "tokens", "duration", "error", "timing":
{"decode_s", "transcribe_s"}}`` (``error`` null on success; ``text`` "" and
``tokens`` [] on failure). With ``parquet=``, the whole jsonl is also
written as one Parquet file once every id is in (atomically, by rename).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Union

import numpy as np

from .. import _oasr
from ..engine import ASREngine, EngineConfig, _decode_json
from ..errors import Error
from .config import check_engine, engine_for_replica
from ..errors import ConfigError

# How often Ray re-runs a decode task or restarts an engine actor after its
# worker or node dies: enough for machines that fail, not so many that an
# utterance that kills its worker every time retries without bound (Ray
# Data's defaults are unbounded). An actor's batch is re-sent for as long as
# the actor can come back (Ray Data's default): a bounded count there fails
# the run while a dead node is still being noticed, and the restarts bound it.
RETRIES = 3

try:
    import ray
    import ray.data
except ImportError:  # pragma: no cover - exercised by the install without the extra
    raise ConfigError("oasr.ray needs Ray: pip install 'oasr[ray]' (ray[serve,data])") from None


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def decode_audio(batch: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """A Ray Data batch of ``id`` and ``audio`` (paths) or ``bytes``: the
    samples at each file's own rate (the engine resamples them exactly as it
    would the file), or the error that stopped the read."""
    ids = [str(i) for i in batch["id"]]
    sources = batch["audio"] if "audio" in batch else batch["bytes"]
    samples: List[np.ndarray] = []
    rates: List[int] = []
    errors: List[str] = []
    seconds: List[float] = []
    for source in sources:
        started = time.perf_counter()
        try:
            source = source if isinstance(source, bytes) else str(source)
            array, rate = _oasr.load_audio(source)
            error = ""
        except Exception as e:  # every failure is recorded with the id, never dropped
            array, rate, error = np.zeros(0, np.float32), 0, _error_text(e)
        samples.append(array)
        rates.append(rate)
        errors.append(error)
        seconds.append(time.perf_counter() - started)
    out = np.empty(len(samples), dtype=object)
    out[:] = samples
    return {"id": np.array(ids, dtype=object), "samples": out, "rate": np.array(rates),
            "error": np.array(errors, dtype=object), "decode_s": np.array(seconds)}


class Transcriber:
    """An actor of the pool: one engine, a batch of decoded audio in,
    results out (one per id, failures with their error)."""

    def __init__(self, engine: Mapping[str, Any], decode: Mapping[str, Any]) -> None:
        self._engine = ASREngine(dict(engine))
        self._decode = dict(decode)
        # Options this architecture does not take fail the run here, before
        # any utterance is written with them as its "error".
        self._engine._engine.check_decode(_decode_json(self._decode))

    def _transcribe(self, samples: List[np.ndarray], rates: List[int]) -> List[Any]:
        try:
            return list(self._engine.transcribe(samples, sample_rate=rates, **self._decode))
        except ConfigError:
            raise  # the run's configuration, not an utterance, is at fault
        except Exception:
            # One bad utterance must not fail its neighbours: each alone,
            # and each failure kept as its own error.
            out: List[Any] = []
            for array, rate in zip(samples, rates):
                try:
                    out.append(self._engine.transcribe(array, sample_rate=rate, **self._decode))
                except Exception as e:
                    out.append(e)
            return out

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, Any]:
        n = len(batch["id"])
        ok = [i for i in range(n) if not batch["error"][i]]
        started = time.perf_counter()
        results = self._transcribe([np.ascontiguousarray(batch["samples"][i], dtype=np.float32)
                                    for i in ok], [int(batch["rate"][i]) for i in ok]) if ok else []
        per_utterance = (time.perf_counter() - started) / max(1, len(ok))
        text, tokens, duration, error = [""] * n, [[] for _ in range(n)], [0.0] * n, list(batch["error"])
        for i, result in zip(ok, results):
            if isinstance(result, BaseException):
                error[i] = _error_text(result)
                continue
            text[i], tokens[i], duration[i] = result.text, list(result.tokens), result.duration
        tokens_out = np.empty(n, dtype=object)
        tokens_out[:] = [np.asarray(t, dtype=np.int64) for t in tokens]
        return {"id": batch["id"], "text": np.array(text, dtype=object), "tokens": tokens_out,
                "duration": np.array(duration), "error": np.array(error, dtype=object),
                "decode_s": batch["decode_s"],
                "transcribe_s": np.array([per_utterance if i in ok else 0.0 for i in range(n)])}


def _manifest_rows(path: str, audio_root: Optional[str]) -> List[Dict[str, str]]:
    # oasr eval's reader: every line checked, a duplicated id refused by line.
    return [{"id": uid, "audio": audio}
            for uid, audio, _text, _line in _oasr.read_manifest(path, os.fspath(audio_root or ""))]


def written_ids(output: str) -> Set[str]:
    """The ids already in an output jsonl. A last line cut short (the writer
    was killed mid-line: it starts as every written line does) is cut off
    the file, so its id is transcribed again; a file that is not an oasr.ray
    output is refused, untouched."""
    if not os.path.exists(output):
        return set()
    with open(output, "rb") as f:
        data = f.read()
    end = data.rfind(b"\n") + 1
    ids: Set[str] = set()
    for number, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            ids.add(str(json.loads(line)["id"]))
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"{output} line {number}: not an oasr.ray output line (a JSON "
                              "object with an 'id'); name a new output file or remove it") from None
    tail = data[end:]
    if tail:
        if not tail.startswith(b'{"id": '):
            raise ConfigError(f"{output}: its last line is not an oasr.ray output line; name a "
                              "new output file or remove it")
        with open(output, "rb+") as f:
            f.truncate(end)
    return ids


def _write_parquet(jsonl: str, parquet: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(jsonl, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    staged = parquet + ".partial"
    try:
        pq.write_table(pa.Table.from_pylist(rows), staged)
        os.replace(staged, parquet)
    finally:
        if os.path.exists(staged):
            os.remove(staged)


def _batches(results: "ray.data.Dataset", output: str, counts: Dict[str, Any]) -> Iterable[Any]:
    """The pipeline's result batches; a run Ray gives up on (retries spent)
    ends with an oasr.Error saying what is on disk and that a re-run resumes."""
    try:
        yield from results.iter_batches(batch_size=None, batch_format="numpy")
    except (Error, KeyboardInterrupt):
        raise
    except Exception as e:
        detail = " ".join(str(e).split())[:2000]
        raise Error(f"the Ray pipeline failed after {counts['written']} line(s) were written to "
                    f"{output} (a re-run transcribes only the ids not yet there): "
                    f"{type(e).__name__}: {detail}") from e


def transcribe_dataset(
    source: Union[str, "os.PathLike[str]", "ray.data.Dataset"],
    output: Union[str, "os.PathLike[str]"],
    engine: Union[EngineConfig, Mapping[str, Any]],
    *,
    concurrency: int = 1,
    batch_size: Optional[int] = None,
    num_gpus: Optional[float] = None,
    num_cpus: float = 1.0,
    actor_options: Optional[Mapping[str, Any]] = None,
    decode: Optional[Mapping[str, Any]] = None,
    audio_root: Optional[str] = None,
    parquet: Optional[str] = None,
    on_batch: Optional[Callable[[int], None]] = None,
) -> Dict[str, Any]:
    """Transcribes every utterance of ``source`` into ``output`` (jsonl).

    ``source``: a jsonl manifest as ``oasr eval`` reads it (``id``,
    ``audio``; paths relative to ``audio_root`` or the manifest's folder),
    or a Ray Dataset with ``id`` and ``audio`` (paths) or ``bytes``.
    ``engine``: an EngineConfig or its keys. ``concurrency`` engines run as
    actors, each with ``num_gpus`` GPUs (1 for a CUDA engine unless given)
    and ``num_cpus`` cores (a CPU engine computes on that many threads).
    ``batch_size`` utterances go to an engine at once (its max_batch_size by
    default). ``on_batch(written)`` is called after each batch is on disk.

    Returns counts: ``total``, ``already_written``, ``written``, ``failed``,
    ``duplicates_dropped``, ``audio_seconds``, ``wall_s``."""
    started = time.perf_counter()
    engine_keys = check_engine(engine, "transcribe_dataset: engine")
    if concurrency < 1:
        raise ConfigError(f"concurrency is {concurrency}; it must be at least 1")
    decode = dict(decode or {})
    _decode_json(decode)  # unknown keys, before anything runs
    output = os.fspath(output)
    done = written_ids(output)
    if isinstance(source, (str, os.PathLike)):
        rows = _manifest_rows(os.fspath(source), audio_root)
        total = len(rows)
        pending = [row for row in rows if row["id"] not in done]
        dataset = ray.data.from_items(pending) if pending else None
    else:
        missing = {"id"} - set(source.columns())
        if missing or not ({"audio", "bytes"} & set(source.columns())):
            raise ConfigError(f"the dataset's columns are {source.columns()}; it needs 'id' and "
                              "'audio' (paths) or 'bytes' (encoded files)")
        total = None  # known once the run has seen every row (counting first would read it twice)
        already = frozenset(done)
        dataset = source.filter(lambda row: str(row["id"]) not in already)
        pending = None
    device = engine_keys.get("device", "cpu")
    gpus = num_gpus if num_gpus is not None else (1.0 if device.startswith("cuda") else 0.0)
    engine_keys = engine_for_replica(engine_keys, num_cpus)
    actor_args = {"max_restarts": RETRIES, **dict(actor_options or {})}
    batch = batch_size or int(engine_keys.get("max_batch_size", 8))
    counts = {"total": total, "already_written": len(done), "written": 0, "failed": 0,
              "duplicates_dropped": 0, "audio_seconds": 0.0}
    if dataset is not None and (pending is None or pending):
        results = (dataset
                   .map_batches(decode_audio, batch_size=batch, num_cpus=1, batch_format="numpy",
                                max_retries=RETRIES)
                   .map_batches(Transcriber, batch_size=batch, batch_format="numpy",
                                concurrency=concurrency, num_gpus=gpus, num_cpus=num_cpus,
                                fn_constructor_args=(engine_keys, decode), **actor_args))
        with open(output, "a", encoding="utf-8") as out:
            for part in _batches(results, output, counts):
                for i in range(len(part["id"])):
                    uid = str(part["id"][i])
                    if uid in done:
                        counts["duplicates_dropped"] += 1
                        continue
                    error = str(part["error"][i]) or None
                    line = {"id": uid, "text": str(part["text"][i]),
                            "tokens": [int(t) for t in part["tokens"][i]],
                            "duration": float(part["duration"][i]), "error": error,
                            "timing": {"decode_s": float(part["decode_s"][i]),
                                       "transcribe_s": float(part["transcribe_s"][i])}}
                    out.write(json.dumps(line, ensure_ascii=False) + "\n")
                    done.add(uid)
                    counts["written"] += 1
                    counts["failed"] += error is not None
                    counts["audio_seconds"] += line["duration"]
                out.flush()
                os.fsync(out.fileno())
                if on_batch is not None:
                    on_batch(counts["written"])
    if counts["total"] is None:
        counts["total"] = len(done)
    if pending is not None:
        missing = [row["id"] for row in pending if row["id"] not in done]
        if missing:
            raise Error(f"{output}: {len(missing)} id(s) were not written ({', '.join(missing[:5])}"
                        f"{', ...' if len(missing) > 5 else ''}); run again to transcribe them")
    if parquet is not None:
        _write_parquet(output, os.fspath(parquet))
    counts["wall_s"] = time.perf_counter() - started
    return counts


__all__ = ["transcribe_dataset", "written_ids", "decode_audio", "Transcriber"]

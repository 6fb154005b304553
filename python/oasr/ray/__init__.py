"""oasr past one machine, on a Ray cluster (``pip install 'oasr[ray]'``).

- ``oasr.ray.serve``: a Ray Serve application whose replicas each hold one
  engine and answer oasr-server's HTTP API (OpenAI's
  ``POST /v1/audio/transcriptions``, ``/v1/models``, ``/health``, ``/ready``,
  ``/metrics``, ``/v1/quantization``) with oasr-server's own code, so fields,
  formats, error JSON and status codes are the server's. Started with
  ``python -m oasr.ray serve CONFIG`` (or ``python -m oasr serve-ray CONFIG``),
  or by Ray's own ``serve run`` / KubeRay through ``oasr.ray.serve:build_app``.
- ``oasr.ray.data.transcribe_dataset``: bulk transcription of a jsonl
  manifest (or a Ray Dataset) over an actor pool of engines, written to jsonl
  (and Parquet) exactly once per id, resumable.

docs/ray.md explains the config file and how to run both on a cluster.
"""

from .config import load_config

__all__ = ["load_config", "build_app", "run_serve", "transcribe_dataset"]


def __getattr__(name):
    # Ray is imported only when a Ray entry point is used.
    if name in ("build_app", "run_serve"):
        from . import serve

        return getattr(serve, name)
    if name == "transcribe_dataset":
        from .data import transcribe_dataset

        return transcribe_dataset
    raise AttributeError(f"module 'oasr.ray' has no attribute '{name}'")

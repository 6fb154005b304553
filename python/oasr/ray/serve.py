"""oasr-server's HTTP API as a Ray Serve application.

Each replica holds one engine and one ``_oasr.Service`` (the C++
server::TranscriptionService oasr-server runs): a request's method, path,
headers and body go to it as they came, and its status, headers and body go
back as they are, so both front ends answer alike. Concurrent requests to a
replica run on a thread pool with the GIL released, where the service's
batcher groups them into engine batches (its max_batch_size and
max_batch_delay_ms). Ray Serve routes between replicas, restarts those that
die and scales them (num_replicas or autoscaling_config).

    python -m oasr.ray serve CONFIG          # or: python -m oasr serve-ray CONFIG

``build_app`` is also an application builder for Ray's own tools: a Ray Serve
config (``serve run`` / ``serve deploy`` / KubeRay's serveConfigV2) names
``import_path: oasr.ray.serve:build_app`` with this config's sections as
``args`` (docs/ray.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Mapping, Optional

from .config import check_config, engine_for_replica, load_config

try:
    import ray
    from ray import serve
except ImportError:  # pragma: no cover - exercised by the install without the extra
    from ..errors import ConfigError

    raise ConfigError("oasr.ray needs Ray: pip install 'oasr[ray]' (ray[serve,data])") from None

log = logging.getLogger("oasr.ray")

# Response headers the proxy sets itself.
_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "server", "date"})


class Transcriber:
    """One replica: an engine and oasr-server's API over it."""

    def __init__(self, engine: Mapping[str, Any], service: Mapping[str, Any], threads: int) -> None:
        from .. import _oasr
        from ..engine import ASREngine

        if not getattr(_oasr, "has_service", False):
            from ..errors import ConfigError

            raise ConfigError("this build of oasr has no server library (it was built with "
                              "OASR_BUILD_SERVER=OFF); rebuild with it on to serve on Ray")
        self._engine = ASREngine(dict(engine))
        self._service = _oasr.Service(self._engine._engine, json.dumps(dict(service)))
        # Each request waits on a thread while the batcher decodes; as many
        # threads as requests a replica takes at once.
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="oasr-request")
        log.info("replica ready: model '%s', %s", self._service.model_name, self._engine)

    async def _read_body(self, request) -> Optional[bytes]:
        """The body, or None once it passes the upload limit (read no further)."""
        limit = self._service.max_upload_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return None
        parts, size = [], 0
        async for part in request.stream():
            size += len(part)
            if size > limit:
                return None
            parts.append(part)
        return b"".join(parts)

    async def __call__(self, request) -> Any:
        from starlette.responses import Response

        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = list(request.headers.items())
        body = await self._read_body(request)
        if body is None:  # oasr-server's 413, as its transport answers it
            status, reply_headers, payload = self._service.too_large(request.method, target, headers)
        else:
            status, reply_headers, payload = await asyncio.get_running_loop().run_in_executor(
                self._pool, self._service.handle, request.method, target, headers, body)
        kept = {k: v for k, v in reply_headers if k.lower() not in _HOP_HEADERS}
        return Response(content=payload, status_code=status, headers=kept)

    def check_health(self) -> None:
        # Serve's health probe asks the service's own /health.
        status, _, body = self._service.handle("GET", "/health", [], b"")
        if status != 200:
            raise RuntimeError(f"/health answered {status}: {body[:200]!r}")

    def __del__(self) -> None:
        service = getattr(self, "_service", None)
        if service is not None:
            service.drain()  # answer what is queued before the replica goes


def build_app(args: Mapping[str, Any]) -> "serve.Application":
    """The Serve application of a config mapping (the config file's
    sections; ``address``, ``http`` and ``proxy_location`` are ignored here:
    they are the cluster's and the proxy's)."""
    config = check_config(dict(args), "oasr.ray.serve:build_app args")
    deployment: Dict[str, Any] = dict(config["deployment"])
    ongoing = deployment.get("max_ongoing_requests", 64)
    actor = deployment.get("ray_actor_options", {})
    engine = engine_for_replica(config["engine"], actor.get("num_cpus"))
    deployment.setdefault("max_ongoing_requests", ongoing)
    app = serve.deployment(Transcriber, name="oasr").options(**deployment)
    return app.bind(engine, config["service"], int(ongoing))


def run_serve(config_path: str, *, blocking: bool = True,
              overrides: Optional[Mapping[str, Any]] = None) -> None:
    """Starts (or joins) Ray, starts Serve's HTTP proxy and runs the
    application of the config file; with ``blocking`` it serves until
    interrupted, then shuts the application down."""
    config = load_config(config_path, overrides)
    if not ray.is_initialized():
        ray.init(address=config["address"], log_to_driver=True)
    serve.start(http_options=config["http"], proxy_location=config["proxy_location"])
    serve.run(build_app(config), name=config["name"], route_prefix="/")
    host, port = config["http"]["host"], config["http"]["port"]
    print(f"oasr.ray: serving '{config['name']}' on http://{host}:{port}/v1/audio/transcriptions",
          flush=True)
    if not blocking:
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    serve.delete(config["name"])
    print("oasr.ray: stopped", flush=True)


__all__ = ["build_app", "run_serve", "Transcriber"]

"""The oasr.ray config file (YAML or JSON), checked before Ray starts.

    address: auto              # the Ray cluster to join; left out: a local Ray
    name: oasr                 # the Serve application's name
    http: {host: 0.0.0.0, port: 8000}
    proxy_location: EveryNode  # or HeadOnly (one HTTP proxy, on the head)
    engine:                    # oasr.engine.EngineConfig's keys
      ckpt_dir: /models/whisper-tiny.en
      device: cuda
      quantization: int8_w8a8
      max_batch_size: 16
    service:                   # oasr-server's limits, its flags without dashes
      max_batch_delay_ms: 10
      max_queue: 256
    deployment:                # Ray Serve's deployment options
      num_replicas: 2          # or autoscaling_config: {min_replicas, max_replicas, ...}
      num_gpus: 1              # per replica (shorthand for ray_actor_options)
      max_ongoing_requests: 64

Every section is checked by the code that uses it: ``engine`` by
EngineConfig (the CLI's messages), ``service`` by oasr-server's limit table,
``deployment`` against Ray Serve's option names. A mistake raises
``ConfigError`` naming the file and the key.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import MISSING
from typing import Any, Dict, Mapping, Optional

from .. import _oasr
from ..engine import EngineConfig
from ..errors import ConfigError

TOP_KEYS = ("address", "name", "http", "proxy_location", "engine", "service", "deployment")
HTTP_KEYS = ("host", "port")
PROXY_LOCATIONS = ("EveryNode", "HeadOnly", "Disabled")
# Ray Serve's @serve.deployment options a config may set, plus the per-replica
# shorthands num_gpus / num_cpus / resources (merged into ray_actor_options).
DEPLOYMENT_KEYS = (
    "num_replicas", "autoscaling_config", "ray_actor_options", "max_ongoing_requests",
    "max_queued_requests", "max_replicas_per_node", "health_check_period_s",
    "health_check_timeout_s", "graceful_shutdown_timeout_s", "graceful_shutdown_wait_loop_s",
    "placement_group_bundles", "placement_group_strategy",
)
REPLICA_SHORTHANDS = ("num_gpus", "num_cpus", "resources")


def _refuse(where: str, message: str) -> None:
    raise ConfigError(f"{where}: {message}")


def _check_keys(where: str, section: Any, allowed: tuple) -> Dict[str, Any]:
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        _refuse(where, f"must be a mapping of {', '.join(allowed)}, not {section!r}")
    unknown = sorted(set(section) - set(allowed))
    if unknown:
        _refuse(where, f"unknown key(s) {', '.join(unknown)}; the keys are {', '.join(allowed)}")
    return dict(section)


def _read(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config file ({e.strerror})") from None
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise ConfigError(f"{path}: a YAML config needs PyYAML (Ray installs it); "
                              "or write the config as JSON") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}; "
                          "name a .yaml file for YAML") from None


def check_engine(engine: Any, where: str) -> Dict[str, Any]:
    """EngineConfig's keys checked as the engine checks them, except whether
    this machine has the CUDA device: the driver that reads the config is
    often not where the engines run (a CPU head, GPU workers)."""
    if isinstance(engine, EngineConfig):
        engine = engine.to_dict()
    engine = _check_keys(where, engine, tuple(EngineConfig.__dataclass_fields__))
    try:
        probe = EngineConfig.__new__(EngineConfig)
        for name, f in EngineConfig.__dataclass_fields__.items():
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            setattr(probe, name, engine.get(name, default))
        if "ckpt_dir" not in engine:
            _refuse(where, "has no ckpt_dir (the model directory, the same path on every node)")
        _oasr.check_engine_config(probe.to_json(), on_this_machine=False)
    except ConfigError as e:
        if str(e).startswith(where):
            raise
        raise ConfigError(f"{where}: {e}") from None
    except (TypeError, ValueError) as e:  # a value of the wrong kind (ckpt_dir: 123)
        raise ConfigError(f"{where}: {e}") from None
    return probe.to_dict()


def engine_for_replica(engine: Mapping[str, Any], num_cpus: Optional[float]) -> Dict[str, Any]:
    """A CPU engine of a replica or actor computes on the cores it reserved
    (``num_cpus``), not on every core of the node it shares, unless
    ``threads`` says otherwise (0, the default, means every core)."""
    engine = dict(engine)
    if engine.get("device", "cpu") == "cpu" and not engine.get("threads") and num_cpus:
        engine["threads"] = max(1, int(num_cpus))
    return engine


def _check_deployment(where: str, deployment: Dict[str, Any]) -> None:
    # Ray Serve's own validation of the options, without a running Ray, so
    # a mistake is named before the cluster is touched.
    from pydantic import ValidationError
    from ray import serve

    try:
        # A copy: Ray fills defaults into the options it is given.
        serve.deployment(lambda: None, name="oasr").options(**copy.deepcopy(deployment))
    except (TypeError, ValueError, ValidationError) as e:
        detail = " ".join(str(e).split())
        raise ConfigError(f"{where}: {detail}") from None


def check_config(config: Any, where: str = "config") -> Dict[str, Any]:
    """A config mapping checked and normalised (see the module's doc)."""
    config = _check_keys(where, config, TOP_KEYS)
    if "engine" not in config:
        _refuse(where, "has no 'engine' section (at least engine.ckpt_dir)")
    engine = check_engine(config["engine"], f"{where}: engine")
    name = config.get("name", "oasr")
    if not isinstance(name, str) or not name:
        _refuse(f"{where}: name", f"must be a non-empty string, not {name!r}")
    service = config.get("service")
    service = {} if service is None else service
    if not isinstance(service, Mapping):
        _refuse(f"{where}: service", f"must be a mapping of oasr-server's limits, not {service!r}")
    try:
        _oasr.check_service_limits(json.dumps(dict(service)))
    except ConfigError as e:
        raise ConfigError(f"{where}: service: {e}") from None
    http = _check_keys(f"{where}: http", config.get("http"), HTTP_KEYS)
    port = http.get("port", 8000)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        _refuse(f"{where}: http.port", f"must be an integer in [0, 65535], not {port!r}")
    location = config.get("proxy_location", "EveryNode")
    if location not in PROXY_LOCATIONS:
        _refuse(f"{where}: proxy_location", f"is {location!r}; expected {', '.join(PROXY_LOCATIONS)}")
    deployment = _check_keys(f"{where}: deployment", config.get("deployment"),
                             DEPLOYMENT_KEYS + REPLICA_SHORTHANDS)
    actor = deployment.pop("ray_actor_options", None)
    actor = {} if actor is None else actor
    if not isinstance(actor, Mapping):
        _refuse(f"{where}: deployment.ray_actor_options", f"must be a mapping, not {actor!r}")
    actor = dict(actor)
    for key in REPLICA_SHORTHANDS:
        if key in deployment:
            if key in actor:
                _refuse(f"{where}: deployment.{key}", "is also set in ray_actor_options; set it once")
            actor[key] = deployment.pop(key)
    if engine.get("device", "cpu").startswith("cuda"):
        actor.setdefault("num_gpus", 1)  # a CUDA engine needs a GPU of its own
    if actor:
        deployment["ray_actor_options"] = actor
    if "num_replicas" in deployment and "autoscaling_config" in deployment:
        _refuse(f"{where}: deployment", "sets both num_replicas and autoscaling_config; "
                "an autoscaled deployment takes its replica counts from autoscaling_config")
    _check_deployment(f"{where}: deployment", deployment)
    return {
        "address": config.get("address"),
        "name": name,
        "http": {"host": http.get("host", "127.0.0.1"), "port": port},
        "proxy_location": location,
        "engine": engine,
        "service": dict(service),
        "deployment": deployment,
    }


def load_config(path: "os.PathLike[str] | str", overrides: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Reads and checks a config file; ``overrides`` replaces top-level keys."""
    path = os.fspath(path)
    config = _read(path)
    if overrides:
        if not isinstance(config, Mapping):
            _refuse(path, "must be a mapping of " + ", ".join(TOP_KEYS))
        config = {**config, **overrides}
    return check_config(config, path)

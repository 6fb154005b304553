"""The oasr.ray config file is checked before Ray starts: every mistake is a
ConfigError naming the file and the key."""
import json

import pytest

pytest.importorskip("yaml", reason="PyYAML comes with Ray (.venv-ray)")
from conftest import MODEL  # noqa: E402

from oasr.errors import ConfigError  # noqa: E402
from oasr.ray.config import load_config  # noqa: E402


def write(tmp_path, config, name="c.json"):
    path = tmp_path / name
    path.write_text(json.dumps(config) if name.endswith(".json") else config)
    return str(path)


def test_a_good_yaml_config(tmp_path):
    text = f"""
address: auto
http: {{host: 0.0.0.0, port: 8123}}
engine: {{ckpt_dir: {MODEL}, quantization: int8_w8a8, max_batch_size: 4}}
service: {{max_queue: 32, api_key: secret}}
deployment: {{num_replicas: 3, num_cpus: 2, max_ongoing_requests: 8}}
"""
    config = load_config(write(tmp_path, text, "c.yaml"))
    assert config["http"] == {"host": "0.0.0.0", "port": 8123}
    assert config["deployment"] == {"num_replicas": 3, "max_ongoing_requests": 8,
                                    "ray_actor_options": {"num_cpus": 2}}
    assert config["service"] == {"max_queue": 32, "api_key": "secret"}


def test_a_cuda_engine_asks_for_a_gpu(tmp_path):
    config = load_config(write(tmp_path, {"engine": {"ckpt_dir": MODEL, "device": "cuda"}}))
    assert config["deployment"]["ray_actor_options"] == {"num_gpus": 1}


@pytest.mark.parametrize("config,words", [
    ({}, ["has no 'engine' section"]),
    ({"engine": {"ckpt_dir": MODEL}, "colour": 1}, ["unknown key(s) colour", "deployment"]),
    ({"engine": {"ckpt_dir": MODEL, "beam": 4}}, ["engine", "unknown key(s) beam"]),
    ({"engine": {"device": "cpu"}}, ["engine", "has no ckpt_dir"]),
    ({"engine": {"ckpt_dir": MODEL, "dtype": "float16"}}, ["engine", "dtype float16 on the CPU"]),
    ({"engine": {"ckpt_dir": MODEL, "device": "cuda:x"}}, ["engine", "cuda:x"]),
    ({"engine": {"ckpt_dir": MODEL, "quantization": "int3"}}, ["engine", "int3"]),
    ({"engine": {"ckpt_dir": MODEL}, "service": {"max_queue": 0}},
     ["service", "'max_queue' is 0", "[1, 1000000]"]),
    ({"engine": {"ckpt_dir": MODEL}, "service": {"max_upload_mb": "big"}},
     ["service", "'max_upload_mb' must be a number"]),
    ({"engine": {"ckpt_dir": MODEL}, "service": {"api_key": ""}}, ["'api_key' is empty"]),
    ({"engine": {"ckpt_dir": MODEL}, "service": {"colour": 1}},
     ["unknown service option 'colour'", "max_batch_delay_ms"]),
    ({"engine": {"ckpt_dir": MODEL}, "http": {"port": 70000}}, ["http.port", "70000"]),
    ({"engine": {"ckpt_dir": MODEL}, "proxy_location": "Everywhere"}, ["proxy_location", "HeadOnly"]),
    ({"engine": {"ckpt_dir": MODEL}, "deployment": {"replicas": 2}},
     ["deployment", "unknown key(s) replicas", "num_replicas"]),
    ({"engine": {"ckpt_dir": MODEL}, "deployment": {"num_gpus": 1, "ray_actor_options": {"num_gpus": 1}}},
     ["deployment.num_gpus", "set it once"]),
    ({"engine": {"ckpt_dir": MODEL}, "deployment": {"num_replicas": 2, "autoscaling_config": {}}},
     ["both num_replicas and autoscaling_config"]),
    ({"engine": {"ckpt_dir": 123}}, ["engine"]),
    ({"engine": {"ckpt_dir": MODEL}, "name": 5}, ["name", "non-empty string"]),
    ({"engine": {"ckpt_dir": MODEL}, "service": False}, ["service", "must be a mapping"]),
    ({"engine": {"ckpt_dir": MODEL}, "deployment": {"ray_actor_options": "x"}},
     ["deployment.ray_actor_options", "must be a mapping"]),
    ({"engine": {"ckpt_dir": MODEL}, "deployment": {"num_replicas": "two"}},
     ["deployment", "num_replicas"]),
    ({"engine": {"ckpt_dir": MODEL}, "deployment": {"max_ongoing_requests": 0}},
     ["deployment", "max_ongoing_requests"]),
    ({"engine": {"ckpt_dir": MODEL},
      "deployment": {"autoscaling_config": {"min_replicas": 4, "max_replicas": 2}}},
     ["deployment", "max_replicas"]),
])
def test_mistakes_are_named(tmp_path, config, words):
    path = write(tmp_path, config)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    message = str(e.value)
    assert path in message
    for word in words:
        assert word in message, message


def test_a_cpu_engine_computes_on_the_cores_it_reserved():
    from oasr.ray.config import engine_for_replica

    assert engine_for_replica({"ckpt_dir": "m", "threads": 0}, 2)["threads"] == 2
    assert engine_for_replica({"ckpt_dir": "m"}, 1.5)["threads"] == 1
    assert engine_for_replica({"ckpt_dir": "m", "threads": 4}, 2)["threads"] == 4
    assert "threads" not in engine_for_replica({"ckpt_dir": "m"}, None)
    assert "threads" not in engine_for_replica({"ckpt_dir": "m", "device": "cuda"}, 2)


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.json"
    bad.write_text("{engine")
    with pytest.raises(ConfigError, match=r"not valid JSON \(line 1"):
        load_config(str(bad))
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write(tmp_path, "engine: [", "bad.yaml"))

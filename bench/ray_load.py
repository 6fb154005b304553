"""oasr.ray against oasr-server on one machine: the same load through Ray
Serve with 1 and 2 replicas and through oasr-server with as many engine
threads, then Ray Data with 1 and 2 engine actors against `oasr eval` alone.

A loopback Ray cluster (ray.cluster_utils.Cluster: a head and two worker
nodes of --cpus-per-node CPUs, each worker offering one `oasr_engine`) holds
the engines. Every figure is measured in this run, side by side:

- serve: CLIENTS concurrent clients x REQUESTS requests (the files in turn),
  throughput in audio seconds per second and p50 latency; and one client's
  sequential latency on the first file (per-request overhead of the path);
- data: a manifest of UTTERANCES lines (the files repeated) through
  transcribe_dataset, audio seconds per second of wall time, against
  `oasr eval --threads T` on the same manifest.

Prints one JSON line per arm. Run from .venv-ray with the build's package:

  PYTHONPATH=build/cuda/python .venv-ray/bin/python bench/ray_load.py \\
      --cli build/cuda/oasr --server build/cuda/oasr-server \\
      --ckpt-dir models/oasr-u2pp-char-8k /usr/share/asterisk/sounds/en/*.wav
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_load  # noqa: E402  (multipart bodies, one request, audio seconds)


class Endpoint:
    def __init__(self, url):
        host_port = url.split("//", 1)[1]
        self.host, port = host_port.rsplit(":", 1)
        self.port = int(port)


def drive(endpoint, bodies, seconds, clients, requests, boundary):
    """(audio s per s, p50 s, failures) of clients x requests."""
    latencies, failures = [], 0
    audio = 0.0

    def client(index):
        nonlocal failures, audio
        conn = [None]
        for r in range(requests):
            k = (index + r) % len(bodies)
            status, _, elapsed = server_load.transcribe(conn, endpoint, bodies[k], boundary, 300)
            if status == 200:
                latencies.append(elapsed)
                audio += seconds[k]
            else:
                failures += 1

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    wall = time.perf_counter() - start
    return audio / wall, statistics.median(latencies), failures


def sequential_latency(endpoint, body, boundary, n=20):
    conn = [None]
    times = []
    for _ in range(n):
        status, _, elapsed = server_load.transcribe(conn, endpoint, body, boundary, 300)
        assert status == 200
        times.append(elapsed)
    return statistics.median(times[2:])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", required=True)
    p.add_argument("--server", required=True)
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--requests", type=int, default=12)
    p.add_argument("--utterances", type=int, default=200)
    p.add_argument("--max-batch-size", type=int, default=8)
    p.add_argument("--cpus-per-node", type=int, default=1)
    p.add_argument("files", nargs="+")
    args = p.parse_args()

    import ray
    from ray import serve
    from ray.cluster_utils import Cluster

    from oasr.ray.data import transcribe_dataset
    from oasr.ray.serve import run_serve

    model = os.path.basename(os.path.normpath(args.ckpt_dir))
    boundary = "oasrbench"
    bodies = [server_load.multipart(f, model, boundary) for f in args.files]
    seconds = [server_load.audio_seconds(f) for f in args.files]
    cpus = args.cpus_per_node
    tmp = tempfile.mkdtemp(prefix="oasr-ray-bench-")

    def emit(**row):
        row["cpu"] = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")
        print(json.dumps(row), flush=True)

    # oasr-server alone, engine threads = the replicas' cores in total.
    for threads in (cpus, 2 * cpus):
        endpoint = server_load.Server(args.server, args.ckpt_dir,
                                      ["--threads", str(threads), "--max-batch-size",
                                       str(args.max_batch_size)],
                                      os.path.join(tmp, f"server{threads}.log"))
        drive(endpoint, bodies, seconds, 2, 2, boundary)  # warm-up
        rate, p50, failed = drive(endpoint, bodies, seconds, args.clients, args.requests, boundary)
        single = sequential_latency(endpoint, bodies[0], boundary)
        endpoint.stop()
        emit(arm="oasr-server", threads=threads, audio_s_per_s=round(rate, 2),
             p50_s=round(p50, 4), single_request_s=round(single, 4), failed=failed)

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=cpus, resources={"oasr_engine": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        for replicas in (1, 2):
            port = server_load_free_port()
            config = {"http": {"host": "127.0.0.1", "port": port}, "proxy_location": "HeadOnly",
                      "engine": {"ckpt_dir": args.ckpt_dir, "max_batch_size": args.max_batch_size},
                      "deployment": {"num_replicas": replicas, "num_cpus": cpus,
                                     "resources": {"oasr_engine": 1}}}
            path = os.path.join(tmp, f"serve{replicas}.json")
            with open(path, "w") as f:
                json.dump(config, f)
            run_serve(path, blocking=False)
            endpoint = Endpoint(f"http://127.0.0.1:{port}")
            drive(endpoint, bodies, seconds, 2, 2, boundary)
            rate, p50, failed = drive(endpoint, bodies, seconds, args.clients, args.requests, boundary)
            single = sequential_latency(endpoint, bodies[0], boundary)
            serve.shutdown()
            emit(arm="ray-serve", replicas=replicas, threads_per_replica=cpus,
                 audio_s_per_s=round(rate, 2), p50_s=round(p50, 4),
                 single_request_s=round(single, 4), failed=failed)

        manifest = os.path.join(tmp, "manifest.jsonl")
        with open(manifest, "w") as f:
            for i in range(args.utterances):
                f.write(json.dumps({"id": f"u{i}", "audio": args.files[i % len(args.files)],
                                    "text": "x"}) + "\n")
        audio = sum(seconds[i % len(seconds)] for i in range(args.utterances))
        for actors in (1, 2):
            output = os.path.join(tmp, f"data{actors}.jsonl")
            counts = transcribe_dataset(manifest, output, {"ckpt_dir": args.ckpt_dir,
                                                           "max_batch_size": args.max_batch_size},
                                        concurrency=actors, num_cpus=cpus,
                                        actor_options={"resources": {"oasr_engine": 1}})
            emit(arm="ray-data", actors=actors, threads_per_actor=cpus,
                 utterances=counts["written"], wall_s=round(counts["wall_s"], 2),
                 audio_s_per_s=round(audio / counts["wall_s"], 2))
    finally:
        ray.shutdown()
        cluster.shutdown()
    for threads in (cpus, 2 * cpus):
        start = time.perf_counter()
        subprocess.run([args.cli, "eval", "--ckpt-dir", args.ckpt_dir, "--manifest", manifest,
                        "--threads", str(threads), "--max-batch-size", str(args.max_batch_size)],
                       capture_output=True, check=False)
        wall = time.perf_counter() - start
        emit(arm="oasr eval", threads=threads, utterances=args.utterances, wall_s=round(wall, 2),
             audio_s_per_s=round(audio / wall, 2))


def server_load_free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    main()

"""A real multi-node Ray cluster on this machine for the oasr.ray tests.

ray.cluster_utils.Cluster starts what `ray start --head` and `ray start
--address` start (a GCS, and per node a raylet with its own object store
and workers), as separate processes on this machine, talking over its own
address (Ray's test cluster binds the host's address, not 127.0.0.1; no
traffic leaves the machine). The head takes the
driver-side work (Serve's controller and proxy, Data's decode tasks); the
two worker nodes each offer one CPU and one unit of `oasr_engine`, which
every engine (Serve replica, Data actor) asks for, so engines land on the
worker nodes, one each. Killing a node kills its raylet and workers
(SIGKILL), as a machine that dies would.
"""
import os
import socket
import subprocess

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (scripts/setup.sh puts it in .venv-ray)")
from ray.cluster_utils import Cluster  # noqa: E402

CLI = os.environ.get("OASR_CLI_BINARY", "")
SERVER = os.environ.get("OASR_SERVER_BINARY", "")
MODEL = os.environ.get("OASR_MODEL_DIR", "")
SOUNDS = "/usr/share/asterisk/sounds/en"
PROMPTS = ["vm-goodbye", "demo-echotest", "vm-options", "agent-loginok", "vm-nomore"]


def sound(name):
    return os.path.join(SOUNDS, name + ".wav")


@pytest.fixture(scope="session")
def prompts():
    if not os.path.isdir(SOUNDS):
        pytest.skip(f"{SOUNDS} is missing (asterisk-core-sounds-en-wav, installed by scripts/setup.sh)")
    return [sound(p) for p in PROMPTS]


def cli_transcripts(paths):
    """`oasr transcribe` of the files in one process: {path: text}."""
    assert CLI and os.path.exists(CLI), f"OASR_CLI_BINARY '{CLI}' does not exist"
    r = subprocess.run([CLI, "transcribe", "--ckpt-dir", MODEL, *paths], capture_output=True,
                       text=True, check=True)
    return dict(line.split("\t", 1) for line in r.stdout.splitlines())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackCluster:
    """The head plus worker nodes; `kill` and `add_worker` for the failure tests."""

    def __init__(self):
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "include_dashboard": False, "resources": {"head": 1}})
        # The driver joins before the workers exist, so it attaches to the
        # head's raylet (a driver's node cannot be killed under it).
        ray.init(address=self.cluster.address, log_to_driver=False)
        self.workers = [self.add_worker() for _ in range(2)]

    def add_worker(self):
        node = self.cluster.add_node(num_cpus=1, resources={"oasr_engine": 1})
        self.cluster.wait_for_nodes()
        return node

    def kill(self, node):
        self.cluster.remove_node(node, allow_graceful=False)
        self.workers.remove(node)

    def alive_engine_nodes(self):
        return sum(1 for n in ray.nodes() if n["Alive"] and n["Resources"].get("oasr_engine"))


@pytest.fixture(scope="session")
def cluster():
    assert MODEL and os.path.isdir(MODEL), f"OASR_MODEL_DIR '{MODEL}' is not a model directory"
    c = LoopbackCluster()
    yield c
    ray.shutdown()
    c.cluster.shutdown()

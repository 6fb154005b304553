"""The GIL is released while the engine works: four Python threads, each with
its own engine, give the sequential results (and the wall times are
printed, not asserted); Ctrl-C stops a long call at its next batch."""
import os
import signal
import subprocess
import sys
import threading
import time

import oasr
from conftest import MODEL


def test_four_threads_give_the_sequential_results(prompts):
    engines = [oasr.ASREngine(oasr.EngineConfig(ckpt_dir=MODEL, threads=1)) for _ in range(4)]
    work = prompts * 2
    started = time.perf_counter()
    sequential = [[r.tokens for r in e.transcribe(work)] for e in engines]
    sequential_s = time.perf_counter() - started
    results = [None] * 4

    def run(i):
        results[i] = [r.tokens for r in engines[i].transcribe(work)]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    threaded_s = time.perf_counter() - started
    assert results == sequential
    print(f"\n4 engines x {len(work)} prompts: sequential {sequential_s:.2f} s, "
          f"4 threads {threaded_s:.2f} s ({os.cpu_count()} cores)")


INTERRUPTED = r"""
import sys, time, oasr
engine = oasr.ASREngine(oasr.EngineConfig(ckpt_dir=sys.argv[1], max_batch_size=1))
work = [sys.argv[2]] * 2000
print("ready", flush=True)
started = time.perf_counter()
try:
    engine.transcribe(work)
    print("finished", flush=True)
except KeyboardInterrupt:
    print(f"interrupted {time.perf_counter() - started:.2f}", flush=True)
    # The engine serves again after an interrupted call.
    print("after", engine.transcribe(sys.argv[2]).text, flush=True)
"""


def test_ctrl_c_interrupts_a_long_call(prompts):
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED, MODEL, prompts[0]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    waited = time.perf_counter() - sent
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("interrupted"), out + err
    assert lines[1].startswith("after ") and len(lines[1]) > len("after ")
    # 2000 utterances take minutes; the interrupt lands at the next batch.
    assert waited < 10, f"the call went on {waited:.1f} s after SIGINT"

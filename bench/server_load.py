"""Load on oasr-server over loopback, bounded in count and time.

Starts `oasr-server` on the given model, transcribes every file alone (one
request at a time: the reference), runs a warm-up round, then ROUNDS timed
rounds of CLIENTS concurrent clients, each sending REQUESTS requests (the
files in turn) to POST /v1/audio/transcriptions, and prints one JSON line:

  requests sent / ok / failed (non-200, or a 200 without a text) / lost (no
  reply) / mismatched (text differs from the file's single-request text),
  p50 / p99 / max latency of the replies that succeeded,
  throughput (audio seconds per second), the batches the server formed and
  the engine's busy share of the wall time, and the server's resident memory
  (its /metrics) after the warm-up and after each round.

A soak: --duration-s repeats timed rounds until that many seconds have
passed, and --hostile-every N makes every client's N-th request a hostile
one (garbage or truncated audio, a malformed or incomplete multipart body, a
missing file, an unknown field, a NaN option, the wrong content type) that
must be refused with a 4xx; the normal requests between them must still
give their single-request texts.

With --compare-unbatched the same load runs against a second server with
--max-batch-size 1 (one request at a time through the engine), and a last
line gives the batching speed-up. Exits 1 naming the first broken bound:
any failed, lost or mismatched request, RSS growth over --rss-bound-mib
(over the timed rounds after the first when there are several; in a soak,
over its second half: glibc's per-thread arenas each grow to the largest
work their thread has served and keep it, so resident memory rises in steps
while every worker meets its largest request, then levels off, and a leak
is what still grows in the second half), or a server that does not exit 0
on SIGTERM.

  python3 bench/server_load.py --server build/oasr-server \
      --ckpt-dir models/oasr-u2pp-char-8k --clients 16 --requests 20 \
      --compare-unbatched /usr/share/asterisk/sounds/en/vm-goodbye.wav ...

Only the standard library: http.client with a multipart body per file.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
import wave


def multipart(path, model, boundary):
    with open(path, "rb") as f:
        audio = f.read()
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{model}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\n"
            f"json\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{os.path.basename(path)}\"\r\nContent-Type: audio/wav\r\n\r\n")
    return head.encode() + audio + f"\r\n--{boundary}--\r\n".encode()


def hostile_bodies(path, model, boundary):
    """(name, body, content type) of requests the server must refuse with a 4xx."""
    good = multipart(path, model, boundary)
    form = f"multipart/form-data; boundary={boundary}"

    def field(name, value):
        return (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n"
                f"{value}\r\n").encode()

    def file_part(data):
        return (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"x.wav\"\r\nContent-Type: audio/wav\r\n\r\n").encode() + data + \
            f"\r\n--{boundary}--\r\n".encode()

    with open(path, "rb") as f:
        audio = f.read()
    return [
        ("garbage audio", field("model", model) + file_part(os.urandom(4096)), form),
        ("truncated wav", field("model", model) + file_part(audio[:len(audio) // 3]), form),
        ("no file", field("model", model) + f"--{boundary}--\r\n".encode(), form),
        ("unknown field", field("colour", "red") + good, form),
        ("nan option", field("beam_size", "nan") + good, form),
        ("cut multipart", good[:len(good) // 2], form),
        ("wrong content type", audio, "audio/wav"),
    ]


def audio_seconds(path):
    with wave.open(path, "rb") as w:
        return w.getnframes() / w.getframerate()


class Server:
    def __init__(self, binary, ckpt_dir, flags, log_path):
        self.log = open(log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen([binary, "--ckpt-dir", ckpt_dir, "--port", "0", *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.address = None
        listening = threading.Event()

        def drain():  # the log, all of it: a full pipe would stall the server
            for line in self.proc.stderr:
                self.log.write(line)
                found = re.search(r"listening on http://([0-9.]+):(\d+)", line)
                if found and self.address is None:
                    self.address = (found.group(1), int(found.group(2)))
                    listening.set()
            listening.set()  # the server exited

        self.drainer = threading.Thread(target=drain, daemon=True)
        self.drainer.start()
        if not listening.wait(120) or self.address is None:
            self.proc.kill()
            sys.exit(f"server_load: oasr-server did not start; its log is {log_path}")
        self.host, self.port = self.address

    def metrics(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        return text

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = "killed after 60 s"
        self.drainer.join(10)
        self.log.close()
        return code


def metric(text, name):
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def delta(before, after, name):
    a, b = metric(after, name), metric(before, name)
    return a - b if a is not None and b is not None else 0.0


def transcribe(conn_box, server, body, boundary, timeout, content_type=None):
    """(status, text or error, seconds); reconnects after a transport error."""
    start = time.perf_counter()
    try:
        if conn_box[0] is None:
            conn_box[0] = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
        conn = conn_box[0]
        conn.request("POST", "/v1/audio/transcriptions", body=body,
                     headers={"Content-Type": content_type or
                              f"multipart/form-data; boundary={boundary}"})
        response = conn.getresponse()
        payload = response.read().decode("utf-8", "replace")
        elapsed = time.perf_counter() - start
        if response.status != 200:
            return response.status, payload[:200], elapsed
        try:
            return 200, json.loads(payload)["text"], elapsed
        except (ValueError, KeyError, TypeError):
            return "200 without a text", payload[:200], elapsed
    except (OSError, http.client.HTTPException) as e:
        if conn_box[0] is not None:
            conn_box[0].close()
        conn_box[0] = None
        return None, repr(e), time.perf_counter() - start


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def run(args, max_batch_size, files, bodies, boundary, seconds):
    flags = ["--max-batch-size", str(max_batch_size), "--max-batch-delay-ms",
             str(args.max_batch_delay_ms), "--max-queue", str(max(64, 4 * args.clients)),
             "--http-threads", str(min(256, max(4, args.clients))), *args.server_args.split()]
    log_path = os.path.join(args.log_dir, f"server_batch{max_batch_size}.log")
    server = Server(args.server, args.ckpt_dir, flags, log_path)
    try:
        box = [None]
        reference = {}
        for path in files:  # alone, one at a time
            status, text, _ = transcribe(box, server, bodies[path], boundary, args.timeout_s)
            if status != 200:
                sys.exit(f"server_load: {path} alone gave {status}: {text}")
            reference[path] = text

        hostile = hostile_bodies(files[0], os.path.basename(os.path.normpath(args.ckpt_dir)),
                                 boundary)
        hostile_replies = []

        def client(index, requests):
            conn_box = [None]
            results = []
            for k in range(requests):
                if args.hostile_every and k % args.hostile_every == args.hostile_every - 1:
                    name, body, content_type = hostile[(index + k) % len(hostile)]
                    status, text, _ = transcribe(conn_box, server, body, boundary,
                                                 args.timeout_s, content_type)
                    hostile_replies.append((name, status, text))
                    # The server may close a connection after a refusal.
                    if conn_box[0] is not None:
                        conn_box[0].close()
                    conn_box[0] = None
                    continue
                path = files[(index + k) % len(files)]
                status, text, elapsed = transcribe(conn_box, server, bodies[path], boundary,
                                                   args.timeout_s)
                results.append((path, status, text, elapsed))
            if conn_box[0] is not None:
                conn_box[0].close()
            return results

        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            # The warm-up round: the server's pools and caches reach the load's sizes.
            warm = [r for rs in pool.map(client, range(args.clients),
                                         [args.warmup_requests] * args.clients) for r in rs]
            before = server.metrics()
            rss_before = metric(before, "process_resident_memory_bytes")
            # The timed rounds; resident memory after each shows whether it
            # levels off (allocator pools) or keeps growing (a leak).
            results, walls, rss_rounds = [], [], []
            soak_start = time.perf_counter()
            rounds = 0
            while rounds < args.rounds or time.perf_counter() - soak_start < args.duration_s:
                rounds += 1
                start = time.perf_counter()
                results += [r for rs in pool.map(client, range(args.clients),
                                                 [args.requests] * args.clients) for r in rs]
                walls.append(time.perf_counter() - start)
                rss = metric(server.metrics(), "process_resident_memory_bytes")
                rss_rounds.append(round(rss / 1048576, 1) if rss else None)
            wall = sum(walls)
        after = server.metrics()
    finally:
        exit_code = server.stop()
    replies = results + warm  # every reply counts for failed / lost / mismatched
    ok = [r for r in replies if r[1] == 200]
    failed = [r for r in replies if r[1] is not None and r[1] != 200]
    mismatched = [r for r in ok if r[2] != reference[r[0]]]
    measured = [r for r in results if r[1] == 200]  # latency and throughput: the timed round
    latencies = sorted(r[3] for r in measured)
    rss_after = metric(after, "process_resident_memory_bytes")
    line = {
        "bench": "server", "max_batch_size": max_batch_size,
        "max_batch_delay_ms": args.max_batch_delay_ms, "server_args": args.server_args,
        "clients": args.clients, "requests_per_client": args.requests, "rounds": len(walls),
        "hostile_sent": len(hostile_replies),
        "hostile_refused_4xx": sum(1 for h in hostile_replies
                                   if isinstance(h[1], int) and 400 <= h[1] < 500),
        "warmup_requests_per_client": args.warmup_requests,
        "sent": len(replies), "ok": len(ok), "failed": len(failed),
        "lost": len(replies) - len(ok) - len(failed), "mismatched": len(mismatched),
        "wall_s": round(wall, 3),
        "p50_ms": round(1000 * percentile(latencies, 50), 1) if latencies else None,
        "p99_ms": round(1000 * percentile(latencies, 99), 1) if latencies else None,
        "max_ms": round(1000 * latencies[-1], 1) if latencies else None,
        "audio_s_per_s": round(sum(seconds[r[0]] for r in measured) / wall, 2),
        # The timed rounds' batches and the engine's share of their wall
        # time: near 1, the engine is the bottleneck; far below, the rest is.
        "batches": delta(before, after, "oasr_batch_size_count"),
        "mean_batch_size": (round(delta(before, after, "oasr_batch_size_sum") /
                                  delta(before, after, "oasr_batch_size_count"), 2)
                            if delta(before, after, "oasr_batch_size_count") else None),
        "engine_busy_fraction": round(delta(before, after, "oasr_batch_seconds_sum") / wall, 3),
        "rss_before_mib": round(rss_before / 1048576, 1) if rss_before else None,
        "rss_after_mib": round(rss_after / 1048576, 1) if rss_after else None,
        "rss_after_each_round_mib": rss_rounds,
        "server_exit": exit_code,
    }
    problems = []
    lost = [r for r in replies if r[1] is None]
    for name, which in (("failed", failed), ("lost", lost), ("mismatched", mismatched)):
        if which:
            sample = which[0]
            problems.append(f"{len(which)} {name} (e.g. {sample[0]}: {sample[1]} {sample[2]!r})")
    wrong = [h for h in hostile_replies if not (isinstance(h[1], int) and 400 <= h[1] < 500)]
    if wrong:
        problems.append(f"{len(wrong)} hostile requests not refused with a 4xx (e.g. {wrong[0][0]}: "
                        f"{wrong[0][1]} {wrong[0][2]!r})")
    if rss_before is None or rss_rounds[-1] is None:
        problems.append("/metrics has no process_resident_memory_bytes: the memory bound is "
                        "unchecked")
    # The bound holds for the growth over the timed rounds after the first
    # (the first still grows the allocator's pools to the load's sizes), or
    # over the one timed round.
    # The RSS the growth is measured from: after round `since` (0: the warm-up).
    since = 1 if len(rss_rounds) > 1 else 0
    if args.duration_s > 0 and len(rss_rounds) >= 4:
        # The second half of the soak's rounds (at least two rounds compared).
        since = len(rss_rounds) // 2
    first = rss_rounds[since - 1] if since > 0 else line["rss_before_mib"]
    line["rss_checked_after_round"] = since
    if first is not None and rss_rounds[-1] is not None:
        line["rss_growth_checked_mib"] = round(rss_rounds[-1] - first, 1)
        if line["rss_growth_checked_mib"] > args.rss_bound_mib:
            problems.append(f"RSS grew {first} -> {rss_rounds[-1]} MiB over the timed rounds "
                            f"checked (after round {since}; bound {args.rss_bound_mib} MiB)")
    print(json.dumps(line), flush=True)
    if exit_code != 0:
        problems.append(f"the server exited {exit_code} on SIGTERM")
    return line, problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True, help="the oasr-server binary")
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--requests", type=int, default=20, help="requests per client")
    p.add_argument("--max-batch-size", type=int, default=8)
    p.add_argument("--max-batch-delay-ms", type=int, default=10)
    p.add_argument("--server-args", default="", help="more oasr-server flags, one string")
    p.add_argument("--compare-unbatched", action="store_true",
                   help="also run the load with --max-batch-size 1 and print the speed-up")
    p.add_argument("--rounds", type=int, default=1,
                   help="timed rounds of CLIENTS x REQUESTS (RSS is read after each)")
    p.add_argument("--duration-s", type=float, default=0.0,
                   help="a soak: repeat timed rounds until this many seconds have passed")
    p.add_argument("--hostile-every", type=int, default=0,
                   help="every client's N-th request is a hostile one that must get a 4xx")
    p.add_argument("--warmup-requests", type=int, default=2,
                   help="requests per client before the measured round (not timed)")
    p.add_argument("--rss-bound-mib", type=float, default=64.0)
    p.add_argument("--timeout-s", type=float, default=300.0)
    p.add_argument("--log-dir", default=".", help="where the servers' logs go")
    p.add_argument("files", nargs="+", help="16-bit PCM WAV files")
    args = p.parse_args()
    for path in args.files:
        if not os.path.isfile(path):
            sys.exit(f"server_load: {path} does not exist")
    if args.clients < 1 or args.requests < 1 or args.rounds < 1:
        sys.exit("server_load: --clients, --requests and --rounds must be >= 1")
    os.makedirs(args.log_dir, exist_ok=True)
    boundary = uuid.uuid4().hex
    model = os.path.basename(os.path.normpath(args.ckpt_dir))
    bodies = {f: multipart(f, model, boundary) for f in args.files}
    seconds = {f: audio_seconds(f) for f in args.files}
    batched, problems = run(args, args.max_batch_size, args.files, bodies, boundary, seconds)
    if args.compare_unbatched:
        alone, more = run(args, 1, args.files, bodies, boundary, seconds)
        problems += more
        def ratio(a, b):
            return round(a / b, 3) if a and b else None

        print(json.dumps({"bench": "server", "compare": "batched/unbatched",
                          "speedup": ratio(batched["audio_s_per_s"], alone["audio_s_per_s"]),
                          "p50_ratio": ratio(alone["p50_ms"], batched["p50_ms"])}),
              flush=True)
    if problems:
        sys.exit("server_load: " + "; ".join(problems))


if __name__ == "__main__":
    main()

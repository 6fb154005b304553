#!/usr/bin/env python3
"""Renders the synthetic speech corpus with Debian's TTS engines run from an unpacked tree.

  synthesize.py --tree TTS_TREE --stub-lib CARRY/lib --text CARRY/text --out DATA_DIR
                [--workers N] [--engines espeak,flite,festival] [--max-train N]

TTS_TREE is a folder the carried .debs were unpacked into (dpkg-deb -x); nothing
is installed system-wide. The engines run with LD_LIBRARY_PATH pointing into
the tree (plus the stub playback libraries), espeak-ng finds its data through
ESPEAK_DATA_PATH and festival through --libdir/--datadir.

Each sentence of synth_{train,dev,test}.tsv (id, speakable text) gets a voice
drawn by a generator seeded with sha1(split, id, render): the result is the
same on every machine and with any worker count. Train sentences are rendered
--train-renders times (different voices), dev and test once; test and dev also
use espeak-ng variants that train never uses (TEST_ONLY_VARIANTS), so the
synthetic test partly measures unseen voices. Wavs are written at the engine's
own rate (espeak-ng 22.05 kHz, flite 8/16 kHz, festival 16/32 kHz); the trainer
resamples.

A failing TTS call is logged to DATA_DIR/synth_errors.log and skipped. Existing
wavs are kept (a rerun resumes). Writes DATA_DIR/synth_{train,dev,test}.jsonl
with {"id","audio","text","duration","voice","engine","source"}; audio paths are
relative to DATA_DIR. Prints throughput per engine. Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import textnorm  # noqa: E402

LIB_SUBDIR = "usr/lib/x86_64-linux-gnu"
CALL_TIMEOUT_S = 60
MIN_DURATION_S = 0.3

# espeak-ng English voices (the base accent) and voice variants (speaker colour).
ESPEAK_VOICES = ["en-us", "en-us", "en", "en-gb-x-rp", "en-gb-scotland", "en-gb-x-gbclan",
                 "en-gb-x-gbcwmd", "en-029"]
TRAIN_VARIANTS = ["m1", "m2", "m3", "m4", "m5", "m6", "f1", "f2", "f3", "f4", "klatt", "klatt2",
                  "klatt3", "Andy", "Annie", "adam", "Alex", "benjamin", "edward", "iven", "john",
                  "linda", "max", "michel", "paul", "robert", "steph", "david", "aunty", "Gene",
                  "Lee", "Mike", "Andrea", "anika", "belinda", "Denis"]
TEST_ONLY_VARIANTS = ["m7", "f5", "klatt4", "m8", "quincy", "rob", "shelby", "travis", "Michael",
                      "Hugo"]
FLITE_VOICES = ["kal", "kal16", "awb", "rms", "slt"]
FESTIVAL_VOICES = ["kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts"]
# How often each engine voices a sentence (espeak-ng is fast and most varied).
ENGINE_WEIGHTS = {"espeak": 0.55, "flite": 0.3, "festival": 0.15}
FESTIVAL_BATCH = 24  # sentences per festival process (its start-up costs ~0.6 s)


class Environment:
    """Paths and environment variables for running the unpacked engines."""

    def __init__(self, tree: Path, stub_lib: Path):
        self.tree = tree
        lib = tree / LIB_SUBDIR
        self.env = dict(os.environ)
        self.env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [str(stub_lib), str(lib)] + ([os.environ["LD_LIBRARY_PATH"]] if os.environ.get("LD_LIBRARY_PATH") else []))
        self.env["ESPEAK_DATA_PATH"] = str(lib)
        self.espeak = tree / "usr/bin/espeak-ng"
        self.flite = tree / "usr/bin/flite"
        self.festival = [str(tree / "usr/bin/festival"), "--libdir", str(tree / "usr/share/festival"),
                         "--datadir", str(tree / "usr/share/festival")]


ENV: Environment | None = None  # set in each worker by init_worker


def init_worker(tree: str, stub_lib: str) -> None:
    global ENV
    ENV = Environment(Path(tree), Path(stub_lib))


def seeded_rng(*parts) -> random.Random:
    digest = hashlib.sha1("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def choose_voice(split: str, sentence_id: str, render: int, engines: list[str],
                 engine_weights: dict | None = None) -> dict:
    """Deterministic voice and prosody for one rendering of one sentence."""
    rng = seeded_rng(split, sentence_id, render)
    weights = [(engine_weights or ENGINE_WEIGHTS)[e] for e in engines]
    engine = rng.choices(engines, weights=weights)[0]
    if engine == "espeak":
        variants = TRAIN_VARIANTS if split == "train" else TRAIN_VARIANTS + TEST_ONLY_VARIANTS * 2
        base, variant = rng.choice(ESPEAK_VOICES), rng.choice(variants)
        return {"engine": engine, "voice": f"{base}+{variant}", "rate": rng.randint(120, 230),
                "pitch": rng.randint(25, 80), "gap": rng.choice([0, 0, 1, 2])}
    if engine == "flite":
        voice = rng.choice(FLITE_VOICES)
        return {"engine": engine, "voice": voice, "stretch": round(rng.uniform(0.8, 1.3), 2),
                "f0_shift": round(rng.uniform(0.8, 1.25), 2)}
    voice = rng.choice(FESTIVAL_VOICES)
    return {"engine": engine, "voice": voice, "stretch": round(rng.uniform(0.8, 1.3), 2)}


def voice_tag(params: dict) -> str:
    return f"{params['engine']}:{params['voice']}"


def wav_info(path: Path) -> tuple[float, float]:
    """(duration s, RMS in full-scale units) of a 16-bit PCM wav."""
    with wave.open(str(path), "rb") as handle:
        frames = handle.readframes(handle.getnframes())
        rate = handle.getframerate()
        width = handle.getsampwidth()
    if width != 2 or not frames:
        return len(frames) / max(1, width) / rate, 0.0
    samples = memoryview(frames).cast("h")
    step = max(1, len(samples) // 4000)  # subsample: a level check, not a measurement
    picked = samples[::step]
    rms = (sum(s * s for s in picked) / len(picked)) ** 0.5 / 32768.0
    return len(samples) / rate, rms


def run_tool(argv, stdin_text: str | None = None) -> None:
    result = subprocess.run(argv, input=stdin_text, env=ENV.env, capture_output=True, text=True,
                            timeout=CALL_TIMEOUT_S)
    if result.returncode != 0:
        raise RuntimeError(f"exit {result.returncode}: {result.stderr.strip()[-300:]}")


def render_espeak(text: str, params: dict, out: Path) -> None:
    argv = [str(ENV.espeak), "-v", params["voice"], "-s", str(params["rate"]), "-p", str(params["pitch"]),
            "-g", str(params["gap"]), "-w", str(out), "--stdin"]
    run_tool(argv, stdin_text=text)


def render_flite(text: str, params: dict, out: Path) -> None:
    # kal is a diphone voice with its own pitch model; f0 mean is shifted
    # relative to each voice's default by scaling int_f0_target_mean.
    defaults = {"kal": 95.0, "kal16": 95.0, "awb": 120.0, "rms": 100.0, "slt": 170.0}
    f0 = defaults[params["voice"]] * params["f0_shift"]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write(text)
        text_path = handle.name
    try:
        argv = [str(ENV.flite), "-voice", params["voice"], "-f", text_path, "-o", str(out),
                "--setf", f"duration_stretch={params['stretch']}", "--setf", f"int_f0_target_mean={f0:.1f}"]
        run_tool(argv)
    finally:
        os.unlink(text_path)


def scheme_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_festival_batch(items: list[tuple[str, dict, Path]]) -> None:
    """One festival process for several sentences that share a voice."""
    voice = items[0][1]["voice"]
    lines = [f"(voice_{voice})"]
    for text, params, out in items:
        lines.append(f"(Parameter.set 'Duration_Stretch {params['stretch']})")
        lines.append(f"(utt.save.wave (utt.synth (Utterance Text {scheme_string(text)})) "
                     f"{scheme_string(str(out))} 'riff)")
    with tempfile.NamedTemporaryFile("w", suffix=".scm", delete=False) as handle:
        handle.write("\n".join(lines) + "\n")
        script = handle.name
    try:
        result = subprocess.run(ENV.festival + ["-b", script], env=ENV.env, capture_output=True, text=True,
                                timeout=CALL_TIMEOUT_S + 10 * len(items))
        if result.returncode != 0 or "SIOD ERROR" in result.stderr + result.stdout:
            raise RuntimeError(f"festival: {(result.stderr + result.stdout).strip()[-300:]}")
    finally:
        os.unlink(script)


def check_output(out: Path) -> tuple[float, float]:
    if not out.is_file() or out.stat().st_size <= 44:
        raise RuntimeError("no audio written")
    duration, rms = wav_info(out)
    if duration < MIN_DURATION_S or rms < 1e-4:
        raise RuntimeError(f"audio too short or silent ({duration:.2f} s, rms {rms:.5f})")
    return duration, rms


def render_job(job: dict) -> list[dict]:
    """Renders one job (one sentence, or a festival batch). Never raises."""
    started = time.monotonic()
    results = []
    pending = [item for item in job["items"] if not Path(item["path"]).is_file()]
    try:
        if job["engine"] == "festival" and pending:
            try:
                render_festival_batch([(i["speakable"], i["params"], Path(i["path"])) for i in pending])
            except Exception:  # noqa: BLE001 - a bad sentence aborts the batch; retry one by one
                for item in pending:
                    if not Path(item["path"]).is_file():
                        try:
                            render_festival_batch([(item["speakable"], item["params"], Path(item["path"]))])
                        except Exception as error:  # noqa: BLE001
                            item["error"] = str(error)
        else:
            for item in pending:
                renderer = render_espeak if job["engine"] == "espeak" else render_flite
                try:
                    renderer(item["speakable"], item["params"], Path(item["path"]))
                except Exception as error:  # noqa: BLE001
                    item["error"] = str(error)
    except Exception as error:  # noqa: BLE001
        for item in job["items"]:
            item.setdefault("error", str(error))
    for item in job["items"]:
        out = Path(item["path"])
        record = {"item": item}
        if "error" not in item:
            try:
                record["duration"], record["rms"] = check_output(out)
            except Exception as error:  # noqa: BLE001
                item["error"] = str(error)
        if "error" in item:
            out.unlink(missing_ok=True)
            record["error"] = item["error"]
        results.append(record)
    elapsed = time.monotonic() - started
    for record in results:
        record["seconds"] = elapsed / len(results)
    return results


def read_sentences(text_dir: Path, split: str) -> list[tuple[str, str]]:
    for name in (f"synth_{split}.tsv.gz", f"synth_{split}.tsv"):
        path = text_dir / name
        if path.is_file():
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as handle:
                return [tuple(line.rstrip("\n").split("\t", 1)) for line in handle if "\t" in line]
    raise SystemExit(f"error: {text_dir}/synth_{split}.tsv[.gz] not found; run build_text.py (prepare_local.sh)")


def make_jobs(split: str, sentences, renders: int, engines: list[str], weights: dict, out_dir: Path):
    jobs, festival_groups = [], collections.defaultdict(list)
    for sentence_id, speakable in sentences:
        normalized = textnorm.normalize_prose(speakable)
        if normalized is None:
            continue  # cannot happen for build_text output; guards hand-edited lists
        for render in range(renders):
            params = choose_voice(split, sentence_id, render, engines, weights)
            utt_id = f"{sentence_id}-{render}"
            item = {"id": f"syn-{split}-{utt_id}", "split": split, "speakable": speakable, "label": normalized[0],
                    "params": params, "path": str(out_dir / f"{utt_id}.wav")}
            if params["engine"] == "festival":
                festival_groups[params["voice"]].append(item)
            else:
                jobs.append({"engine": params["engine"], "items": [item]})
    for items in festival_groups.values():
        for start in range(0, len(items), FESTIVAL_BATCH):
            jobs.append({"engine": "festival", "items": items[start:start + FESTIVAL_BATCH]})
    return jobs


def probe_engines(engines: list[str], scratch: Path) -> list[str]:
    """Keeps the engines that can render a test sentence here; reports the others."""
    working = []
    for engine in engines:
        params = choose_voice("probe", "probe", 0, [engine])
        out = scratch / f"probe-{engine}.wav"
        try:
            if engine == "festival":
                render_festival_batch([("This is a test.", params, out)])
            elif engine == "espeak":
                render_espeak("This is a test.", params, out)
            else:
                render_flite("This is a test.", params, out)
            check_output(out)
            working.append(engine)
        except Exception as error:  # noqa: BLE001
            print(f"warning: engine {engine} does not work here and is skipped: {error}", flush=True)
    return working


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, required=True, help="folder the TTS debs were unpacked into")
    parser.add_argument("--stub-lib", type=Path, required=True, help="folder with the stub libpcaudio/libpulse-simple")
    parser.add_argument("--text", type=Path, required=True, help="folder with synth_{train,dev,test}.tsv[.gz]")
    parser.add_argument("--out", type=Path, required=True, help="data folder (manifests; wavs under synth/)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--engines", default="espeak,flite,festival")
    parser.add_argument("--weights", default="",
                        help="engine shares, e.g. espeak=0.7,flite=0.2,festival=0.1 (default %s)" %
                        ",".join(f"{k}={v}" for k, v in ENGINE_WEIGHTS.items()))
    parser.add_argument("--train-renders", type=int, default=1, help="voices per train sentence")
    parser.add_argument("--max-train", type=int, default=0, help="use only the first N train sentences (0: all)")
    parser.add_argument("--max-eval", type=int, default=0, help="use only the first N dev/test sentences (0: all)")
    parser.add_argument("--splits", default="train,dev,test",
                        help="which sentence lists to render, e.g. test (make_eval_sets.sh renders only the test set)")
    args = parser.parse_args()

    data_dir = args.out.resolve()
    weights = dict(ENGINE_WEIGHTS)
    for pair in filter(None, args.weights.split(",")):
        engine, _, share = pair.partition("=")
        if engine not in weights:
            parser.error(f"--weights: unknown engine {engine!r}; known: {', '.join(weights)}")
        weights[engine] = float(share)
    tree, stub_lib = args.tree.resolve(), args.stub_lib.resolve()
    init_worker(str(tree), str(stub_lib))
    scratch = data_dir / "synth" / "probe"
    scratch.mkdir(parents=True, exist_ok=True)
    engines = probe_engines([e for e in args.engines.split(",") if e], scratch)
    if not engines:
        raise SystemExit("error: no TTS engine works; check the unpacked tree and the stub libraries")

    splits = [s for s in args.splits.split(",") if s]
    unknown = sorted(set(splits) - {"train", "dev", "test"})
    if unknown or not splits:
        parser.error(f"--splits: unknown or empty {unknown}; use a subset of train,dev,test")
    jobs = []
    for split in splits:
        sentences = read_sentences(args.text, split)
        limit = args.max_train if split == "train" else args.max_eval
        if limit:
            sentences = sentences[:limit]
        out_dir = data_dir / "synth" / split
        out_dir.mkdir(parents=True, exist_ok=True)
        renders = args.train_renders if split == "train" else 1
        jobs += make_jobs(split, sentences, renders, engines, weights, out_dir)
    # Long festival batches first so the pool does not end on one straggler.
    jobs.sort(key=lambda job: -len(job["items"]))
    total_items = sum(len(j["items"]) for j in jobs)
    print(f"synthesizing {total_items} utterances with {args.workers} workers, engines {engines}", flush=True)

    records = collections.defaultdict(list)
    audio_s, busy_s, counts, failures = (collections.Counter() for _ in range(4))
    started = time.monotonic()
    done = 0
    with open(data_dir / "synth_errors.log", "a", encoding="utf-8") as errors, \
            multiprocessing.Pool(args.workers, initializer=init_worker, initargs=(str(tree), str(stub_lib))) as pool:
        for results in pool.imap_unordered(render_job, jobs, chunksize=4):
            for result in results:
                item = result["item"]
                engine = item["params"]["engine"]
                busy_s[engine] += result["seconds"]
                done += 1
                if "error" in result:
                    failures[engine] += 1
                    errors.write(f"{item['id']}\t{voice_tag(item['params'])}\t{result['error']}\t{item['speakable']}\n")
                    continue
                counts[engine] += 1
                audio_s[engine] += result["duration"]
                records[item["split"]].append({
                    "id": item["id"], "audio": os.path.relpath(item["path"], data_dir), "text": item["label"],
                    "duration": round(result["duration"], 3), "voice": voice_tag(item["params"]),
                    "engine": engine, "source": "synth", "tts_params": item["params"]})
            if done % 2000 < len(results):
                elapsed = time.monotonic() - started
                print(f"  {done}/{total_items} utterances, {sum(audio_s.values()) / 3600:.2f} h audio, "
                      f"{elapsed:.0f} s", flush=True)
    wall = time.monotonic() - started

    for split in splits:
        with open(data_dir / f"synth_{split}.jsonl", "w", encoding="utf-8") as handle:
            for record in sorted(records[split], key=lambda r: r["id"]):
                handle.write(json.dumps(record) + "\n")
        hours = sum(r["duration"] for r in records[split]) / 3600
        print(f"synth {split}: {len(records[split])} utterances, {hours:.2f} h")
    print(f"wall {wall:.1f} s with {args.workers} workers; total audio {sum(audio_s.values()) / 3600:.2f} h "
          f"({sum(audio_s.values()) / max(wall, 1e-9):.1f} s audio per wall second)")
    for engine in engines:
        per_worker = audio_s[engine] / max(busy_s[engine], 1e-9)
        print(f"  {engine}: {counts[engine]} ok, {failures[engine]} failed, {audio_s[engine] / 3600:.2f} h audio, "
              f"{busy_s[engine]:.0f} worker-s, {per_worker:.1f}x real time per worker "
              f"(~{per_worker * args.workers:.0f} audio s per wall s if all {args.workers} workers ran it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

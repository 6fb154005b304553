"""oasr.ray.data.transcribe_dataset over the loopback cluster: 200 real
prompts (and one damaged file) through an actor pool of two engines on two
worker nodes; a worker node killed mid-run; every id exactly once with
`oasr transcribe`'s text; a re-run writes nothing."""
import json
import os

import pytest
from conftest import cli_transcripts, ray

from oasr.errors import ConfigError, Error
from oasr.ray.data import transcribe_dataset, written_ids

ENGINE = {"ckpt_dir": os.environ.get("OASR_MODEL_DIR", ""), "max_batch_size": 8}


def make_manifest(tmp_path, prompts, count=200):
    damaged = tmp_path / "damaged.wav"
    damaged.write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt " + b"\x00" * 40)
    lines = [{"id": f"utt{i:03d}", "audio": prompts[i % len(prompts)]} for i in range(count)]
    lines.append({"id": "damaged", "audio": str(damaged)})
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return manifest, {line["id"]: line["audio"] for line in lines}


def read_output(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_bulk_transcription_survives_a_dead_node(cluster, prompts, tmp_path):
    manifest, audio_of = make_manifest(tmp_path, prompts)
    expected = cli_transcripts(prompts)
    output = tmp_path / "out.jsonl"
    killed = []

    def kill_once(written):
        # A worker node dies (its raylet, its engine actor and the blocks in
        # its object store) once part of the output is on disk; a fresh node
        # joins as an autoscaler would add one.
        if written >= 48 and not killed:
            cluster.kill(cluster.workers[-1])
            killed.append(written)
            cluster.add_worker()

    counts = transcribe_dataset(str(manifest), output, ENGINE, concurrency=2, batch_size=8,
                                num_cpus=1, actor_options={"resources": {"oasr_engine": 1}},
                                parquet=str(tmp_path / "out.parquet"), on_batch=kill_once)
    assert killed, "the run ended before the node could be killed"
    rows = read_output(output)
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids)) == len(audio_of), "an id is missing or written twice"
    assert set(ids) == set(audio_of)
    for row in rows:
        if row["id"] == "damaged":
            assert row["error"] and "damaged.wav" in row["error"] and row["text"] == "", row
            continue
        assert row["error"] is None, row
        assert row["text"] == expected[audio_of[row["id"]]], row["id"]
        assert row["tokens"] and row["duration"] > 0
    assert counts["written"] == len(audio_of) and counts["failed"] == 1
    print(f"\n{counts}; node killed after {killed[0]} lines")

    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out.parquet")
    assert sorted(table.column("id").to_pylist()) == sorted(ids)

    # A re-run finds every id written and writes nothing.
    before = output.read_bytes()
    again = transcribe_dataset(str(manifest), output, ENGINE, concurrency=1,
                               actor_options={"resources": {"oasr_engine": 1}})
    assert again["written"] == 0 and again["already_written"] == len(audio_of)
    assert output.read_bytes() == before


def test_resume_after_an_interrupted_writer(cluster, prompts, tmp_path):
    manifest, audio_of = make_manifest(tmp_path, prompts, count=20)
    output = tmp_path / "out.jsonl"
    # A previous run was killed mid-line after five ids: the cut line is
    # dropped and its id transcribed again; the five are not.
    expected = cli_transcripts(prompts)
    first = [{"id": f"utt{i:03d}", "text": "kept", "tokens": [], "duration": 0.0, "error": None,
              "timing": {}} for i in range(5)]
    output.write_text("".join(json.dumps(r) + "\n" for r in first) + '{"id": "utt005", "te')
    counts = transcribe_dataset(str(manifest), output, ENGINE, concurrency=1,
                                actor_options={"resources": {"oasr_engine": 1}})
    rows = read_output(output)
    assert counts["already_written"] == 5 and counts["written"] == len(audio_of) - 5
    assert [r["text"] for r in rows[:5]] == ["kept"] * 5
    assert sorted(r["id"] for r in rows) == sorted(audio_of)
    redone = [r for r in rows if r["id"] == "utt005"]
    assert len(redone) == 1 and redone[0]["text"] == expected[audio_of["utt005"]]
    assert not output.read_bytes().endswith(b'"te')


def test_bad_input_is_refused_by_name(cluster, prompts, tmp_path):
    manifest = tmp_path / "twice.jsonl"
    manifest.write_text(json.dumps({"id": "a", "audio": prompts[0]}) + "\n"
                        + json.dumps({"id": "a", "audio": prompts[1]}) + "\n")
    with pytest.raises(ConfigError, match=r'twice.jsonl(.|\n)*line 2: duplicate id "a" \(first on line 1\)'):
        transcribe_dataset(str(manifest), tmp_path / "o.jsonl", ENGINE)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a"}\n')
    with pytest.raises(ConfigError, match="broken.jsonl"):
        transcribe_dataset(str(broken), tmp_path / "o.jsonl", ENGINE)
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text("not json\n")
    with pytest.raises(ConfigError, match=r"foreign.jsonl line 1: not an oasr.ray output line"):
        written_ids(str(foreign))
    with pytest.raises(ConfigError, match="concurrency is 0"):
        transcribe_dataset(str(manifest), tmp_path / "o.jsonl", ENGINE, concurrency=0)
    # A file that is not an oasr.ray output is refused and left as it was.
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b'{"id": "x"}\nsome notes without a newline')
    with pytest.raises(ConfigError, match="its last line is not an oasr.ray output line"):
        written_ids(str(notes))
    assert notes.read_bytes() == b'{"id": "x"}\nsome notes without a newline'


def test_bad_decode_options_fail_the_run_not_the_utterances(cluster, prompts, tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "a", "audio": prompts[0]}) + "\n")
    output = tmp_path / "o.jsonl"
    # A key no architecture declares: refused on the driver, nothing runs.
    with pytest.raises(ConfigError, match="unknown decode option"):
        transcribe_dataset(str(manifest), output, ENGINE, decode={"beam": 4})
    assert not output.exists()
    # A value this model refuses: the engine actor refuses it, the run fails,
    # and no utterance is written with it as its "error".
    with pytest.raises(Error, match="beam_size"):
        transcribe_dataset(str(manifest), output, ENGINE, decode={"beam_size": 0},
                           actor_options={"resources": {"oasr_engine": 1}})
    assert not output.exists() or output.read_text() == ""


def test_a_ray_dataset_of_bytes(cluster, prompts, tmp_path):
    expected = cli_transcripts(prompts)
    items = []
    for i, path in enumerate(prompts):
        with open(path, "rb") as f:
            items.append({"id": f"b{i}", "bytes": f.read()})
    output = tmp_path / "bytes.jsonl"
    counts = transcribe_dataset(ray.data.from_items(items), output, ENGINE,
                                actor_options={"resources": {"oasr_engine": 1}})
    rows = {r["id"]: r for r in read_output(output)}
    assert counts["written"] == len(prompts)
    for i, path in enumerate(prompts):
        assert rows[f"b{i}"]["text"] == expected[path]

#!/usr/bin/env python3
"""Fixed train/dev/test split of the real Asterisk prompts, and their manifests.

Source: Debian's asterisk-core-sounds-en (transcripts,
usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz, lines
"name: text") and asterisk-core-sounds-en-wav (8 kHz 16-bit mono wavs,
usr/share/asterisk/sounds/en_US_f_Allison/<name>.wav), one female speaker.

Split rule (deterministic, depends only on the transcript file and which wavs
exist):
  1. Keep prompts that have a wav and whose text normalizes
     (textnorm.normalize_prompt): bracketed non-speech entries and prompts with
     ambiguous numbers are dropped; a few misspellings in the transcript file
     are corrected to what the speaker says (TRANSCRIPT_FIXES).
  2. Order prompts by sha1(name). Test = the first TEST_SIZE prompts with at
     least 2 words, dev = the next DEV_SIZE prompts with at least 2 words,
     train = everything else.
  3. Remove from train and dev every prompt whose text equals a test text, or
     contains a test text of at least 3 words (so no test sentence is ever
     heard in training, not even inside a longer prompt).
Calibration: CALIB_SIZE train prompts, first by sha1(name).

Usage:
  asterisk_split.py --tree TTS_TREE --out DATA_DIR     # writes real_*.jsonl, calib.jsonl
  asterisk_split.py --tree TTS_TREE --test-texts FILE  # only the test texts (build_text.py)
  asterisk_split.py --tree / --out DIR --absolute-audio # from the installed packages
Manifest audio paths are relative to DATA_DIR (the manifests' folder), or
absolute with --absolute-audio.
Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
import wave
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import textnorm  # noqa: E402

TRANSCRIPTS = "usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
SOUNDS = "usr/share/asterisk/sounds/en_US_f_Allison"
TEST_SIZE = 120
DEV_SIZE = 40
CALIB_SIZE = 64
MIN_CONTAINED_WORDS = 3

# Misspellings in core-sounds-en.txt; the recordings say the corrected word.
TRANSCRIPT_FIXES = {
    "UMUTE": "UNMUTE",
    "EXCLAIMATION": "EXCLAMATION",
    "DECENDING": "DESCENDING",
    "FOURTIETH": "FORTIETH",
    "INDENTIFIED": "IDENTIFIED",
    "REPRESENATIVES": "REPRESENTATIVES",
    "WITHELD": "WITHHELD",
}

# Acronyms in the transcripts that the speaker reads letter by letter. Other
# all-capital words (IAX, SIP, DAHDI: word or letters?) make a prompt ambiguous.
SPELLED_ACRONYMS = frozenset({"PBX", "IVR", "USB", "MGCP"})


def sha1_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def read_transcripts(tree: Path) -> list[tuple[str, str]]:
    path = tree / TRANSCRIPTS
    if not path.is_file():
        raise SystemExit(f"error: {path} not found; unpack asterisk-core-sounds-en into {tree}")
    entries = []
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith(";") or ": " not in line:
                continue
            name, text = line.split(": ", 1)
            entries.append((name.strip(), text.strip()))
    return entries


def fix_label(label: str) -> str:
    return " ".join(TRANSCRIPT_FIXES.get(word, word) for word in label.split())


def contains_words(haystack: str, needle: str) -> bool:
    """Word-bounded substring test on normalized texts."""
    return f" {needle} " in f" {haystack} "


def split_prompts(tree: Path) -> dict:
    """Returns {"train"|"dev"|"test": [(name, label, wav_path)], "dropped": [(name, why)]}."""
    sounds = tree / SOUNDS
    usable, dropped = [], []
    for name, raw in read_transcripts(tree):
        wav_path = sounds / f"{name}.wav"
        if not wav_path.is_file():
            dropped.append((name, "no wav"))
            continue
        label = textnorm.normalize_prompt(raw, SPELLED_ACRONYMS)
        if label is None:
            dropped.append((name, f"not speech or ambiguous: {raw[:60]!r}"))
            continue
        usable.append((name, fix_label(label), wav_path))
    if not usable:
        raise SystemExit(f"error: no usable prompts; is {sounds} unpacked?")
    usable.sort(key=lambda item: sha1_key(item[0]))

    multiword = [item for item in usable if textnorm.word_count(item[1]) >= 2]
    test = multiword[:TEST_SIZE]
    dev = multiword[TEST_SIZE:TEST_SIZE + DEV_SIZE]
    held = {item[0] for item in test + dev}
    train = [item for item in usable if item[0] not in held]

    test_texts = {item[1] for item in test}
    long_test_texts = [t for t in test_texts if textnorm.word_count(t) >= MIN_CONTAINED_WORDS]

    def leaks(label: str) -> bool:
        return label in test_texts or any(contains_words(label, t) for t in long_test_texts)

    for subset_name, subset in (("train", train), ("dev", dev)):
        kept = []
        for item in subset:
            if leaks(item[1]):
                dropped.append((item[0], f"{subset_name}: text overlaps a test text"))
            else:
                kept.append(item)
        subset[:] = kept
    return {"train": train, "dev": dev, "test": test, "dropped": dropped}


def wav_duration(path: Path) -> float:
    with wave.open(str(path), "rb") as handle:
        return handle.getnframes() / float(handle.getframerate())


def write_manifest(path: Path, items, data_dir: Path, prefix: str = "ast-", absolute: bool = False) -> float:
    hours = 0.0
    with open(path, "w", encoding="utf-8") as handle:
        for name, label, wav_path in items:
            duration = wav_duration(wav_path)
            hours += duration / 3600.0
            record = {
                "id": prefix + name.replace("/", "-"),
                "audio": str(wav_path) if absolute else os.path.relpath(wav_path, data_dir),
                "text": label,
                "duration": round(duration, 3),
                "source": "asterisk",
            }
            handle.write(json.dumps(record) + "\n")
    return hours


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, required=True, help="folder the asterisk debs were unpacked into")
    parser.add_argument("--out", type=Path, help="data folder for real_{train,dev,test}.jsonl and calib.jsonl")
    parser.add_argument("--test-texts", type=Path, help="write only the normalized test texts, one a line")
    parser.add_argument("--absolute-audio", action="store_true",
                        help="write absolute wav paths (for wavs read from an installed package, e.g. --tree /)")
    args = parser.parse_args()
    if args.out is None and args.test_texts is None:
        parser.error("give --out and/or --test-texts")

    split = split_prompts(args.tree.resolve())
    if args.test_texts is not None:
        args.test_texts.parent.mkdir(parents=True, exist_ok=True)
        args.test_texts.write_text("".join(sorted({i[1] + "\n" for i in split["test"]})), encoding="utf-8")
        print(f"asterisk: {len(split['test'])} test texts -> {args.test_texts}")
    if args.out is not None:
        data_dir = args.out.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        for subset in ("train", "dev", "test"):
            hours = write_manifest(data_dir / f"real_{subset}.jsonl", split[subset], data_dir,
                                   absolute=args.absolute_audio)
            print(f"asterisk {subset}: {len(split[subset])} utterances, {hours * 60:.1f} min")
        calib = sorted(split["train"], key=lambda item: sha1_key("calib:" + item[0]))[:CALIB_SIZE]
        write_manifest(data_dir / "calib.jsonl", calib, data_dir, absolute=args.absolute_audio)
        print(f"calibration: {len(calib)} train utterances -> {data_dir / 'calib.jsonl'}")
        with open(data_dir / "real_dropped.txt", "w", encoding="utf-8") as handle:
            for name, why in split["dropped"]:
                handle.write(f"{name}\t{why}\n")
        print(f"asterisk dropped: {len(split['dropped'])} (listed in real_dropped.txt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

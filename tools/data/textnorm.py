"""Text normalization shared by every data script.

The model's output alphabet is upper-case A-Z, the apostrophe and a single
space between words. Every transcript that reaches a manifest goes through
this module, so real references and synthetic labels obey one rule:

* letters are upper-cased; accents are removed (cafe for cafe with an accent);
* hyphens and slashes join words, so they become spaces ("Call-Forward" is
  "CALL FORWARD");
* the apostrophe survives only inside a word ("DON'T"); quoting apostrophes
  at a word's edge are dropped;
* other punctuation is removed;
* anything that cannot be written in the alphabet without guessing how it is
  spoken (digits in prose, symbols, URLs, abbreviations) rejects the text:
  the caller drops it instead of guessing.

Real telephone prompts are the one place numbers are spelled out (the
references must say what the speaker said): `normalize_prompt` reads 0-99 as
cardinal words and rejects longer numbers, whose reading is ambiguous
("1234" may be "one two three four" or "twelve thirty-four").

Standard library only: this runs on the GPU machine's bare python3 too.
"""

from __future__ import annotations

import re
import unicodedata

ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ' ")

_ONES = [
    "ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE",
    "TEN", "ELEVEN", "TWELVE", "THIRTEEN", "FOURTEEN", "FIFTEEN", "SIXTEEN",
    "SEVENTEEN", "EIGHTEEN", "NINETEEN",
]
_TENS = ["", "", "TWENTY", "THIRTY", "FORTY", "FIFTY", "SIXTY", "SEVENTY", "EIGHTY", "NINETY"]

# Typographic characters folded to ASCII before anything else.
_FOLD = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u02bc": "'", "`": "'",
    "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-", "\u2026": "...",
    "\u00a0": " ", "\t": " ", "\n": " ", "\r": " ",
})

# Abbreviations whose spoken form differs from their letters. A sentence using
# one (with its period) is dropped: a TTS engine would say "mister" while the
# label said "MR".
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr vs etc eg ie inc ltd co corp prof gen col capt lt sgt rev hon "
    "no vol ch fig approx dept univ ave blvd mt ft esq messrs viz cf al op jan feb mar apr "
    "jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun".split()
)

# Characters prose may contain. Anything else (digits, $, %, &, @, *, #, +, =,
# <, >, /, \\, |, _, ~, ^, [, ], {, }) means the sentence is not plain speech.
_PROSE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'.,;:!?-\"() ")


def number_words(value: int) -> str:
    """Cardinal words for 0 <= value <= 99 ("FORTY TWO")."""
    if not 0 <= value <= 99:
        raise ValueError(f"number_words covers 0..99, got {value}")
    if value < 20:
        return _ONES[value]
    tens, ones = divmod(value, 10)
    return _TENS[tens] if ones == 0 else f"{_TENS[tens]} {_ONES[ones]}"


def fold_to_ascii(text: str) -> str:
    """Folds typographic quotes/dashes and strips accents; keeps other non-ASCII as is."""
    text = text.translate(_FOLD)
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def to_alphabet(text: str) -> str | None:
    """Maps already-speakable text to the model alphabet, or None if something remains.

    Expects words made of letters and apostrophes with ordinary punctuation
    between them; digits or symbols left at this point make it return None.
    """
    text = fold_to_ascii(text).upper()
    text = re.sub(r"[-/]", " ", text)
    text = re.sub(r"[.,;:!?\"()]", " ", text)
    words = []
    for word in text.split():
        word = word.strip("'")  # quoting apostrophes at word edges
        word = re.sub(r"'{2,}", "'", word)
        if word:
            words.append(word)
    result = " ".join(words)
    if not result or any(ch not in ALPHABET for ch in result):
        return None
    return result


def word_count(label: str) -> int:
    return len(label.split())


def _spell_letter_dots(match: re.Match) -> str:
    # "A.M." and "U.S." are spoken letter by letter.
    return " ".join(match.group(0).replace(".", " ").split())


def normalize_prompt(text: str, spelled_acronyms: frozenset[str] = frozenset()) -> str | None:
    """Reference text for a real recorded prompt, or None when it is not speech or ambiguous.

    Bracketed stage directions ("[beep]", "(5 seconds of silence)", "<beep>") are
    removed; if nothing is left the entry is non-speech. Keypad symbols are
    read as spoken on the prompts ("*" STAR, "#" POUND). Numbers 0-99 become
    words, a digit glued to letters is split off ("3D" -> "THREE D"), and any
    longer or decimal number makes the prompt ambiguous (None). Letters spoken
    one by one are written as one-letter words ("A.M." -> "A M"; an acronym in
    `spelled_acronyms`, e.g. "PBX" -> "P B X"); any other all-capital word
    or a web address is ambiguous (None).
    """
    text = fold_to_ascii(text)
    text = re.sub(r"\[[^\]]*\]|\([^)]*\)|<[^>]*>", " ", text)
    if re.search(r"\w\.\w+\.\w", text):  # a web or mail address
        return None
    for word in re.findall(r"\b[A-Z]{2,}\b", text):
        if word not in spelled_acronyms:
            return None
    text = re.sub(r"\b[A-Z]{2,}\b", lambda m: " ".join(m.group(0)), text)
    text = text.replace("*", " star ").replace("#", " pound ")
    text = re.sub(r"\b(?:[A-Za-z]\.){2,}", _spell_letter_dots, text)
    if re.search(r"\d[.,]\d|\d{3,}", text):
        return None
    text = re.sub(r"(?<=\d)(?=[A-Za-z])|(?<=[A-Za-z])(?=\d)", " ", text)
    text = re.sub(r"\d+", lambda m: " " + number_words(int(m.group(0))) + " ", text)
    return to_alphabet(text)


def normalize_prose(sentence: str, min_words: int = 2, max_words: int = 30):
    """Label and TTS input for one prose sentence, or None if it must be dropped.

    Returns (label, speakable): `label` is in the model alphabet; `speakable`
    is the sentence with its punctuation kept (so the TTS engine phrases it
    naturally) and nothing in it that a TTS engine could read differently from
    the label. Dropped: digits or symbols, abbreviations with a period,
    all-capital words of two or more letters (acronyms the engines spell out),
    word counts outside [min_words, max_words].
    """
    sentence = " ".join(fold_to_ascii(sentence).split())
    if not sentence or any(ch not in _PROSE_CHARS for ch in sentence):
        return None
    for token in re.findall(r"[A-Za-z]+\.", sentence):
        if token[:-1].lower() in _ABBREVIATIONS:
            return None
    if re.search(r"\b[A-Za-z]\.[A-Za-z]\.", sentence):  # e.g. "U.S."
        return None
    for word in re.findall(r"[A-Za-z']+", sentence):
        letters = word.strip("'").split("'")[0]  # "WAC's" -> "WAC"
        if len(letters) >= 2 and letters.isupper():
            return None
    label = to_alphabet(sentence)
    if label is None or not min_words <= word_count(label) <= max_words:
        return None
    # Every word must contain a vowel-ish letter; strings like "hmmm" or "zzzz"
    # are read unpredictably by different engines.
    if any(not re.search(r"[AEIOUY]", word) for word in label.split()):
        return None
    return label, sentence

#!/usr/bin/env python3
"""Unit tests for textnorm and the split rules (python3 -m unittest tools/data/test_textnorm.py).

Expected values are written out by hand from the rules in textnorm's docstring,
not computed by the code under test.
"""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import asterisk_split  # noqa: E402
import build_text  # noqa: E402
import textnorm  # noqa: E402


class NumberWords(unittest.TestCase):
    def test_cardinals(self):
        self.assertEqual(textnorm.number_words(0), "ZERO")
        self.assertEqual(textnorm.number_words(13), "THIRTEEN")
        self.assertEqual(textnorm.number_words(40), "FORTY")
        self.assertEqual(textnorm.number_words(99), "NINETY NINE")

    def test_out_of_range(self):
        with self.assertRaises(ValueError):
            textnorm.number_words(100)


class Prompts(unittest.TestCase):
    def test_digits_symbols_and_brackets(self):
        self.assertEqual(textnorm.normalize_prompt("press * to toggle pause, press # to enter"),
                         "PRESS STAR TO TOGGLE PAUSE PRESS POUND TO ENTER")
        self.assertEqual(textnorm.normalize_prompt("Please press 1 to mute, 2 to lock."),
                         "PLEASE PRESS ONE TO MUTE TWO TO LOCK")
        self.assertEqual(textnorm.normalize_prompt("3D audio enabled"), "THREE D AUDIO ENABLED")
        self.assertEqual(textnorm.normalize_prompt("at [@]"), "AT")
        self.assertEqual(textnorm.normalize_prompt("Call-Forward on Busy."), "CALL FORWARD ON BUSY")
        self.assertEqual(textnorm.normalize_prompt("A.M."), "A M")
        self.assertEqual(textnorm.normalize_prompt("the person isn't at their desk; I will try"),
                         "THE PERSON ISN'T AT THEIR DESK I WILL TRY")

    def test_non_speech_and_ambiguous_are_rejected(self):
        self.assertIsNone(textnorm.normalize_prompt("[ascending tones]"))
        self.assertIsNone(textnorm.normalize_prompt("(10 seconds of silence)"))
        self.assertIsNone(textnorm.normalize_prompt("<beep ascending>"))
        self.assertIsNone(textnorm.normalize_prompt("dial extension 8500 now"))
        self.assertIsNone(textnorm.normalize_prompt("a 28.8 kilobit modem"))
        self.assertIsNone(textnorm.normalize_prompt("visit www.asterisk.org."))
        self.assertIsNone(textnorm.normalize_prompt("SIP"))

    def test_spelled_acronyms(self):
        self.assertEqual(textnorm.normalize_prompt("the open source PBX.", frozenset({"PBX"})),
                         "THE OPEN SOURCE P B X")


class Prose(unittest.TestCase):
    def test_label_and_speakable(self):
        label, speakable = textnorm.normalize_prose("\u201cDon't panic,\u201d she said -- twice.")
        self.assertEqual(label, "DON'T PANIC SHE SAID TWICE")
        self.assertEqual(speakable, '"Don\'t panic," she said -- twice.')
        self.assertEqual(textnorm.normalize_prose("The caf\u00e9 is 'open' now.")[0], "THE CAFE IS OPEN NOW")

    def test_rejections(self):
        for sentence in ["I have 3 cats.", "Mr. Smith went home.", "It costs $5 today.",
                         "The NASA probe landed.", "It was a WAC's museum.", "Hi.",
                         "Hmm, zzz is not a word.", "See e.g. the manual.",
                         " ".join(["word"] * 31) + "."]:
            self.assertIsNone(textnorm.normalize_prose(sentence), sentence)

    def test_alphabet(self):
        label = textnorm.normalize_prose("Well-known dogs' bones (mostly) rot; why?")[0]
        self.assertEqual(label, "WELL KNOWN DOGS BONES MOSTLY ROT WHY")
        self.assertTrue(set(label) <= textnorm.ALPHABET)


class Splitting(unittest.TestCase):
    def test_sentences_of(self):
        text = 'He left. "Why?" she asked. And then some fragment'
        self.assertEqual(list(build_text.sentences_of(text)), ["He left.", '"Why?" she asked.'])

    def test_fortune_attribution_is_dropped(self):
        self.assertEqual(build_text.fortune_body("Be yourself.\n\t\t-- Oscar Wilde\n"), "Be yourself.")

    def test_word_bounded_containment(self):
        self.assertTrue(asterisk_split.contains_words("PLEASE ENTER YOUR PIN NOW", "ENTER YOUR PIN"))
        self.assertFalse(asterisk_split.contains_words("REENTER YOUR PIN", "ENTER YOUR PIN"))


if __name__ == "__main__":
    unittest.main()

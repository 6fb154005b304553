#!/usr/bin/env python3
"""Checks evaluate.py's decoding helpers against independent references:
the CTC prefix beam search against the U2++ oracle's
(tests/oracle/u2pp/u2pp_search.py: same n-best and scores), and the word
edit distance against jiwer's.

  python3 tools/train/test_search.py
"""

import os
import sys

import jiwer
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "oracle", "u2pp"))

from evaluate import prefix_beam_search, word_errors  # noqa: E402
from u2pp_search import ctc_prefix_beam_search  # noqa: E402


def main():
    gen = torch.Generator().manual_seed(11)
    for case, (frames, vocab, beam, sharp) in enumerate(
            [(40, 12, 4, 2.0), (60, 31, 10, 4.0), (25, 7, 3, 1.0), (1, 5, 2, 3.0)]):
        lp = torch.log_softmax(torch.randn(frames, vocab, generator=gen, dtype=torch.float64)
                               * sharp, -1).float()
        ref = ctc_prefix_beam_search(lp, frames, beam)
        v, i = lp.topk(beam, -1)
        mine = prefix_beam_search(v.double().tolist(), i.tolist(), frames, beam)
        assert [h for h, _ in mine] == [h for h, _ in ref], f"case {case}: n-best differs"
        for (_, a), (_, b) in zip(mine, ref):
            assert abs(a - b) < 1e-9, f"case {case}: score {a} vs {b}"
    pairs = [("THE CAT SAT", "THE CAT SAT"), ("THE CAT SAT ON", "A CAT SAT"),
             ("PLEASE PRESS ONE", "PLEASE PRESS ONE TWO THREE"), ("A B C D E", "E D C B A"),
             ("HELLO", "")]
    for ref, hyp in pairs:
        want = jiwer.process_words(ref, hyp if hyp else "<empty>").wer * len(ref.split()) \
            if hyp else len(ref.split())
        got = word_errors(ref.split(), hyp.split())
        assert got == round(want), f"{ref!r} / {hyp!r}: {got} vs jiwer {want}"
    print("test_search: PASS (prefix beam search == oracle; word errors == jiwer)")


if __name__ == "__main__":
    main()

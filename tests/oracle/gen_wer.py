"""Oracle for oasr's WER/CER alignment counts (src/eval/wer.h).

Writes random and adversarial reference/hypothesis pairs with expected counts
to OUT/cases.safetensors. Two independent sources:
  * jiwer (PyPI): the total error count and reference length of every case
    (total errors are the Levenshtein distance, which no tie rule changes);
  * a definition-level DP written here: among all minimum-cost alignments,
    the largest substitution count, from which D and I follow. jiwer's own
    S/D/I split comes from one greedy backtrace and can report fewer
    substitutions for the same total, so it is recorded but not expected.
Tensor "<case>/expected" = int64 [S, D, I, reference_length, jiwer_errors,
jiwer_S, jiwer_D, jiwer_I]; metadata "cases" = JSON list of
{"name", "unit", "reference", "hypothesis"}.
"""
import argparse
import json
import os
import random

import jiwer
import torch
from safetensors.torch import save_file


def max_substitution_counts(ref, hyp):
    """Exhaustive-by-DP: minimise cost, then maximise substitutions."""
    n, m = len(ref), len(hyp)
    # best[i][j] = (cost, -substitutions) for ref[:i] vs hyp[:j]
    best = [[(0, 0)] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 and j == 0:
                continue
            options = []
            if i > 0:
                options.append((best[i - 1][j][0] + 1, best[i - 1][j][1]))
            if j > 0:
                options.append((best[i][j - 1][0] + 1, best[i][j - 1][1]))
            if i > 0 and j > 0:
                c, s = best[i - 1][j - 1]
                options.append((c, s) if ref[i - 1] == hyp[j - 1] else (c + 1, s - 1))
            best[i][j] = min(options)
    cost, neg_subs = best[n][m]
    subs = -neg_subs
    dels = (cost - subs + n - m) // 2
    ins = cost - subs - dels
    return subs, dels, ins


def jiwer_counts(unit, ref, hyp):
    # jiwer refuses an empty reference; the DP alone covers those cases.
    if not ref:
        return len(hyp), 0, 0, len(hyp)
    if unit == "wer":
        out = jiwer.process_words(" ".join(ref), " ".join(hyp))
    else:
        out = jiwer.process_characters("".join(ref), "".join(hyp))
    errors = out.substitutions + out.deletions + out.insertions
    return errors, out.substitutions, out.deletions, out.insertions


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(20240611)

    pairs = [  # (name, unit, reference tokens, hypothesis tokens)
        ("identical", "wer", "the cat sat".split(), "the cat sat".split()),
        ("empty_hyp", "wer", "a b c".split(), []),
        ("empty_ref", "wer", [], "a b".split()),
        ("both_empty", "wer", [], []),
        ("swap_tie", "wer", "a b".split(), "b c".split()),
        ("greedy_differs", "wer", "a b a b a b a".split(), "a a b b a a a".split()),
        ("shifted", "wer", "one two three four five".split(), "two three four five six".split()),
        ("all_wrong_longer", "wer", "a a a".split(), "b b b b b b".split()),
        ("repeats", "wer", "x y x y x y".split(), "y x y x y x".split()),
        ("cer_basic", "cer", list("helloworld"), list("heloworlds")),
        ("cer_utf8", "cer", list("caf\u00e9 na\u00efve".replace(" ", "")),
         list("cafe naive".replace(" ", ""))),
    ]
    vocab = ["a", "b", "c", "the", "of", "to", "and", "in"]
    for k in range(120):  # small vocabularies make ties frequent
        words = vocab[: rng.randint(1, 4 if k < 80 else len(vocab))]
        ref = [rng.choice(words) for _ in range(rng.randint(1, 12))]
        hyp = [rng.choice(words) for _ in range(rng.randint(0, 12))]
        pairs.append((f"random{k}", "wer", ref, hyp))
    for k in range(20):  # a longer realistic-size case per seed
        ref = [rng.choice(vocab) for _ in range(rng.randint(20, 60))]
        hyp = list(ref)
        for _ in range(rng.randint(0, 15)):
            op = rng.choice("sdi")
            pos = rng.randrange(len(hyp) + 1)
            if op == "i":
                hyp.insert(pos, rng.choice(vocab))
            elif hyp and pos < len(hyp):
                if op == "d":
                    del hyp[pos]
                else:
                    hyp[pos] = rng.choice(vocab)
        pairs.append((f"edited{k}", "wer", ref, hyp))
    for k in range(20):
        ref = [rng.choice("abcd") for _ in range(rng.randint(1, 15))]
        hyp = [rng.choice("abcd") for _ in range(rng.randint(0, 15))]
        pairs.append((f"random_cer{k}", "cer", ref, hyp))

    tensors, cases, disagreements = {}, [], 0
    for name, unit, ref, hyp in pairs:
        s, d, i = max_substitution_counts(ref, hyp)
        j_err, j_s, j_d, j_i = jiwer_counts(unit, ref, hyp)
        assert s + d + i == j_err, (name, s, d, i, j_err)
        disagreements += (s, d, i) != (j_s, j_d, j_i)
        tensors[f"{name}/expected"] = torch.tensor(
            [s, d, i, len(ref), j_err, j_s, j_d, j_i], dtype=torch.int64)
        sep = " " if unit == "wer" else ""
        cases.append({"name": name, "unit": unit,
                      "reference": sep.join(ref), "hypothesis": sep.join(hyp)})
    save_file(tensors, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(cases)})
    print(f"{len(cases)} cases; jiwer's S/D/I split differs from max-substitution "
          f"in {disagreements} (same totals in all)")


if __name__ == "__main__":
    main()

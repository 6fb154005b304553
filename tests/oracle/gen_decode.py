#!/usr/bin/env python3
"""Oracle for src/decode: WeNet's CTC greedy search, CTC prefix beam search
and attention rescoring, re-implemented here in plain Python the way WeNet's
wenet/transformer/search.py runs them (Python floats, a dict of next
hypotheses in insertion order, sorted() for pruning, torch.topk for the
per-frame candidates, float32 torch tensors for the decoder scores), so
ties resolve as they do in WeNet. Written from WeNet's documented behaviour,
not from oasr's C++.

Writes OUT/cases.safetensors. Tensors are named "<case>/<role>"; metadata key
"cases" holds a JSON list of {"name", "kind", ...parameters}. Double scores
are stored as int64 bit patterns ("..._bits") because oasr's safetensors
reader does not serve F64.

One deliberate extension: WeNet calls logp.topk(beam_size), which torch
refuses when beam_size > V; here (and in oasr) the candidates are then all V
tokens, i.e. topk(min(beam_size, V)).
"""

import argparse
import json
import math
import os
import sys
from collections import defaultdict

import torch
from torch.nn.utils.rnn import pad_sequence
from safetensors.torch import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "u2pp"))
from u2pp_search import forced_align  # noqa: E402 (the oracle's searches live there)

CASES = []
TENSORS = {}
NEG_INF = -float("inf")


def add_case(name, kind, params, **tensors):
    CASES.append({"name": name, "kind": kind, **params})
    for role, tensor in tensors.items():
        TENSORS[f"{name}/{role}"] = tensor.detach().contiguous().clone()


def double_bits(values):
    """float64 values -> int64 tensor holding their bit patterns."""
    return torch.tensor(values, dtype=torch.float64).view(torch.int64)


def padded_ids(rows):
    """Token lists -> (int64 [N, max(1, longest)] padded with -1, int64 [N] lengths)."""
    width = max([1] + [len(r) for r in rows])
    out = torch.full((len(rows), width), -1, dtype=torch.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r, dtype=torch.int64)
    return out, torch.tensor([len(r) for r in rows], dtype=torch.int64)


# ---- WeNet's semantics, in Python -----------------------------------------


def log_add(*args):
    # WeNet's stable log-add: -inf when everything is -inf, else shift by max.
    if all(a == NEG_INF for a in args):
        return NEG_INF
    biggest = max(args)
    return biggest + math.log(sum(math.exp(a - biggest) for a in args))


def collapse(frame_labels, blank):
    # Drop repeats of the previous frame's label, then blanks.
    out = []
    previous = None
    for label in frame_labels:
        if label != previous and label != blank:
            out.append(label)
        previous = label
    return out


def greedy_batch(log_probs, lengths, blank=0):
    # WeNet: topk(1) over the vocabulary of the whole padded batch, frames past
    # each length forced to blank, then collapse.
    batch, frames, _ = log_probs.shape
    best = log_probs.topk(1, dim=2)[1].view(batch, frames)
    pad = torch.arange(frames).unsqueeze(0) >= lengths.unsqueeze(1)
    best = best.masked_fill(pad, blank)
    return [collapse(row.tolist(), blank) for row in best]


def prefix_beam_search(log_probs, beam, blank=0):
    """One utterance [T, V] -> list of (prefix tuple, score), best first."""
    vocab = log_probs.size(1)
    hyps = [((), (0.0, NEG_INF))]  # prefix -> (blank-ending, nonblank-ending)
    for t in range(log_probs.size(0)):
        frame = log_probs[t]
        table = defaultdict(lambda: [NEG_INF, NEG_INF])
        _, candidates = frame.topk(min(beam, vocab))
        for u in candidates:
            u = u.item()
            p = frame[u].item()
            for prefix, (pb, pnb) in hyps:
                last = prefix[-1] if prefix else None
                if u == blank:
                    entry = table[prefix]
                    entry[0] = log_add(entry[0], log_add(pb, pnb) + p)
                elif u == last:
                    entry = table[prefix]  # "aa" -> "a"
                    entry[1] = log_add(entry[1], pnb + p)
                    entry = table[prefix + (u,)]  # "a-a" -> "aa"
                    entry[1] = log_add(entry[1], pb + p)
                else:
                    entry = table[prefix + (u,)]
                    entry[1] = log_add(entry[1], log_add(pb, pnb) + p)
        ranked = sorted(table.items(), key=lambda item: log_add(item[1][0], item[1][1]),
                        reverse=True)
        hyps = [(prefix, tuple(scores)) for prefix, scores in ranked[:beam]]
    return [(list(prefix), log_add(pb, pnb)) for prefix, (pb, pnb) in hyps]


def add_sos_eos(ys_pad, sos, eos, ignore_id):
    rows = [y[y != ignore_id] for y in ys_pad]
    ys_in = [torch.cat([torch.tensor([sos]), y]) for y in rows]
    ys_out = [torch.cat([y, torch.tensor([eos])]) for y in rows]
    width = max(len(y) for y in ys_in)

    def pad(seqs, value):
        out = torch.full((len(seqs), width), value, dtype=torch.int64)
        for i, y in enumerate(seqs):
            out[i, :len(y)] = y
        return out

    return pad(ys_in, eos), pad(ys_out, ignore_id)


def reverse_pad_list(ys_pad, ys_lens, pad_value):
    return pad_sequence([torch.flip(y.int()[:n], [0]) for y, n in zip(ys_pad, ys_lens)], True,
                        pad_value)


def decoder_inputs(hyps, sos, eos, ignore_id):
    """What WeNet's attention_rescoring + forward_attention_decoder feed the
    decoders: <sos>-prefixed hyps, their lengths + 1, and the reversed hyps
    built with WeNet's gather."""
    hyps_pad = pad_sequence([torch.tensor(h, dtype=torch.long) for h in hyps], True, ignore_id)
    hyps_lens = torch.tensor([len(h) for h in hyps], dtype=torch.long)
    hyps_in, _ = add_sos_eos(hyps_pad, sos, eos, ignore_id)
    hyps_lens = hyps_lens + 1
    r_lens = hyps_lens - 1
    r_hyps = hyps_in[:, 1:]
    steps = torch.arange(0, torch.max(r_lens))
    valid = r_lens.unsqueeze(1) > steps
    index = ((r_lens.unsqueeze(1) - 1) - steps) * valid
    r_hyps = torch.where(valid, torch.gather(r_hyps, 1, index), eos)
    r_hyps = torch.cat([hyps_in[:, 0:1], r_hyps], dim=1)
    return hyps_in, hyps_lens, r_hyps


def rescore(hyps, ctc_scores, decoder_out, r_decoder_out, eos, ctc_weight, reverse_weight):
    """WeNet's scoring loop: float32 tensor arithmetic on decoder log-probs."""
    best_score, best_index, totals = NEG_INF, 0, []
    for i, hyp in enumerate(hyps):
        score = 0.0
        for j, w in enumerate(hyp):
            score += decoder_out[i][j][w]
        score += decoder_out[i][len(hyp)][eos]
        if reverse_weight > 0:
            r_score = 0.0
            for j, w in enumerate(hyp):
                r_score += r_decoder_out[i][len(hyp) - j - 1][w]
            r_score += r_decoder_out[i][len(hyp)][eos]
            score = score * (1 - reverse_weight) + r_score * reverse_weight
        score += ctc_scores[i] * ctc_weight
        assert score.dtype == torch.float32
        totals.append(score.item())
        if score > best_score:
            best_score = score.item()
            best_index = i
    return best_index, best_score, totals


# ---- inputs -----------------------------------------------------------------


def ctc_log_probs(frames, vocab, temperature, pattern, gen):
    """Random CTC log-probs [T, V] with a tie pattern."""
    logits = torch.randn(frames, vocab, generator=gen) * temperature
    if pattern == "blank_heavy":
        logits[:, 0] += 2.0 * temperature
    elif pattern == "speechlike":
        # Blank wins most frames by a margin, as in a trained CTC head.
        speech = torch.rand(frames, generator=gen) < 0.25
        logits[~speech, 0] += 8.0 * temperature
        logits[speech, torch.randint(1, vocab, (frames,), generator=gen)[speech]] += 3.0
    elif pattern == "repeats":
        # Frames peaked on a label sequence with runs and blank gaps, so both
        # "aa" -> "a" and "a-a" -> "aa" paths compete.
        labels = torch.randint(0, min(vocab, 4), (frames,), generator=gen)
        labels = torch.repeat_interleave(labels, 3)[:frames]
        logits[torch.arange(frames), labels] += 4.0
    elif pattern == "quantized":
        logits = torch.round(logits * 2) / 2  # many exact ties
    elif pattern == "dup_columns":
        # Some tokens share another token's column exactly, including blank.
        for _ in range(max(1, vocab // 3)):
            a, b = torch.randint(0, vocab, (2,), generator=gen).tolist()
            logits[:, a] = logits[:, b]
    elif pattern == "constant_rows":
        rows = torch.rand(frames, generator=gen) < 0.4
        logits[rows] = 0.0
    elif pattern == "neg_inf":
        mask = torch.rand(frames, vocab, generator=gen) < 0.5
        mask[:, 0] = False  # keep every row with a finite entry
        logits = logits.masked_fill(mask, NEG_INF)
    log_probs = torch.log_softmax(logits, dim=-1)
    if pattern == "dup_after_softmax":
        # Ties straight in the log-probs: duplicated columns, a constant row.
        for _ in range(max(1, vocab // 2)):
            a, b = torch.randint(0, vocab, (2,), generator=gen).tolist()
            log_probs[:, a] = log_probs[:, b]
        log_probs[frames // 2] = -math.log(vocab)
    return log_probs.contiguous()


CTC_SPECS = [
    # (T, V, beam, temperature, pattern)
    (1, 5, 1, 1.0, "plain"),
    (1, 5, 4, 1.0, "plain"),
    (1, 5, 10, 1.0, "plain"),  # beam > V
    (3, 5, 10, 0.1, "constant_rows"),
    (7, 5, 4, 0.5, "plain"),
    (20, 11, 4, 1.0, "repeats"),
    (40, 6, 10, 1.0, "repeats"),
    (33, 7, 10, 0.3, "quantized"),
    (50, 30, 10, 1.0, "dup_columns"),
    (64, 40, 4, 1.0, "constant_rows"),
    (60, 13, 10, 2.0, "dup_after_softmax"),
    (80, 20, 4, 1.0, "neg_inf"),
    # Few finite paths and a wide beam: the beam fills with -inf prefixes,
    # which tie, so their order is the next-hypothesis table's insertion order.
    (2, 3, 10, 1.0, "plain"),
    (4, 4, 10, 1.0, "neg_inf"),
    (6, 3, 10, 1.0, "neg_inf"),
    (9, 5, 10, 1.0, "neg_inf"),
    (100, 100, 4, 3.0, "blank_heavy"),
    (200, 64, 10, 1.0, "plain"),
    (200, 30, 1, 1.0, "quantized"),
    (200, 500, 10, 5.0, "blank_heavy"),
    (120, 700, 10, 0.05, "plain"),  # nearly flat: many near-ties
    (150, 5000, 10, 3.0, "blank_heavy"),
    (60, 5000, 1, 1.0, "dup_columns"),
    (90, 5000, 4, 0.5, "quantized"),
    (30, 64, 10, 1.0, "dup_after_softmax"),
    (45, 640, 10, 1.0, "dup_after_softmax"),  # 64 * k == V: partial_sort path
    (120, 5000, 10, 1.0, "speechlike"),
    (60, 300, 4, 1.0, "speechlike"),
]


SWEEP_PATTERNS = ["plain", "neg_inf", "quantized", "constant_rows", "dup_after_softmax",
                  "repeats"]


def sweep_specs(gen, count=300):
    """Many tiny utterances: exact ties between whole prefixes (in particular
    between -inf prefixes, whose order is the table's insertion order) are
    rare per utterance, so they are hunted in bulk."""
    specs = []
    for i in range(count):
        T = int(torch.randint(1, 11, (1,), generator=gen))
        V = int(torch.randint(2, 7, (1,), generator=gen))
        beam = [1, 2, 4, 10][i % 4]
        specs.append((T, V, beam, 1.0, SWEEP_PATTERNS[i % len(SWEEP_PATTERNS)]))
    return specs


def ctc_cases(gen, specs, prefix="ctc"):
    made = []
    for T, V, beam, temperature, pattern in specs:
        name = f"{prefix}{len(made)}_t{T}_v{V}_b{beam}_{pattern}"
        log_probs = ctc_log_probs(T, V, temperature, pattern, gen)
        nbest = prefix_beam_search(log_probs, beam)
        tokens, lengths = padded_ids([h for h, _ in nbest])
        greedy, greedy_len = padded_ids(greedy_batch(log_probs.unsqueeze(0), torch.tensor([T])))
        add_case(name, "ctc", {"beam": beam}, log_probs=log_probs, nbest_tokens=tokens,
                 nbest_lengths=lengths, nbest_scores_bits=double_bits([s for _, s in nbest]),
                 greedy_tokens=greedy, greedy_length=greedy_len)
        made.append((name, log_probs, nbest))
    return made


def greedy_batch_cases(gen):
    specs = [(4, 50, 40, [50, 0, 17, 49]), (3, 30, 5000, [30, 12, 1]), (2, 9, 5, [9, 9])]
    for b, (B, T, V, lens) in enumerate(specs):
        log_probs = torch.stack(
            [ctc_log_probs(T, V, 1.0, ["constant_rows", "dup_columns", "quantized"][i % 3], gen)
             for i in range(B)])
        lengths = torch.tensor(lens, dtype=torch.int64)
        hyps = greedy_batch(log_probs, lengths)
        tokens, hyp_lengths = padded_ids(hyps)
        add_case(f"greedy_batch{b}", "greedy_batch", {}, log_probs=log_probs, lengths=lengths,
                 tokens=tokens, token_lengths=hyp_lengths)


def topk_cases(gen):
    rows = {
        "zeros10": torch.zeros(10),
        "zeros40": torch.zeros(40),
        "zeros100": torch.zeros(100),
        "zeros5000": torch.zeros(5000),
        "quantized300": torch.round(torch.randn(300, generator=gen) * 2) / 2,
        "few_values5000": torch.randint(0, 3, (5000,), generator=gen).float(),
        "nan_and_inf70": torch.where(torch.rand(70, generator=gen) < 0.1, float("nan"),
                                     torch.round(torch.randn(70, generator=gen))),
    }
    rows["nan_and_inf70"][5] = NEG_INF
    rows["nan_and_inf70"][6] = float("inf")
    for name, row in rows.items():
        n = row.numel()
        for k in sorted({1, 2, 3, 4, 10, n // 64, n // 64 + 1, n}):
            if 1 <= k <= n:
                _, indices = row.topk(k)
                add_case(f"topk_{name}_k{k}", "topk", {"k": k}, row=row, indices=indices)


RESCORE_WEIGHTS = [(0.0, 0.0), (0.5, 0.0), (0.3, 0.3), (1.0, 0.5), (0.1, 1.0), (2.5, 0.7)]


def rescore_cases(ctc_made, gen):
    for name, log_probs, nbest in ctc_made:
        if len(nbest) < 2 and "_t1_" not in name:
            continue
        vocab = log_probs.size(1)
        sos = eos = vocab - 1
        hyps = [h for h, _ in nbest]
        ctc_scores = [s for _, s in nbest]
        hyps_in, hyps_lens, r_hyps = decoder_inputs(hyps, sos, eos, -1)
        positions = hyps_in.size(1)
        # Decoder outputs are [N, L + 1, V] twice per variant: keep the file
        # small by trying fewer weight pairs on the larger lists.
        size = len(hyps) * positions * vocab
        if size > 600_000:
            continue
        weights = range(len(RESCORE_WEIGHTS)) if size <= 60_000 else (2, 5)
        for w in weights:
            ctc_weight, reverse_weight = RESCORE_WEIGHTS[w]
            for decoder_kind in ("random", "uniform"):
                if decoder_kind == "uniform" and w not in (0, 2):
                    continue
                shape = (len(hyps), positions, vocab)
                if decoder_kind == "uniform":
                    # Every path of one length scores the same: first max wins.
                    left = torch.log_softmax(torch.zeros(shape), dim=-1)
                    right = left.clone()
                else:
                    left = torch.log_softmax(torch.randn(shape, generator=gen) * 2, dim=-1)
                    right = torch.log_softmax(torch.randn(shape, generator=gen) * 2, dim=-1)
                best_index, best_score, totals = rescore(hyps, ctc_scores, left, right, eos,
                                                         ctc_weight, reverse_weight)
                params = {"ctc_case": name, "ctc_weight": ctc_weight,
                          "reverse_weight": reverse_weight, "eos": eos,
                          "best_index": best_index}
                add_case(f"rescore_{name}_w{w}_{decoder_kind}", "rescore", params,
                         left=left, right=right, hyps_in=hyps_in, hyps_lens=hyps_lens,
                         r_hyps=r_hyps, totals=torch.tensor(totals, dtype=torch.float32),
                         best_score_bits=double_bits([best_score]))


def padding_cases(gen):
    # add_sos_eos and reverse_pad_list on padded targets (ignore_id -1).
    for c, lens in enumerate([[5, 3, 0, 1], [2], [0, 0], [7, 7, 4]]):
        width = max(lens)
        ys = torch.randint(1, 50, (len(lens), width), generator=gen)
        for i, n in enumerate(lens):
            ys[i, n:] = -1
        ys_lens = torch.tensor(lens, dtype=torch.int64)
        ys_in, ys_out = add_sos_eos(ys, 50, 51, -1)
        reversed_ys = reverse_pad_list(ys, ys_lens, -1.0).to(torch.int64)
        add_case(f"padding{c}", "padding", {"sos": 50, "eos": 51, "ignore_id": -1},
                 ys_pad=ys, ys_lens=ys_lens, ys_in=ys_in, ys_out=ys_out, reversed=reversed_ys)


# ---- CTC forced alignment (the definition in src/decode/ctc_alignment.h) ----


def brute_force_best(log_probs, tokens, blank=0):
    """The best score over every frame labelling that collapses to `tokens`
    (tiny cases only): checks forced_align's optimum independently."""
    import itertools
    T, V = log_probs.shape
    lp = log_probs.tolist()
    best = NEG_INF
    for path in itertools.product(range(V), repeat=T):
        if collapse(list(path), blank) != list(tokens):
            continue
        best = max(best, sum(float(lp[t][path[t]]) for t in range(T)))
    return best


def align_cases(made):
    count = 0
    for name, log_probs, nbest in made:
        T, V = log_probs.shape
        for which, (hyp, _) in enumerate(nbest[:2]):
            if not hyp:
                continue
            spans, best = forced_align(log_probs, list(hyp))
            if best == NEG_INF:  # no finite path: refused by oasr, tested there
                continue
            if V ** T <= 5000:
                assert best == brute_force_best(log_probs, hyp), (name, hyp)
            add_case(f"align_{name}_h{which}", "align", {}, log_probs=log_probs,
                     tokens=torch.tensor(list(hyp), dtype=torch.int64),
                     spans=torch.tensor(spans, dtype=torch.int64))
            count += 1
    assert count > 20, count


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory to write cases.safetensors to")
    args = parser.parse_args()
    torch.manual_seed(20240612)
    gen = torch.Generator().manual_seed(20240612)
    made = ctc_cases(gen, CTC_SPECS)
    swept = ctc_cases(gen, sweep_specs(gen), prefix="sweep")
    align_cases(made + swept)
    greedy_batch_cases(gen)
    topk_cases(gen)
    rescore_cases(made, gen)
    padding_cases(gen)
    os.makedirs(args.out, exist_ok=True)
    save_file(TENSORS, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(CASES)})


if __name__ == "__main__":
    main()

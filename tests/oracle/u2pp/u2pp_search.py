"""WeNet's U2++ decoding (oracle): CTC greedy search, CTC prefix beam search
and attention rescoring, with WeNet's numeric types and tie rules.

Rules reproduced (from wenet/transformer/search.py and wenet/utils/common.py):

ctc_greedy_search: per frame the top-1 token of the log-probs (frames beyond
  the utterance length count as blank), then merge repeats and drop blanks.

ctc_prefix_beam_search (per utterance, first `length` frames):
  * state per prefix: s (paths ending in blank) and ns (ending in a non-blank),
    float64 log-probs; the initial beam is [((), s=0, ns=-inf)].
  * each frame: the `beam` most likely tokens (torch.topk, descending), and
    for each token u (outer loop, in topk order) and each prefix (inner loop,
    in beam order), with p = float64(logp[u]) and score() = log_add(s, ns):
      u == blank:          next[prefix].s  = log_add(next.s,  score() + p)
      u == last(prefix):   next[prefix].ns = log_add(next.ns, ns + p)
                           next[prefix+u].ns = log_add(next.ns, s + p)
      otherwise:           next[prefix+u].ns = log_add(next.ns, score() + p)
    entries of `next` are created on first touch (that order is kept), then
    sorted by score() descending with a STABLE sort and cut to `beam`.
  * log_add(a, b) = -inf if both are -inf, else m + log(exp(a-m) + exp(b-m))
    with m = max(a, b), in float64 (math.exp / math.log).
  * result: the sorted beam (n-best) and each score().

attention_rescoring (per utterance, over the n-best of the prefix search):
  * left decoder input [sos] + hyp, right decoder input [sos] + reversed(hyp),
    both padded with eos; outputs are log-softmax (float32).
  * score_l = sum_j left[j][hyp[j]] + left[len][eos] accumulated in float32 in
    that order (starting from 0.0); score_r likewise with
    right[len-1-j][hyp[j]] and right[len][eos];
    score = score_l * (1 - rw) + score_r * rw (float32, only when rw > 0);
    score = score + float32(ctc_score * ctc_weight) (product in float64).
  * the best hypothesis is the first with a strictly greater score.
"""

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

NEG_INF = -float("inf")


def log_add(a: float, b: float) -> float:
    if a == NEG_INF and b == NEG_INF:
        return NEG_INF
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def collapse(frame_tokens: Sequence[int], blank: int = 0) -> List[int]:
    out: List[int] = []
    previous = None
    for tok in frame_tokens:
        if tok != previous and tok != blank:
            out.append(tok)
        previous = tok
    return out


def ctc_greedy_search(log_probs: torch.Tensor, lengths: torch.Tensor,
                      blank: int = 0) -> List[List[int]]:
    """log_probs (B, T, V); returns one token list per utterance."""
    best = log_probs.topk(1, dim=2).indices.squeeze(2)
    results = []
    for b in range(log_probs.size(0)):
        results.append(collapse(best[b, :int(lengths[b])].tolist(), blank))
    return results


def greedy_margin(log_probs: torch.Tensor, length: int) -> float:
    """Smallest top-1 minus top-2 log-prob over the first `length` frames."""
    if length == 0:
        return math.inf
    top2 = log_probs[:length].topk(2, dim=-1).values
    return float((top2[:, 0] - top2[:, 1]).min())


class _Prefix:
    __slots__ = ("s", "ns")

    def __init__(self, s=NEG_INF, ns=NEG_INF):
        self.s = s
        self.ns = ns

    def score(self) -> float:
        return log_add(self.s, self.ns)


def ctc_prefix_beam_search(log_probs: torch.Tensor, length: int, beam: int,
                           blank: int = 0, margins: Optional[Dict[str, float]] = None
                           ) -> List[Tuple[Tuple[int, ...], float]]:
    """log_probs (T, V) of one utterance; returns the n-best as
    [(tokens, score)], best first. When `margins` is given it receives the
    closest calls (distance to a tie) of the search: topk_gap (k-th vs k+1-th
    token of a frame), prune_gap (last kept vs first dropped prefix) and
    final_gap (best vs second n-best)."""
    hyps: List[Tuple[Tuple[int, ...], _Prefix]] = [((), _Prefix(0.0, NEG_INF))]
    topk_gap = prune_gap = math.inf
    for t in range(length):
        frame = log_probs[t]
        grown: Dict[Tuple[int, ...], _Prefix] = {}

        def entry(key):
            if key not in grown:
                grown[key] = _Prefix()
            return grown[key]

        top = frame.topk(min(beam + 1, frame.numel()))
        if top.values.numel() > beam:
            topk_gap = min(topk_gap, float(top.values[beam - 1] - top.values[beam]))
        for u in top.indices[:beam].tolist():
            p = frame[u].item()
            for prefix, st in hyps:
                if u == blank:
                    e = entry(prefix)
                    e.s = log_add(e.s, st.score() + p)
                elif prefix and prefix[-1] == u:
                    e = entry(prefix)
                    e.ns = log_add(e.ns, st.ns + p)
                    e = entry(prefix + (u,))
                    e.ns = log_add(e.ns, st.s + p)
                else:
                    e = entry(prefix + (u,))
                    e.ns = log_add(e.ns, st.score() + p)
        ranked = sorted(grown.items(), key=lambda kv: kv[1].score(), reverse=True)
        if len(ranked) > beam:
            prune_gap = min(prune_gap, ranked[beam - 1][1].score() - ranked[beam][1].score())
        hyps = ranked[:beam]
    if margins is not None:
        margins["topk_gap"] = topk_gap
        margins["prune_gap"] = prune_gap
        margins["final_gap"] = (hyps[0][1].score() - hyps[1][1].score()
                                if len(hyps) > 1 else math.inf)
    return [(prefix, st.score()) for prefix, st in hyps]


def rescoring_scores(left: torch.Tensor, right: torch.Tensor, hyps: List[List[int]],
                     ctc_scores: List[float], eos: int, ctc_weight: float,
                     reverse_weight: float) -> List[Dict[str, float]]:
    """Per-hypothesis scores with WeNet's float32/float64 mixture.
    left/right: (N, L, V) decoder log-probs from U2pp.decoder_log_probs."""
    rows = []
    f32 = np.float32
    for i, hyp in enumerate(hyps):
        n = len(hyp)
        score_l = f32(0.0)
        for j, w in enumerate(hyp):
            score_l = f32(score_l + f32(left[i, j, w].item()))
        score_l = f32(score_l + f32(left[i, n, eos].item()))
        score_r = f32(0.0)
        for j, w in enumerate(hyp):
            score_r = f32(score_r + f32(right[i, n - 1 - j, w].item()))
        score_r = f32(score_r + f32(right[i, n, eos].item()))
        score = score_l
        if reverse_weight > 0:
            score = f32(f32(score_l * f32(1.0 - reverse_weight)) +
                        f32(score_r * f32(reverse_weight)))
        total = f32(score + f32(ctc_scores[i] * ctc_weight))
        rows.append({"left": float(score_l), "right": float(score_r),
                     "decoder": float(score), "ctc": float(ctc_scores[i]),
                     "total": float(total)})
    return rows


def attention_rescoring(model, encoder_out: torch.Tensor, nbest, ctc_weight: float,
                        reverse_weight: float):
    """encoder_out (1, T, D) of one utterance (unpadded); nbest from
    ctc_prefix_beam_search. Returns (best tokens, best total, per-hyp rows)."""
    hyps = [list(h) for h, _ in nbest]
    ctc_scores = [s for _, s in nbest]
    left, right = model.decoder_log_probs(encoder_out, hyps)
    rows = rescoring_scores(left, right, hyps, ctc_scores, model.cfg.eos, ctc_weight,
                            reverse_weight)
    best_index, best = 0, NEG_INF
    for i, row in enumerate(rows):
        if row["total"] > best:
            best, best_index = row["total"], i
    return hyps[best_index], best, rows


def forced_align(log_probs, tokens, blank=0):
    """CTC forced alignment (src/decode/ctc_alignment.h states the rule).
    Viterbi over blank, t1, blank, ..., tL, blank. Predecessors are tried
    as stay, advance by one, skip a blank (between different tokens); a later
    one wins only when strictly better; at the end a blank ending wins ties.
    Returns ([(start, end)] per token, best path score)."""
    T = log_probs.shape[0]
    lp = log_probs.tolist()
    labels = []
    for t in tokens:
        labels += [blank, t]
    labels.append(blank)
    S = len(labels)
    score = [NEG_INF] * S
    score[0] = float(lp[0][blank])
    score[1] = float(lp[0][tokens[0]])
    back = [[None] * S for _ in range(T)]
    for t in range(1, T):
        nxt = [NEG_INF] * S
        for s in range(S):
            cands = [s]
            if s >= 1:
                cands.append(s - 1)
            if s >= 2 and s % 2 == 1 and labels[s] != labels[s - 2]:
                cands.append(s - 2)
            best, frm = score[cands[0]], cands[0]
            for c in cands[1:]:
                if score[c] > best:
                    best, frm = score[c], c
            nxt[s] = NEG_INF if best == NEG_INF else best + float(lp[t][labels[s]])
            back[t][s] = frm
        score = nxt
    state = S - 1 if score[S - 1] >= score[S - 2] else S - 2
    best_score = score[state]
    spans = [[-1, -1] for _ in tokens]
    for t in range(T - 1, -1, -1):
        if state % 2 == 1:
            k = state // 2
            if spans[k][1] < 0:
                spans[k][1] = t + 1
            spans[k][0] = t
        if t > 0:
            state = back[t][state]
    return spans, best_score

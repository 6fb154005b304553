#!/usr/bin/env python3
"""Decodes jsonl manifests with a trained model in PyTorch and prints the WER
per manifest, for CTC greedy search and attention rescoring, offline and with
chunk-16 attention masks (what streaming computes).

  python3 tools/train/evaluate.py --ckpt RUN_DIR/ckpt --manifest M.jsonl [M2 ...]
          [--modes offline,chunk16] [--methods ctc_greedy,attention_rescoring]
          [--device cuda] [--json OUT.json]

Hypotheses and references are compared after the same normalization
(uppercase, characters outside A-Z and apostrophe become spaces), so both
sides use the model's alphabet; the score is the word edit distance over the
reference word count, summed over the manifest.
"""

import argparse
import json
import math
import os
import re
import sys
import time
from typing import Dict, List, Sequence, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checkpoint import load_checkpoint  # noqa: E402
from data import ids_to_text, read_manifest, read_wav  # noqa: E402
from features import SAMPLE_RATE, KaldiFbank, resample  # noqa: E402
from model import ModelConfig, U2ppModel  # noqa: E402

MODES = {"offline": -1, "chunk16": 16}
NEG_INF = -float("inf")


def normalize_words(text: str) -> List[str]:
    return re.sub(r"[^A-Z']+", " ", text.upper()).split()


def word_errors(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Levenshtein distance over words (substitutions, insertions, deletions)."""
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1,
                             previous[j - 1] + (r != h))
        previous = current
    return previous[-1]


def _log_add(a: float, b: float) -> float:
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def prefix_beam_search(top_values, top_indices, length: int, beam: int,
                       blank: int = 0) -> List[Tuple[Tuple[int, ...], float]]:
    """CTC prefix beam search (WeNet's rules) over precomputed per-frame
    top-k lists (length x beam python lists). Returns the n-best."""
    hyps = {(): (0.0, NEG_INF)}  # prefix -> (ends in blank, ends in non-blank)
    for t in range(length):
        grown: Dict[Tuple[int, ...], List[float]] = {}
        for p, u in zip(top_values[t], top_indices[t]):
            for prefix, (s, ns) in hyps.items():
                if u == blank:
                    e = grown.setdefault(prefix, [NEG_INF, NEG_INF])
                    e[0] = _log_add(e[0], _log_add(s, ns) + p)
                elif prefix and prefix[-1] == u:
                    e = grown.setdefault(prefix, [NEG_INF, NEG_INF])
                    e[1] = _log_add(e[1], ns + p)
                    e = grown.setdefault(prefix + (u,), [NEG_INF, NEG_INF])
                    e[1] = _log_add(e[1], s + p)
                else:
                    e = grown.setdefault(prefix + (u,), [NEG_INF, NEG_INF])
                    e[1] = _log_add(e[1], _log_add(s, ns) + p)
        ranked = sorted(grown.items(), key=lambda kv: _log_add(*kv[1]), reverse=True)[:beam]
        hyps = {k: (v[0], v[1]) for k, v in ranked}
    return [(k, _log_add(*v)) for k, v in hyps.items()]


@torch.no_grad()
def rescore(model: U2ppModel, enc: torch.Tensor, nbest, ctc_weight: float,
            reverse_weight: float) -> List[int]:
    """WeNet's attention rescoring for one utterance: enc (1, T, D)."""
    cfg = model.cfg
    hyps = [list(h) for h, _ in nbest]
    n = len(hyps)
    steps = max(len(h) for h in hyps) + 1
    dev = enc.device
    left = torch.full((n, steps), cfg.eos, dtype=torch.long)
    right = torch.full((n, steps), cfg.eos, dtype=torch.long)
    for i, h in enumerate(hyps):
        left[i, 0] = right[i, 0] = cfg.sos
        if h:
            left[i, 1:len(h) + 1] = torch.tensor(h)
            right[i, 1:len(h) + 1] = torch.tensor(h[::-1])
    lens = torch.tensor([len(h) + 1 for h in hyps], device=dev)
    mem = enc.expand(n, -1, -1)
    allowed = torch.ones(n, 1, enc.size(1), dtype=torch.bool, device=dev)
    lp_l = torch.log_softmax(
        model.decoder.left_decoder(mem, allowed, left.to(dev), lens).float(), -1).cpu()
    lp_r = torch.log_softmax(
        model.decoder.right_decoder(mem, allowed, right.to(dev), lens).float(), -1).cpu()
    best, best_score = hyps[0], NEG_INF
    for i, h in enumerate(hyps):
        k = len(h)
        sl = sum(float(lp_l[i, j, w]) for j, w in enumerate(h)) + float(lp_l[i, k, cfg.eos])
        sr = sum(float(lp_r[i, k - 1 - j, w]) for j, w in enumerate(h)) + float(lp_r[i, k,
                                                                                      cfg.eos])
        score = sl * (1 - reverse_weight) + sr * reverse_weight + nbest[i][1] * ctc_weight
        if score > best_score:
            best, best_score = h, score
    return best


def load_audio_8k(paths: List[str], device) -> List[torch.Tensor]:
    out = []
    for p in paths:
        x, rate = read_wav(p)
        w = torch.from_numpy(x).to(device)
        if rate != SAMPLE_RATE:
            g = math.gcd(rate, SAMPLE_RATE)
            w = resample(w.unsqueeze(0), rate // g, SAMPLE_RATE // g)[0]
        out.append(w.round().clamp(-32768, 32767))
    return out


@torch.no_grad()
def evaluate_manifest(model: U2ppModel, manifest: str, device, modes=("offline", "chunk16"),
                      methods=("ctc_greedy", "attention_rescoring"), beam: int = 10,
                      ctc_weight: float = 0.3, reverse_weight: float = 0.3,
                      batch_seconds: float = 300.0, max_utts: int = 0, log=print) -> dict:
    model.eval()
    entries = read_manifest(manifest)
    if max_utts > 0:
        entries = entries[:max_utts]
    fbank = KaldiFbank(device=device)
    waves = load_audio_8k([e["path"] for e in entries], device)
    order = sorted(range(len(entries)), key=lambda i: waves[i].numel())
    results = {}
    start = time.time()
    for mode in modes:
        chunk = MODES[mode]
        hyps: Dict[str, List[List[int]]] = {m: [None] * len(entries) for m in methods}
        pos = 0
        while pos < len(order):
            longest, take = 0, []
            while pos < len(order):
                n = waves[order[pos]].numel()
                if take and max(longest, n) * (len(take) + 1) > batch_seconds * SAMPLE_RATE:
                    break
                take.append(order[pos])
                longest = max(longest, n)
                pos += 1
            wave = torch.zeros(len(take), longest, device=device)
            for row, i in enumerate(take):
                wave[row, :waves[i].numel()] = waves[i]
            lengths = torch.tensor([waves[i].numel() for i in take], device=device)
            feats, counts = fbank(wave, lengths)
            lp, enc, valid, enc_lens = model.ctc_log_probs(feats, counts, chunk)
            best = lp.argmax(-1).cpu()
            lens = enc_lens.cpu().tolist()
            top_v, top_i = lp.topk(beam, dim=-1)
            top_v, top_i = top_v.double().cpu().tolist(), top_i.cpu().tolist()
            for row, i in enumerate(take):
                seq = best[row, :lens[row]].tolist()
                greedy = [t for k, t in enumerate(seq) if t != 0 and (k == 0 or t != seq[k - 1])]
                if "ctc_greedy" in hyps:
                    hyps["ctc_greedy"][i] = greedy
                if "attention_rescoring" in hyps:
                    nbest = prefix_beam_search(top_v[row], top_i[row], lens[row], beam)
                    if not nbest or not any(h for h, _ in nbest):
                        hyps["attention_rescoring"][i] = greedy
                    else:
                        hyps["attention_rescoring"][i] = rescore(
                            model, enc[row:row + 1, :lens[row]], nbest, ctc_weight,
                            reverse_weight)
        for method, per_utt in hyps.items():
            errors = words = 0
            examples = []
            for e, h in zip(entries, per_utt):
                ref, hyp = normalize_words(e["text"]), normalize_words(ids_to_text(h))
                errors += word_errors(ref, hyp)
                words += len(ref)
                if len(examples) < 3:
                    examples.append({"id": e["id"], "ref": " ".join(ref), "hyp": " ".join(hyp)})
            wer = 100.0 * errors / max(words, 1)
            results[f"{mode}/{method}"] = {"wer": wer, "errors": errors, "words": words,
                                           "examples": examples}
            log(f"  {os.path.basename(manifest)} {mode:8s} {method:20s} WER {wer:6.2f}% "
                f"({errors}/{words}, {len(entries)} utts)")
    results["seconds"] = time.time() - start
    return results


def load_model(ckpt_dir: str, device) -> U2ppModel:
    meta, state, _ = load_checkpoint(ckpt_dir)
    model = U2ppModel(ModelConfig(**meta["config"]))
    model.load_state_dict(state, strict=True)
    return model.to(device).eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True, help="checkpoint dir written by train.py")
    parser.add_argument("--manifest", nargs="+", required=True)
    parser.add_argument("--modes", default="offline,chunk16")
    parser.add_argument("--methods", default="ctc_greedy,attention_rescoring")
    parser.add_argument("--beam", type=int, default=10)
    parser.add_argument("--ctc-weight", type=float, default=0.3)
    parser.add_argument("--reverse-weight", type=float, default=0.3)
    parser.add_argument("--max-utts", type=int, default=0, help="0: all")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    model = load_model(args.ckpt, args.device)
    report = {}
    for m in args.manifest:
        report[m] = evaluate_manifest(model, m, args.device, args.modes.split(","),
                                      args.methods.split(","), args.beam, args.ctc_weight,
                                      args.reverse_weight, max_utts=args.max_utts)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()

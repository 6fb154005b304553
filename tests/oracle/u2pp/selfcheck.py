#!/usr/bin/env python3
"""Internal-consistency checks of a directory written by make_u2pp_case.py.

  selfcheck.py DIR [--list-tensors]

Exits non-zero when a check fails. Checks:
  state_dict   final.pt keys/shapes/dtypes == the oracle's WeNet layout; a
               torch.save/torch.load round trip is bit-exact
  determinism  recomputing every reference tensor from the files on disk
               (wav -> fbank -> model) reproduces reference.safetensors bit
               for bit, and every hypothesis in summary.json
  streaming    chunk-by-chunk encoding (KV + CNN caches) == one forward with
               WeNet's chunk mask, for left chunks -1 and 4 (encoder output
               |diff| <= 3e-5, CTC log-probs <= 5e-5)
  chunk mask   offline != chunk16 whenever T' > 16 (the mask is active);
               chunk16_left4 == chunk16 when T' <= 80, != when T' > 80
  batch        padded batch forward == single forward on valid frames
               (|diff| <= 3e-5) and the same hypotheses for every method
  ctc bound    each prefix-search score <= log P(hyp) from torch's CTC loss
               (the beam sums a subset of the alignments)
  decoder      row j of a teacher-forced decoder pass == the last row of a
               pass over the first j+1 tokens (causal masking is right)
  variety      (default case) every hypothesis non-empty; the three methods
               disagree on some utterance in every mode
  tie case     the designed prefix tie keeps WeNet's insertion order
Margins (distance of each decision to a tie) are printed; values below
1e-4 are flagged because fp32 noise of another implementation could flip them.
"""

import argparse
import io
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from u2pp_model import U2pp  # noqa: E402
from u2pp_reference import (MODES, MODES_BY_NAME, decode_batch,  # noqa: E402
                            decode_modes_single, load_model_dir, wav_features)
from u2pp_search import ctc_prefix_beam_search  # noqa: E402

# Two summation orders of the same fp32 function: the encoder output (after
# LayerNorm, |x| up to ~4, ulp 4.8e-7) agrees to a few ulps per block; the
# CTC log-probs reach ~-30, where one float32 ulp is 1.9e-6, and differ by up
# to ~10 ulps.
# Observed: <= 6e-6 (tiny, 2 blocks) and <= 1.2e-5 (full, 12 blocks).
STREAM_TOL = 3e-5
LOGPROB_TOL = 5e-5
BATCH_TOL = 3e-5
MARGIN_WARN = 1e-4
METHODS = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention_rescoring"]


class Checker:

    def __init__(self):
        self.failures = []

    def check(self, ok: bool, what: str):
        if not ok:
            self.failures.append(what)
            print(f"  FAIL {what}")
        return ok


def max_diff(a, b) -> float:
    return float((a - b).abs().max()) if a.numel() else 0.0


def check_state_dict(chk, model_dir, model, list_tensors):
    print("[state_dict]")
    state = torch.load(os.path.join(model_dir, "final.pt"), map_location="cpu")
    expected = U2pp(model.cfg).state_dict()
    chk.check(list(state) == list(expected) or set(state) == set(expected),
              "final.pt keys equal the WeNet layout")
    for name, t in expected.items():
        if name not in state:
            continue
        want_dtype = torch.int64 if name.endswith("num_batches_tracked") else torch.float32
        chk.check(state[name].shape == t.shape and state[name].dtype == want_dtype,
                  f"{name} shape/dtype")
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    again = torch.load(buf)
    chk.check(all(torch.equal(state[k], again[k]) for k in state), "torch.save round trip")
    print(f"  {len(state)} tensors, {sum(t.numel() for t in state.values())} values")
    if list_tensors:
        for name, t in state.items():
            print(f"    {name} {list(t.shape)} {str(t.dtype).replace('torch.', '')}")


def check_determinism(chk, model_dir, model, units, ref, summary):
    print("[determinism] recomputing all references from the files on disk")
    recomputed = {}
    for name, info in summary["utterances"].items():
        wav, feats = wav_features(os.path.join(model_dir, info["wav"]))
        chk.check(torch.equal(feats, ref[f"{name}/fbank"]), f"{name} fbank")
        chk.check(torch.equal(wav[0], ref[f"{name}/waveform_16k"]), f"{name} waveform")
        tensors, modes = decode_modes_single(model, feats, units)
        recomputed[name] = (feats, tensors, modes)
        for mode, outs in tensors.items():
            for role, t in outs.items():
                key = f"{name}/{mode}/{role}"
                chk.check(torch.equal(t, ref[key]),
                          f"{key} bit-exact (max diff {max_diff(t, ref[key]):.3g})")
            for method in METHODS:
                chk.check(modes[mode][method]["tokens"] == info["modes"][mode][method]["tokens"],
                          f"{name}/{mode} {method} tokens")
    return recomputed


def check_streaming(chk, recomputed):
    print(f"[streaming] chunk-by-chunk vs chunk-mask forward (tol {STREAM_TOL}, "
          f"log-probs {LOGPROB_TOL})")
    for name, (_, tensors, _) in recomputed.items():
        for stream, mask in [("chunk16", "chunk16_mask"),
                             ("chunk16_left4", "chunk16_left4_mask")]:
            for role in ("encoder_out", "ctc_log_probs"):
                a, b = tensors[stream][role], tensors[mask][role]
                tol = STREAM_TOL if role == "encoder_out" else LOGPROB_TOL
                ok = a.shape == b.shape and max_diff(a, b) <= tol
                chk.check(ok, f"{name} {stream} vs {mask} {role}: "
                              f"{max_diff(a, b) if a.shape == b.shape else 'shape'}")
        worst = max(max_diff(tensors[s]["encoder_out"], tensors[m]["encoder_out"])
                    for s, m in [("chunk16", "chunk16_mask"),
                                 ("chunk16_left4", "chunk16_left4_mask")])
        frames = tensors["offline"]["encoder_out"].size(0)
        off_vs_chunk = max_diff(tensors["offline"]["encoder_out"],
                                tensors["chunk16"]["encoder_out"])
        left_vs_full = max_diff(tensors["chunk16_left4"]["encoder_out"],
                                tensors["chunk16"]["encoder_out"])
        print(f"  {name}: T'={frames} stream-vs-mask {worst:.2e}  offline-vs-chunk16 "
              f"{off_vs_chunk:.2e}  left4-vs-full {left_vs_full:.2e}")
        if frames > 16:
            chk.check(off_vs_chunk > 1e-3, f"{name}: chunk mask changes the output")
        if frames > 80:
            chk.check(left_vs_full > 1e-3, f"{name}: left4 changes the output")
        else:
            chk.check(left_vs_full <= STREAM_TOL, f"{name}: left4 == full when T' <= 80")


def check_batch(chk, model, units, recomputed, ref, summary):
    print(f"[batch] padded batch vs single (tol {BATCH_TOL})")
    names = summary["batch"]["utterances"]
    feats = [recomputed[n][0] for n in names]
    for mode_name, per_utt in summary["batch"]["modes"].items():
        tensors, summaries = decode_batch(model, feats, units, MODES_BY_NAME[mode_name])
        chk.check(torch.equal(tensors["encoder_out"], ref[f"batch/{mode_name}/encoder_out"]),
                  f"batch/{mode_name}/encoder_out bit-exact")
        worst = 0.0
        for b, name in enumerate(names):
            length = int(tensors["encoder_lengths"][b])
            single = recomputed[name][1][mode_name]["encoder_out"]
            chk.check(length == single.size(0), f"batch {mode_name} {name} length")
            worst = max(worst, max_diff(tensors["encoder_out"][b, :length], single))
            for method in METHODS:
                got = summaries[b][method]["tokens"]
                chk.check(got == recomputed[name][2][mode_name][method]["tokens"],
                          f"batch {mode_name} {name} {method} == single")
                chk.check(got == per_utt[name][method]["tokens"],
                          f"batch {mode_name} {name} {method} == summary")
        chk.check(worst <= BATCH_TOL, f"batch {mode_name} max diff {worst:.3g}")
        print(f"  {mode_name}: {len(names)} utterances, max |batch - single| {worst:.2e}")


def check_ctc_bound(chk, recomputed):
    print("[ctc bound] prefix-search score vs exact log P(hyp) (CTC forward, float64)")
    worst_gap = 0.0
    for name, (_, tensors, modes) in recomputed.items():
        for mode in ("offline", "chunk16"):
            log_probs = tensors[mode]["ctc_log_probs"].double()
            for entry in modes[mode]["ctc_prefix_beam_search"]["nbest"][:3]:
                hyp = entry["tokens"]
                exact = -F.ctc_loss(log_probs.unsqueeze(1), torch.tensor([hyp or [0]])[:, :len(hyp)],
                                    torch.tensor([log_probs.size(0)]), torch.tensor([len(hyp)]),
                                    reduction="sum", zero_infinity=False).item()
                chk.check(entry["score"] <= exact + 1e-9,
                          f"{name}/{mode} beam score {entry['score']} <= log P {exact}")
                worst_gap = max(worst_gap, exact - entry["score"])
    print(f"  largest (log P - beam score) over the top-3 n-best: {worst_gap:.3g}")


def check_decoder_causality(chk, model, recomputed):
    print("[decoder] teacher-forced rows == incremental prefixes")
    name = sorted(recomputed)[0]
    _, tensors, modes = recomputed[name]
    memory = tensors["offline"]["encoder_out"].unsqueeze(0)
    hyp = modes["offline"]["attention_rescoring"]["tokens"][:8]
    left, right = model.decoder_log_probs(memory, [hyp])
    worst = 0.0
    for j in range(len(hyp) + 1):
        part_l, _ = model.decoder_log_probs(memory, [hyp[:j]])
        worst = max(worst, max_diff(part_l[0, j], left[0, j]))
    chk.check(worst <= 1e-5, f"left decoder causal rows ({worst:.3g})")
    print(f"  {name}: {len(hyp) + 1} rows, max diff {worst:.2e}")


def check_variety_and_margins(chk, recomputed, default_case):
    """Non-empty, varied hypotheses are a designed property of the default
    case (the one oasr's tests use); for other options they are reported."""
    print("[variety / margins]")
    lows = []
    for mode in MODES:
        disagree = 0
        for name, (_, _, modes) in recomputed.items():
            m = modes[mode.name]
            toks = [m[meth]["tokens"] for meth in METHODS]
            for meth, t in zip(METHODS, toks):
                if default_case:
                    chk.check(len(t) > 0, f"{name}/{mode.name} {meth} non-empty")
                elif not t:
                    print(f"  NOTE empty hypothesis: {name}/{mode.name} {meth}")
            disagree += toks[0] != toks[1] or toks[1] != toks[2]
            for key, value in m["margins"].items():
                if value is not None and value < MARGIN_WARN:
                    lows.append(f"{name}/{mode.name} {key}={value:.2e}")
        if default_case:
            chk.check(disagree > 0, f"{mode.name}: methods disagree somewhere")
        print(f"  {mode.name}: methods disagree on {disagree}/{len(recomputed)} utterances")
    for key in ["greedy_top1_gap", "topk_gap", "prune_gap", "final_gap", "rescoring_gap"]:
        smallest = min((m[mode.name]["margins"][key] for _, _, m in recomputed.values()
                        for mode in MODES if m[mode.name]["margins"][key] is not None),
                       default=float("inf"))
        print(f"  smallest {key}: {smallest:.3g}")
    for low in lows:
        print(f"  NOTE margin below {MARGIN_WARN}: {low}")


def check_tie_case(chk, summary, ref):
    print("[tie case]")
    case = summary["search_cases"]["swap_tie"]
    nbest = case["ctc_prefix_beam_search_nbest"]
    order = [tuple(e["tokens"]) for e in nbest]
    scores = {tuple(e["tokens"]): e["score"] for e in nbest}
    chk.check((3, 2) in scores and (2, 3) in scores and scores[(3, 2)] == scores[(2, 3)],
              "swap_tie: (3,2) and (2,3) tie exactly")
    if (3, 2) in scores and (2, 3) in scores:
        chk.check(order.index((3, 2)) < order.index((2, 3)),
                  "swap_tie: first-inserted prefix (3,2) ranks first")
    again = ctc_prefix_beam_search(ref["search/swap_tie/log_probs"], 3, case["beam_size"])
    chk.check([list(h) for h, _ in again] == [e["tokens"] for e in nbest], "swap_tie rerun")
    print(f"  n-best {order}")


def print_hypotheses(recomputed):
    print("[hypotheses]")
    for name, (_, _, modes) in recomputed.items():
        for mode in ("offline", "chunk16", "chunk16_left4"):
            m = modes[mode]
            print(f"  {name} {mode} (T'={m['encoder_frames']})")
            for meth in METHODS:
                print(f"    {meth:24s} {m[meth]['text']}")


def main():
    parser = argparse.ArgumentParser(description="U2++ oracle self-check")
    parser.add_argument("dir")
    parser.add_argument("--list-tensors", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the generator's setting; keeps results bit-identical
    chk = Checker()
    model, _, units = load_model_dir(args.dir)
    ref = load_file(os.path.join(args.dir, "reference", "reference.safetensors"))
    with open(os.path.join(args.dir, "reference", "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    check_state_dict(chk, args.dir, model, args.list_tensors)
    recomputed = check_determinism(chk, args.dir, model, units, ref, summary)
    check_streaming(chk, recomputed)
    check_batch(chk, model, units, recomputed, ref, summary)
    check_ctc_bound(chk, recomputed)
    check_decoder_causality(chk, model, recomputed)
    check_variety_and_margins(chk, recomputed, summary.get("default_case", False))
    check_tie_case(chk, summary, ref)
    print_hypotheses(recomputed)
    if chk.failures:
        print(f"selfcheck: {len(chk.failures)} check(s) FAILED")
        return 1
    print("selfcheck: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

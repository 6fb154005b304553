"""Loads a WeNet U2++ directory with the oracle model and computes reference
outputs exactly as WeNet's decode() would (see u2pp_search.py for the rules).

Encoder modes (WeNet's names in parentheses):
  offline             decoding_chunk_size=-1 (full attention)
  chunk16             decoding_chunk_size=16, num_decoding_left_chunks=-1,
                      simulate_streaming=True  (forward_chunk_by_chunk)
  chunk16_left4       as chunk16 with num_decoding_left_chunks=4
  chunk16_mask        decoding_chunk_size=16, left=-1, simulate_streaming=False
                      (one forward with the chunk attention mask)
  chunk16_left4_mask  as chunk16_mask with num_decoding_left_chunks=4
The streaming and mask variants compute the same function (WeNet's design);
they differ only by float rounding, which selfcheck.py bounds.
"""

import math
import os
from dataclasses import dataclass
from typing import Dict, List

import torch
import yaml

from u2pp_frontend import fbank, load_json_cmvn, read_wav, to_model_input
from u2pp_model import U2pp, U2ppConfig
from u2pp_search import (attention_rescoring, ctc_greedy_search, ctc_prefix_beam_search,
                         forced_align, greedy_margin)


@dataclass(frozen=True)
class Mode:
    name: str
    chunk_size: int
    left_chunks: int
    simulate_streaming: bool


MODES = [
    Mode("offline", -1, -1, False),
    Mode("chunk16", 16, -1, True),
    Mode("chunk16_left4", 16, 4, True),
    Mode("chunk16_mask", 16, -1, False),
    Mode("chunk16_left4_mask", 16, 4, False),
]
MODES_BY_NAME = {m.name: m for m in MODES}

# Decoding options: beam 10 and the weights of WeNet's aishell U2++ run.sh
# (ctc_weight=0.3, reverse_weight=0.5 for attention_rescoring).
DECODE = {"beam_size": 10, "ctc_weight": 0.3, "reverse_weight": 0.5, "blank_id": 0}


def resolve_beside(model_dir: str, recorded: str) -> str:
    """WeNet directories record training-time paths; use the file beside the
    checkpoint when the recorded one does not exist."""
    if recorded and os.path.exists(recorded):
        return recorded
    return os.path.join(model_dir, os.path.basename(recorded))


def read_units(path: str) -> List[str]:
    units = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split(" ")
            if len(parts) == 2:
                units[int(parts[1])] = parts[0]
    return [units[i] for i in range(len(units))]


def tokens_to_text(tokens: List[int], units: List[str]) -> str:
    """WeNet's CharTokenizer.detokenize (what recognize.py prints): the units
    concatenated, the word-boundary mark U+2581 kept."""
    return "".join(units[t] for t in tokens)


def spaced_text(text: str) -> str:
    """The same text for display: U+2581 -> space, ends stripped."""
    return text.replace("\u2581", " ").strip()


def _hyp(tokens: List[int], units: List[str]) -> Dict:
    text = tokens_to_text(tokens, units)
    return {"tokens": tokens, "text": text, "text_spaced": spaced_text(text)}


def load_model_dir(model_dir: str, checkpoint: str = "final.pt"):
    """Returns (model, train.yaml dict, units)."""
    with open(os.path.join(model_dir, "train.yaml"), encoding="utf-8") as f:
        conf = yaml.safe_load(f)
    cfg = U2ppConfig.from_train_yaml(conf)
    state = torch.load(os.path.join(model_dir, checkpoint), map_location="cpu")
    cfg.persistent_pos_tables = "encoder.embed.pos_enc.pe" in state
    model = U2pp(cfg)
    model.load_state_dict(state, strict=True)
    if "cmvn_conf" in conf:
        cmvn_file, is_json = conf["cmvn_conf"]["cmvn_file"], conf["cmvn_conf"]["is_json_cmvn"]
    else:
        cmvn_file, is_json = conf["cmvn_file"], conf["is_json_cmvn"]
    if not is_json:
        raise ValueError("this oracle reads JSON global_cmvn only")
    mean, istd = load_json_cmvn(resolve_beside(model_dir, cmvn_file))
    if not (torch.equal(mean, model.encoder.global_cmvn.mean)
            and torch.equal(istd, model.encoder.global_cmvn.istd)):
        raise ValueError("global_cmvn file disagrees with encoder.global_cmvn in final.pt")
    tok = conf.get("tokenizer_conf") or {}
    units_path = resolve_beside(model_dir, tok.get("symbol_table_path", "units.txt"))
    units = read_units(units_path)
    if len(units) != cfg.vocab_size:
        raise ValueError(f"{units_path} has {len(units)} units, model has {cfg.vocab_size}")
    return model, conf, units


def wav_features(path: str):
    """Returns (16 kHz mono waveform (1, N) in int16 range, fbank (T, 80))."""
    samples, rate = read_wav(path)
    wav = to_model_input(samples, rate)
    return wav, fbank(wav)


@torch.no_grad()
def decode_modes_single(model, feats: torch.Tensor, units: List[str], modes=MODES,
                        decode=DECODE):
    """One utterance (T, 80 fbank before CMVN) through every mode.
    Returns ({mode: {"encoder_out", "ctc_log_probs"}}, {mode: summary})."""
    tensors, summary = {}, {}
    lengths = torch.tensor([feats.size(0)])
    for mode in modes:
        enc, enc_lens = model.encode(feats.unsqueeze(0), lengths, mode.chunk_size,
                                     mode.left_chunks, mode.simulate_streaming)
        log_probs = model.ctc.log_softmax(enc)
        tensors[mode.name] = {"encoder_out": enc[0], "ctc_log_probs": log_probs[0]}
        summary[mode.name] = decode_one(model, enc[0], log_probs[0], int(enc_lens[0]),
                                        units, decode)
    return tensors, summary


def decode_one(model, enc: torch.Tensor, log_probs: torch.Tensor, length: int,
               units: List[str], decode=DECODE) -> Dict:
    """All three methods on one utterance's encoder output (T', D)."""
    blank = decode["blank_id"]
    greedy = ctc_greedy_search(log_probs.unsqueeze(0), torch.tensor([length]), blank)[0]
    margins = {"greedy_top1_gap": greedy_margin(log_probs, length)}
    nbest = ctc_prefix_beam_search(log_probs, length, decode["beam_size"], blank, margins)
    best, best_score, rows = attention_rescoring(
        model, enc[:length].unsqueeze(0), nbest, decode["ctc_weight"],
        decode["reverse_weight"])
    totals = sorted((r["total"] for r in rows), reverse=True)
    margins["rescoring_gap"] = totals[0] - totals[1] if len(totals) > 1 else math.inf
    # JSON has no Infinity: a decision that was never taken is null.
    margins = {k: (v if math.isfinite(v) else None) for k, v in margins.items()}
    prefix_best = list(nbest[0][0])

    def frames(tokens):
        # Each token's [start, end) encoder frames on the CTC forced alignment.
        return forced_align(log_probs[:length], list(tokens), blank)[0] if tokens else []

    return {
        "encoder_frames": length,
        "margins": margins,
        "ctc_greedy_search": {**_hyp(greedy, units), "align_frames": frames(greedy)},
        "ctc_prefix_beam_search": {
            **_hyp(prefix_best, units), "score": nbest[0][1],
            "nbest": [{"tokens": list(h), "score": s} for h, s in nbest],
            "align_frames": frames(prefix_best),
        },
        "attention_rescoring": {
            **_hyp(best, units), "score": best_score,
            "per_hypothesis": rows, "align_frames": frames(best),
        },
    }


@torch.no_grad()
def decode_batch(model, feats_list: List[torch.Tensor], units: List[str], mode: Mode,
                 decode=DECODE):
    """Pads the fbank of several utterances with 0 (as WeNet's collate does)
    and decodes them in one encoder forward (non-streaming modes only)."""
    assert not mode.simulate_streaming
    lengths = torch.tensor([f.size(0) for f in feats_list])
    padded = torch.zeros(len(feats_list), int(lengths.max()), feats_list[0].size(1))
    for i, f in enumerate(feats_list):
        padded[i, :f.size(0)] = f
    enc, enc_lens = model.encode(padded, lengths, mode.chunk_size, mode.left_chunks, False)
    log_probs = model.ctc.log_softmax(enc)
    summaries = [decode_one(model, enc[b], log_probs[b], int(enc_lens[b]), units, decode)
                 for b in range(len(feats_list))]
    tensors = {"feats": padded, "lengths": lengths, "encoder_out": enc,
               "encoder_lengths": enc_lens, "ctc_log_probs": log_probs}
    return tensors, summaries

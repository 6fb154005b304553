#!/usr/bin/env python3
"""Writes a random-weight NeMo FastConformer CTC model as NeMo saves it (.nemo)
and NeMo's own outputs on real speech: the oracle of models/fastconformer
([W3-N]).

  make_fastconformer_case.py --out DIR [--seed N]

Needs nemo-toolkit (NeMo 3.0 was used) with a CPU-capable torch; the project
venv's Debian torch 1.13 is too old for it, so this runs in its own venv:

  OASR_NEMO=1 bash scripts/setup.sh   (makes .venv-nemo: nemo-toolkit[asr] 3.0.0)
  .venv-nemo/bin/python tests/oracle/fastconformer/make_fastconformer_case.py \
      --out tests/oracle/fastconformer/data

(about 3 minutes to install, 6.6 GB; the generation itself takes about 20 s).
CI does not run this: it reads the committed output (ctest label `regen`
re-runs it where .venv-nemo exists).

DIR/ctc.nemo: EncDecCTCModelBPE.save_to() of a 2-layer, d_model 64
FastConformer (dw_striding 8x subsampling, rel_pos attention, batch-norm
convolution module, kernel 9) with a SentencePiece BPE tokenizer trained here
(vocabulary 48); every parameter and BatchNorm statistic random (seeded).
DIR/reference.safetensors, per utterance uNN (NeMo run on each alone):
  uNN.audio       the 16 kHz float32 waveform given to the model
  uNN.features    the preprocessor's output [features, frames] (valid frames)
  uNN.encoded     the encoder's output [frames', d_model] (valid frames)
  uNN.log_probs   the CTC head's log-probabilities [frames', vocab + 1]
  uNN.greedy_frames  NeMo's greedy hypothesis' per-frame argmax (y_sequence)
  uNN.greedy      its tokens as NeMo's decode_hypothesis folds them (int64)
and batch.encoded / batch.lengths: the three utterances encoded as one padded
batch (NeMo's own padding), for the batch-invariance check.
DIR/ctc_timestamps.json (--heads ctc_timestamps, from the committed
log-probabilities): NeMo's CTC token offsets per utterance as its decoding
computes them with compute_timestamps (start_frame / end_frame of each
token's "char" entry, the pieces, and the word offsets).
DIR/summary.json: the greedy texts, lengths, the smallest top-1 / top-2
log-prob margin over the frames (how much numerical noise a token comparison
tolerates), and the versions that made the files.

With --heads rnnt,tdt (the default makes all three): DIR/rnnt.nemo and
DIR/tdt.nemo, EncDecRNNTBPEModel.save_to() of the same encoder shape with an
RNN-T head (RNNTDecoder: embedding + 2-layer LSTM predictor, pred_hidden 32;
RNNTJoint: joint_hidden 48, relu) and a TDT head (the same plus durations
[0, 1, 2, 3, 4] as extra joint outputs, loss tdt), random weights except the
joint's blank bias, set so that blank wins about half the first steps (with
all-random weights a transducer emits a token on nearly every step and runs
into max_symbols). DIR/transducer.safetensors, per head H and utterance uNN:
  H.uNN.encoded     the encoder's output [frames', d_model]
  H.uNN.first_logits  the joint's output on frame 0 after <SOS> [classes]
  H.uNN.greedy      NeMo's greedy_batch (label-looping) tokens (int64)
  H.uNN.greedy_frames  their frame indices (hypothesis timestamp)
  H.uNN.greedy_durations  (TDT) their predicted durations
and H.batch.greedy / H.batch.lengths: the three decoded as one padded batch
by NeMo, concatenated, with each row's token count. DIR/transducer.json: the
texts, and the smallest top-1 / top-2 margin (tokens, and durations for TDT)
along each greedy path, replayed here step by step with the model's own
joint and predictor (the replay must give NeMo's tokens, which it asserts).
"""
import argparse
import copy
import json
import os
import tempfile

import numpy as np
import soundfile as sf
import torch
from omegaconf import OmegaConf
from safetensors.torch import save_file
from scipy.signal import resample_poly

SOUNDS = "/usr/share/asterisk/sounds/en"  # Debian's asterisk-core-sounds-en-wav (8 kHz speech)
UTTERANCES = ["conf-onlyperson", "tt-weasels", "vm-intro"]
CORPUS = [
    "there are currently no other participants in the conference",
    "weasels have eaten our phone system", "you have new voice messages",
    "please leave a message after the tone", "the quick brown fox jumps over the lazy dog",
    "press one to repeat this menu", "thank you for calling goodbye",
    "to listen to your messages press one", "numbers zero one two three four five six",
]


def train_tokenizer(folder, vocab_size):
    import sentencepiece as spm
    text = os.path.join(folder, "text.txt")
    with open(text, "w") as f:
        f.write("\n".join(CORPUS * 4) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(folder, "tokenizer"),
                                   vocab_size=vocab_size, model_type="bpe", character_coverage=1.0,
                                   num_threads=1, bos_id=-1, eos_id=-1, unk_id=0,
                                   minloglevel=2)
    # NeMo's tokenizer folder also carries vocab.txt (one piece per line).
    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        for i in range(sp.get_piece_size()):
            f.write(sp.id_to_piece(i) + "\n")


def model_config(tokenizer_dir, d_model=64, layers=2, heads=4, features=80):
    return OmegaConf.create({
        "sample_rate": 16000,
        "tokenizer": {"dir": tokenizer_dir, "type": "bpe"},
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000, "normalize": "per_feature", "window_size": 0.025,
            "window_stride": 0.01, "window": "hann", "features": features, "n_fft": 512,
            "log": True, "frame_splicing": 1, "dither": 0.00001, "pad_to": 0, "pad_value": 0.0},
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConformerEncoder",
            "feat_in": features, "feat_out": -1, "n_layers": layers, "d_model": d_model,
            "subsampling": "dw_striding", "subsampling_factor": 8, "subsampling_conv_channels": 32,
            "causal_downsampling": False, "ff_expansion_factor": 4,
            "self_attention_model": "rel_pos", "n_heads": heads, "att_context_size": [-1, -1],
            "att_context_style": "regular", "xscaling": True, "untie_biases": True,
            "pos_emb_max_len": 5000, "conv_kernel_size": 9, "conv_norm_type": "batch_norm",
            "conv_context_size": None, "dropout": 0.1, "dropout_pre_encoder": 0.1,
            "dropout_emb": 0.0, "dropout_att": 0.1},
        "decoder": {"_target_": "nemo.collections.asr.modules.ConvASRDecoder", "feat_in": None,
                    "num_classes": -1, "vocabulary": []},
        "optim": None,
    })


def randomize(model, seed):
    """Every parameter and BatchNorm statistic drawn from a seeded generator,
    so nothing is the trivial default (zero pos_bias, unit running_var)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            bound = 1.0 / max(1, p.shape[-1]) ** 0.5 if p.dim() > 1 else 0.2
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * bound)
            if name.endswith("weight") and "norm" in name:
                p.add_(1.0)  # LayerNorm / BatchNorm gains around 1
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_((torch.rand(b.shape, generator=g) * 2 - 1) * 0.2)
            elif name.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape, generator=g))


def load_audio(name):
    wav, rate = sf.read(os.path.join(SOUNDS, name + ".wav"), dtype="float32")
    assert rate == 8000, (name, rate)
    return resample_poly(wav, 2, 1).astype(np.float32)


DURATIONS = [0, 1, 2, 3, 4]
PRED_HIDDEN, PRED_LAYERS, JOINT_HIDDEN = 32, 2, 48


def transducer_config(tokenizer_dir, tdt, d_model=64):
    """model_config() with NeMo's RNN-T (or TDT) decoder, joint and decoding
    in place of the CTC head, the keys as NeMo's fastconformer_transducer_bpe /
    fastconformer_tdt_bpe example configs spell them."""
    cfg = model_config(tokenizer_dir, d_model=d_model)
    cfg.model_defaults = {"enc_hidden": d_model, "pred_hidden": PRED_HIDDEN,
                          "joint_hidden": JOINT_HIDDEN}
    cfg.decoder = {"_target_": "nemo.collections.asr.modules.RNNTDecoder",
                   "normalization_mode": None, "random_state_sampling": False,
                   "blank_as_pad": True,
                   "prednet": {"pred_hidden": PRED_HIDDEN, "pred_rnn_layers": PRED_LAYERS,
                               "t_max": None, "dropout": 0.2}}
    cfg.joint = {"_target_": "nemo.collections.asr.modules.RNNTJoint", "log_softmax": None,
                 "preserve_memory": False, "fuse_loss_wer": False, "fused_batch_size": 4,
                 "num_extra_outputs": len(DURATIONS) if tdt else 0,
                 "jointnet": {"joint_hidden": JOINT_HIDDEN, "activation": "relu",
                              "dropout": 0.2, "encoder_hidden": d_model,
                              "pred_hidden": PRED_HIDDEN}}
    cfg.decoding = {"strategy": "greedy_batch", "greedy": {"max_symbols": 10},
                    "beam": {"beam_size": 2}}
    if tdt:
        cfg.decoding.model_type = "tdt"
        cfg.decoding.durations = DURATIONS
        cfg.decoding.tdt_include_token_duration = True
        cfg.loss = {"loss_name": "tdt",
                    "tdt_kwargs": {"durations": DURATIONS, "sigma": 0.02, "omega": 0.1}}
    else:
        cfg.loss = {"loss_name": "default"}
    return cfg


def joint_step(model, f_t, g, tdt):
    """The joint on one encoder frame [H] and predictor output [1, 1, H]:
    token logits and (TDT) duration logits."""
    logits = model.joint.joint_after_projection(f_t[None, None], g)[0, 0, 0]
    if tdt:
        return logits[: -len(DURATIONS)], logits[-len(DURATIONS):]
    return logits, None


def margin(v):
    top2 = torch.topk(v, 2).values
    return float(top2[0] - top2[1])


def replay_greedy(model, encoded, tdt, max_symbols):
    """Label-looping greedy for one utterance, step by step: returns tokens,
    frames, durations and the smallest top-2 margins on the path."""
    blank = model.decoding.blank_id
    f = model.joint.project_encoder(encoded)  # [T, H]
    frames_total = f.shape[0]
    labels = torch.tensor([[blank]])
    g, state = model.decoder.predict(labels, None, add_sos=False, batch_size=1)
    g = model.joint.project_prednet(g)
    tokens, frames, durations = [], [], []
    token_margin, duration_margin = float("inf"), float("inf")
    t, last_t, lasts = 0, -1, 0
    while t < frames_total:
        while True:
            tok, dur = joint_step(model, f[t], g, tdt)
            label = int(tok.argmax())
            token_margin = min(token_margin, margin(tok))
            step = 0
            if tdt:
                duration_margin = min(duration_margin, margin(dur))
                step = DURATIONS[int(dur.argmax())]
            label_t = t
            if label != blank:
                break
            t += max(step, 1)
            if t >= frames_total:
                return tokens, frames, durations, token_margin, duration_margin
        tokens.append(label)
        frames.append(label_t)
        durations.append(step)
        t += step
        lasts = lasts + 1 if last_t == label_t else 1
        last_t = label_t
        g, state = model.decoder.predict(torch.tensor([[label]]), state, add_sos=False,
                                         batch_size=1)
        g = model.joint.project_prednet(g)
        if t < frames_total and t == label_t and lasts >= max_symbols:
            t += 1
    return tokens, frames, durations, token_margin, duration_margin


def set_blank_bias(model, encoded, tdt):
    """Tempers the predictor's share of the joint and shifts the joint's blank
    bias so that blank wins about half of the (frame, previous token) pairs:
    with all-random weights blank almost never wins. (A random predictor still
    rewards a token's repeat, so the hypotheses hold runs of max_symbols
    repeats between blanks: every rule of the search is exercised.)"""
    blank = model.decoding.blank_id
    model.joint.pred.weight.mul_(0.3)
    model.joint.pred.bias.mul_(0.3)
    f = model.joint.project_encoder(encoded)  # [T, H]
    previous = torch.arange(blank + 1)[:, None]  # every token, and <SOS>
    g, _ = model.decoder.predict(previous, None, add_sos=False, batch_size=blank + 1)
    g = model.joint.project_prednet(g)  # [V + 1, 1, H]
    logits = model.joint.joint_after_projection(f[None], g[:, 0][None])[0]  # [T, V + 1, C]
    if tdt:
        logits = logits[..., : -len(DURATIONS)]
    best_other = torch.cat([logits[..., :blank], logits[..., blank + 1:]], dim=-1).amax(dim=-1)
    shift = float((best_other - logits[..., blank]).median()) + 0.01
    model.joint.joint_net[-1].bias[blank] += shift


def padded_audio(audios):
    """The waveforms as one zero-padded [B, samples] batch."""
    batch = torch.zeros(len(audios), max(len(a) for a in audios))
    for i, a in enumerate(audios):
        batch[i, : len(a)] = torch.from_numpy(a)
    return batch


def as_ints(v):
    return [int(x) for x in (v.tolist() if torch.is_tensor(v) else v)]


def make_transducer(args, tmp, head, audios, tensors, summary):
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    tdt = head == "tdt"
    torch.manual_seed(args.seed + (2 if tdt else 1))
    model = EncDecRNNTBPEModel(cfg=transducer_config(tmp, tdt))
    randomize(model, args.seed + (2 if tdt else 1))
    model.eval()
    max_symbols = 10
    with torch.no_grad():
        first = torch.from_numpy(audios[0])[None]
        feats, feat_len = model.preprocessor(input_signal=first, length=torch.tensor([first.shape[1]]))
        encoded, _ = model.encoder(audio_signal=feats, length=feat_len)
        set_blank_bias(model, encoded[0].t(), tdt)
    model.save_to(os.path.join(args.out, head + ".nemo"))
    info = {"utterances": {}}
    with torch.no_grad():
        for i, audio in enumerate(audios):
            key = f"{head}.u{i:02d}"
            signal = torch.from_numpy(audio)[None]
            feats, feat_len = model.preprocessor(input_signal=signal,
                                                 length=torch.tensor([signal.shape[1]]))
            encoded, enc_len = model.encoder(audio_signal=feats, length=feat_len)
            hyps = model.decoding.rnnt_decoder_predictions_tensor(
                encoder_output=encoded, encoded_lengths=enc_len, return_hypotheses=True)
            hyp = hyps[0] if not isinstance(hyps[0], list) else hyps[0][0]
            ids = as_ints(hyp.y_sequence)
            frames = as_ints(hyp.timestamp)
            enc = encoded[0, :, : int(enc_len[0])].t().contiguous()
            tokens, r_frames, r_durations, tok_margin, dur_margin = replay_greedy(
                model, enc, tdt, max_symbols)
            assert tokens == ids, (key, tokens, ids)
            assert r_frames == frames, (key, r_frames, frames)
            tensors[f"{key}.encoded"] = enc
            tok, dur = joint_step(model, model.joint.project_encoder(enc)[0],
                                  model.joint.project_prednet(model.decoder.predict(
                                      torch.tensor([[model.decoding.blank_id]]), None,
                                      add_sos=False, batch_size=1)[0]), tdt)
            tensors[f"{key}.first_logits"] = (torch.cat([tok, dur]) if tdt else tok).contiguous()
            tensors[f"{key}.greedy"] = torch.tensor(ids, dtype=torch.int64)
            tensors[f"{key}.greedy_frames"] = torch.tensor(frames, dtype=torch.int64)
            entry = {"text": hyp.text, "tokens": len(ids), "encoded_frames": int(enc_len[0]),
                     "min_token_margin": tok_margin}
            if tdt:
                durations = as_ints(hyp.token_duration)
                assert durations == r_durations, (key, durations, r_durations)
                tensors[f"{key}.greedy_durations"] = torch.tensor(durations, dtype=torch.int64)
                entry["min_duration_margin"] = dur_margin
            info["utterances"][key] = entry
        batch = padded_audio(audios)
        feats, feat_len = model.preprocessor(
            input_signal=batch, length=torch.tensor([len(a) for a in audios]))
        encoded, enc_len = model.encoder(audio_signal=feats, length=feat_len)
        hyps = model.decoding.rnnt_decoder_predictions_tensor(
            encoder_output=encoded, encoded_lengths=enc_len, return_hypotheses=True)
        rows = [as_ints(h.y_sequence) for h in hyps]
        tensors[f"{head}.batch.greedy"] = torch.tensor(sum(rows, []), dtype=torch.int64)
        tensors[f"{head}.batch.lengths"] = torch.tensor([len(r) for r in rows], dtype=torch.int64)
    summary[head] = info


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--heads", default="ctc,ctc_timestamps,rnnt,tdt,hybrid",
                        help="which cases to (re)make, comma-separated: ctc, ctc_timestamps, "
                             "rnnt, tdt, hybrid")
    args = parser.parse_args()
    heads = args.heads.split(",")
    os.makedirs(args.out, exist_ok=True)
    import nemo
    with tempfile.TemporaryDirectory() as tmp:
        train_tokenizer(tmp, 48)
        if "ctc" in heads:
            make_ctc(args, tmp)
        if "ctc_timestamps" in heads:
            make_ctc_timestamps(args, tmp)
        if "hybrid" in heads:
            make_hybrid(args, tmp, [load_audio(name) for name in UTTERANCES])
        transducers = [h for h in heads if h in ("rnnt", "tdt")]
        if transducers:
            audios = [load_audio(name) for name in UTTERANCES]
            tensors = {}
            summary = {"nemo": nemo.__version__, "torch": torch.__version__}
            for head in transducers:
                make_transducer(args, tmp, head, audios, tensors, summary)
            save_file(tensors, os.path.join(args.out, "transducer.safetensors"))
            with open(os.path.join(args.out, "transducer.json"), "w") as f:
                json.dump(summary, f, indent=1)
            print(json.dumps(summary, indent=1))


def make_ctc(args, tmp):
    torch.manual_seed(args.seed)
    from nemo.collections.asr.models import EncDecCTCModelBPE
    import nemo

    model = EncDecCTCModelBPE(cfg=model_config(tmp))
    randomize(model, args.seed)
    model.eval()
    nemo_path = os.path.join(args.out, "ctc.nemo")
    model.save_to(nemo_path)
    # The oracle is the model that was saved (restore_from needs Python >=
    # 3.11.4's tarfile filters, which Debian 12's 3.11.2 lacks).
    tensors, summary = {}, {"utterances": {}, "nemo": nemo.__version__, "torch": torch.__version__}
    margins = []
    audios = []
    with torch.no_grad():
        for i, name in enumerate(UTTERANCES):
            key = f"u{i:02d}"
            audio = load_audio(name)
            audios.append(audio)
            signal = torch.from_numpy(audio)[None]
            length = torch.tensor([signal.shape[1]])
            feats, feat_len = model.preprocessor(input_signal=signal, length=length)
            encoded, enc_len = model.encoder(audio_signal=feats, length=feat_len)
            log_probs = model.decoder(encoder_output=encoded)
            hyps = model.decoding.ctc_decoder_predictions_tensor(
                log_probs, decoder_lengths=enc_len, return_hypotheses=True)
            hyp = hyps[0] if not isinstance(hyps, tuple) else hyps[0][0]
            # NeMo's hypothesis keeps the per-frame argmax (y_sequence); its
            # decode_hypothesis folds it into tokens with this rule before
            # detokenizing (ctc_decoding.py), kept here as the token oracle.
            frames = [int(t) for t in (hyp.y_sequence.tolist() if torch.is_tensor(hyp.y_sequence)
                                       else hyp.y_sequence)]
            blank = model.decoding.blank_id
            ids, previous = [], blank
            for p in frames:
                if (p != previous or previous == blank) and p != blank:
                    ids.append(p)
                previous = p
            top2 = torch.topk(log_probs[0], 2, dim=-1).values
            margins.append(float((top2[:, 0] - top2[:, 1]).min()))
            tensors[f"{key}.audio"] = signal[0].contiguous()
            tensors[f"{key}.features"] = feats[0, :, : int(feat_len[0])].contiguous()
            tensors[f"{key}.encoded"] = encoded[0, :, : int(enc_len[0])].t().contiguous()
            tensors[f"{key}.log_probs"] = log_probs[0].contiguous()
            tensors[f"{key}.greedy_frames"] = torch.tensor(frames, dtype=torch.int64)
            tensors[f"{key}.greedy"] = torch.tensor(ids, dtype=torch.int64)
            summary["utterances"][key] = {
                "source": name + ".wav", "samples": int(signal.shape[1]),
                "feature_frames": int(feat_len[0]), "encoded_frames": int(enc_len[0]),
                "greedy_text": hyp.text, "greedy_ids": ids}
        # The three together as one padded batch.
        batch = padded_audio(audios)
        lengths = torch.tensor([len(a) for a in audios])
        feats, feat_len = model.preprocessor(input_signal=batch, length=lengths)
        encoded, enc_len = model.encoder(audio_signal=feats, length=feat_len)
        tensors["batch.encoded"] = encoded.transpose(1, 2).contiguous()
        tensors["batch.lengths"] = enc_len.to(torch.int64)
    summary["min_top2_margin"] = min(margins)
    save_file(tensors, os.path.join(args.out, "reference.safetensors"))
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))


def make_ctc_timestamps(args, tmp):
    """NeMo's CTC token offsets (greedy_batch with compute_timestamps, the
    "char" entries: each token's first frame and the frame after its run)
    for the committed log-probabilities of the CTC case, decoded by the CTC
    model's own decoding object (its weights play no part)."""
    from nemo.collections.asr.models import EncDecCTCModelBPE
    from safetensors.torch import load_file

    model = EncDecCTCModelBPE(cfg=model_config(tmp))
    decoding = copy.deepcopy(model.cfg.decoding)
    decoding.compute_timestamps = True
    decoding.greedy.compute_timestamps = True
    model.change_decoding_strategy(decoding, verbose=False)
    reference = load_file(os.path.join(args.out, "reference.safetensors"))
    out = {}
    for i in range(len(UTTERANCES)):
        key = f"u{i:02d}"
        log_probs = reference[f"{key}.log_probs"][None]
        hyps = model.decoding.ctc_decoder_predictions_tensor(
            log_probs, decoder_lengths=torch.tensor([log_probs.shape[1]]),
            return_hypotheses=True)
        hyp = hyps[0] if not isinstance(hyps, tuple) else hyps[0][0]
        chars = hyp.timestamp["char"]
        out[key] = {"start_frame": [int(c["start_offset"]) for c in chars],
                    "end_frame": [int(c["end_offset"]) for c in chars],
                    "pieces": [c["char"] if isinstance(c["char"], str) else "".join(c["char"])
                               for c in chars],
                    "words": [{"word": w["word"], "start_frame": int(w["start_offset"]),
                               "end_frame": int(w["end_offset"])}
                              for w in hyp.timestamp.get("word", [])]}
    with open(os.path.join(args.out, "ctc_timestamps.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out)[:400])


def ctc_fold(frames, blank):
    """NeMo's decode_hypothesis rule: repeats collapsed, blanks dropped."""
    ids, previous = [], blank
    for p in frames:
        if (p != previous or previous == blank) and p != blank:
            ids.append(p)
        previous = p
    return ids


def make_hybrid(args, tmp, audios):
    """A hybrid TDT / CTC model (EncDecHybridRNNTCTCBPEModel, the
    parakeet-tdt_ctc family): the TDT case's decoder and joint plus aux_ctc's
    ConvASRDecoder on the same encoder. hybrid.safetensors per utterance
    uNN: encoded, ctc_log_probs, tdt greedy / greedy_frames /
    greedy_durations (NeMo's default head), ctc_greedy (its CTC decoding);
    batch.tdt_greedy / batch.ctc_greedy / their lengths for the padded
    batch. hybrid.json: texts and the smallest margins on the paths."""
    from nemo.collections.asr.models import EncDecHybridRNNTCTCBPEModel

    seed = args.seed + 3
    torch.manual_seed(seed)
    cfg = transducer_config(tmp, tdt=True)
    cfg.aux_ctc = {"ctc_loss_weight": 0.3, "use_cer": False, "ctc_reduction": "mean_batch",
                   "decoder": {"_target_": "nemo.collections.asr.modules.ConvASRDecoder",
                               "feat_in": None, "num_classes": -1, "vocabulary": []},
                   "decoding": {"strategy": "greedy_batch"}}
    model = EncDecHybridRNNTCTCBPEModel(cfg=cfg)
    randomize(model, seed)
    model.eval()
    with torch.no_grad():
        first = torch.from_numpy(audios[0])[None]
        feats, feat_len = model.preprocessor(input_signal=first,
                                             length=torch.tensor([first.shape[1]]))
        encoded, _ = model.encoder(audio_signal=feats, length=feat_len)
        set_blank_bias(model, encoded[0].t(), True)
    model.save_to(os.path.join(args.out, "hybrid.nemo"))
    tensors, info = {}, {"utterances": {}, "torch": torch.__version__}
    blank = model.ctc_decoding.blank_id
    ctc_margins = []
    with torch.no_grad():
        for i, audio in enumerate(audios):
            key = f"u{i:02d}"
            signal = torch.from_numpy(audio)[None]
            feats, feat_len = model.preprocessor(input_signal=signal,
                                                 length=torch.tensor([signal.shape[1]]))
            encoded, enc_len = model.encoder(audio_signal=feats, length=feat_len)
            hyp = model.decoding.rnnt_decoder_predictions_tensor(
                encoder_output=encoded, encoded_lengths=enc_len, return_hypotheses=True)[0]
            enc = encoded[0, :, : int(enc_len[0])].t().contiguous()
            tokens, frames, durations, tok_margin, dur_margin = replay_greedy(model, enc, True, 10)
            assert tokens == as_ints(hyp.y_sequence), key
            log_probs = model.ctc_decoder(encoder_output=encoded)
            ctc_hyp = model.ctc_decoding.ctc_decoder_predictions_tensor(
                log_probs, decoder_lengths=enc_len, return_hypotheses=True)[0]
            ctc_ids = ctc_fold(as_ints(ctc_hyp.y_sequence), blank)
            top2 = torch.topk(log_probs[0], 2, dim=-1).values
            ctc_margins.append(float((top2[:, 0] - top2[:, 1]).min()))
            tensors[f"{key}.encoded"] = enc
            tensors[f"{key}.ctc_log_probs"] = log_probs[0].contiguous()
            tensors[f"{key}.greedy"] = torch.tensor(tokens, dtype=torch.int64)
            tensors[f"{key}.greedy_frames"] = torch.tensor(frames, dtype=torch.int64)
            tensors[f"{key}.greedy_durations"] = torch.tensor(durations, dtype=torch.int64)
            tensors[f"{key}.ctc_greedy"] = torch.tensor(ctc_ids, dtype=torch.int64)
            info["utterances"][key] = {"text": hyp.text, "ctc_text": ctc_hyp.text,
                                       "min_token_margin": tok_margin,
                                       "min_duration_margin": dur_margin}
        batch = padded_audio(audios)
        feats, feat_len = model.preprocessor(
            input_signal=batch, length=torch.tensor([len(a) for a in audios]))
        encoded, enc_len = model.encoder(audio_signal=feats, length=feat_len)
        hyps = model.decoding.rnnt_decoder_predictions_tensor(
            encoder_output=encoded, encoded_lengths=enc_len, return_hypotheses=True)
        rows = [as_ints(h.y_sequence) for h in hyps]
        ctc_hyps = model.ctc_decoding.ctc_decoder_predictions_tensor(
            model.ctc_decoder(encoder_output=encoded), decoder_lengths=enc_len,
            return_hypotheses=True)
        ctc_rows = [ctc_fold(as_ints(h.y_sequence)[: int(n)], blank)
                    for h, n in zip(ctc_hyps, enc_len)]
        for name, r in (("tdt_greedy", rows), ("ctc_greedy", ctc_rows)):
            tensors[f"batch.{name}"] = torch.tensor(sum(r, []), dtype=torch.int64)
            tensors[f"batch.{name}_lengths"] = torch.tensor([len(x) for x in r],
                                                            dtype=torch.int64)
    info["min_ctc_top2_margin"] = min(ctc_margins)
    save_file(tensors, os.path.join(args.out, "hybrid.safetensors"))
    with open(os.path.join(args.out, "hybrid.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()

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
DIR/summary.json: the greedy texts, lengths, the smallest top-1 / top-2
log-prob margin over the frames (how much numerical noise a token comparison
tolerates), and the versions that made the files.
"""
import argparse
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)

    from nemo.collections.asr.models import EncDecCTCModelBPE
    import nemo

    with tempfile.TemporaryDirectory() as tmp:
        train_tokenizer(tmp, 48)
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
        longest = max(len(a) for a in audios)
        batch = torch.zeros(len(audios), longest)
        for i, a in enumerate(audios):
            batch[i, : len(a)] = torch.from_numpy(a)
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


if __name__ == "__main__":
    main()

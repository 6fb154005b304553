"""Trainable U2++ model (Conformer encoder + CTC + bidirectional attention
decoder) whose state_dict names and shapes are those of a WeNet ASRModel, so
`final.pt` loads into WeNet, into tests/oracle/u2pp and into oasr.

Differences from the inference-only oracle: dropout, batched padding masks,
WeNet's dynamic chunk masks for training, vectorized lengths (no per-utterance
Python loops) and an optional fused attention path on torch >= 2.0 (with a
plain matmul path that torch 1.13 uses, both computing the same function).

The sinusoid tables are non-persistent buffers: the checkpoint has WeNet 2.x's
layout (no `...pos_enc.pe`), which every loader recomputes.
"""

import math
from dataclasses import asdict, dataclass
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

# Fused attention needs torch >= 2.1 (the `scale` argument).
_HAS_SDPA = hasattr(F, "scaled_dot_product_attention") and tuple(
    int(p) for p in torch.__version__.split(".")[:2]) >= (2, 1)

IGNORE_ID = -1


@dataclass
class ModelConfig:
    input_dim: int = 80
    vocab_size: int = 31
    output_size: int = 256
    attention_heads: int = 4
    linear_units: int = 512
    num_blocks: int = 6
    cnn_module_kernel: int = 15
    decoder_linear_units: int = 512
    decoder_num_blocks: int = 1
    decoder_r_num_blocks: int = 1
    dropout_rate: float = 0.1
    positional_dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.1
    ctc_weight: float = 0.3
    reverse_weight: float = 0.3
    lsm_weight: float = 0.1
    max_chunk: int = 25  # dynamic chunk training: chunk sizes 1..max_chunk
    full_context_prob: float = 0.5
    pos_table_len: int = 5000

    @property
    def sos(self) -> int:
        return self.vocab_size - 1

    @property
    def eos(self) -> int:
        return self.vocab_size - 1

    def to_dict(self) -> dict:
        return asdict(self)


def sinusoid_table(length: int, dim: int) -> torch.Tensor:
    pos = torch.arange(0, length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * -(math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table.unsqueeze(0)


class PositionalEncoding(nn.Module):
    """WeNet's PositionalEncoding (decoder: x*sqrt(d) + pe) and, with
    `relative=True`, RelPositionalEncoding (encoder: x*sqrt(d), pe returned
    separately for the attention's linear_pos)."""

    def __init__(self, dim: int, dropout: float, max_len: int, relative: bool):
        super().__init__()
        self.xscale = math.sqrt(dim)
        self.relative = relative
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoid_table(max_len, dim), persistent=False)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        pos = self.pe[:, :x.size(1)].to(x.dtype)
        if self.relative:
            return self.dropout(x * self.xscale), self.dropout(pos)
        return self.dropout(x * self.xscale + pos), pos


class GlobalCMVN(nn.Module):

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("istd", torch.ones(dim))

    def forward(self, x):
        return (x - self.mean) * self.istd


class Conv2dSubsampling4(nn.Module):
    """WeNet's Conv2dSubsampling4: two 3x3 stride-2 convolutions + ReLU, then
    `out.0` Linear over (channels x freq); right context 6 frames."""

    rate = 4
    right_context = 6

    def __init__(self, idim: int, odim: int, dropout: float, max_len: int):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, odim, 3, 2), nn.ReLU(), nn.Conv2d(odim, odim, 3, 2),
                                  nn.ReLU())
        self.out = nn.Sequential(nn.Linear(odim * (((idim - 1) // 2 - 1) // 2), odim))
        self.pos_enc = PositionalEncoding(odim, dropout, max_len, relative=True)

    @staticmethod
    def output_lengths(lengths: torch.Tensor) -> torch.Tensor:
        return torch.div(torch.div(lengths - 1, 2, rounding_mode="floor") - 1, 2,
                         rounding_mode="floor").clamp(min=0)

    def forward(self, x, lengths):
        y = self.conv(x.unsqueeze(1))
        b, c, t, f = y.shape
        y = self.out(y.transpose(1, 2).reshape(b, t, c * f))
        y, pos = self.pos_enc(y)
        return y, pos, self.output_lengths(lengths)


def attend(q, k, v, bias_pos, allowed, dropout_p: float, training: bool):
    """softmax((q.k + bias_pos) / sqrt(dk)) . v with WeNet's masking.
    q, k, v (B,H,T,dk); bias_pos is q_v.p (B,H,T1,T2) or None (added to
    q.k before scaling); allowed bool (B,T1|1,T2) or None."""
    dk = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1))
    if bias_pos is not None:
        scores = scores + bias_pos
    scores = scores / math.sqrt(dk)
    if allowed is not None:
        blocked = ~allowed.unsqueeze(1)
        scores = scores.masked_fill(blocked, -float("inf"))
        probs = torch.softmax(scores.float(), dim=-1).to(v.dtype).masked_fill(blocked, 0.0)
    else:
        probs = torch.softmax(scores.float(), dim=-1).to(v.dtype)
    probs = F.dropout(probs, dropout_p, training)
    return torch.matmul(probs, v)


class MultiHeadedAttention(nn.Module):

    def __init__(self, heads: int, dim: int, dropout: float):
        super().__init__()
        self.h = heads
        self.d_k = dim // heads
        self.linear_q = nn.Linear(dim, dim)
        self.linear_k = nn.Linear(dim, dim)
        self.linear_v = nn.Linear(dim, dim)
        self.linear_out = nn.Linear(dim, dim)
        self.dropout_rate = dropout

    def heads(self, x):  # (B,T,D) -> (B,H,T,dk)
        return x.view(x.size(0), x.size(1), self.h, self.d_k).transpose(1, 2)

    def merge(self, ctx):  # (B,H,T,dk) -> (B,T,D)
        return self.linear_out(ctx.transpose(1, 2).reshape(ctx.size(0), ctx.size(2), -1))

    def forward(self, query, key, value, allowed):
        q, k, v = self.heads(self.linear_q(query)), self.heads(self.linear_k(key)), self.heads(
            self.linear_v(value))
        p = self.dropout_rate if self.training else 0.0
        if _HAS_SDPA and q.is_cuda:
            mask = None if allowed is None else allowed.unsqueeze(1)
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        else:
            ctx = attend(q, k, v, None, allowed, p, self.training)
        return self.merge(ctx)


class RelPositionMultiHeadedAttention(MultiHeadedAttention):
    """WeNet's rel_selfattn (no rel_shift): score = ((q+u).k + (q+v).P)/sqrt(dk)
    with P = linear_pos(pe[key position])."""

    def __init__(self, heads: int, dim: int, dropout: float):
        super().__init__(heads, dim, dropout)
        self.linear_pos = nn.Linear(dim, dim, bias=False)
        self.pos_bias_u = nn.Parameter(torch.empty(heads, self.d_k))
        self.pos_bias_v = nn.Parameter(torch.empty(heads, self.d_k))
        nn.init.xavier_uniform_(self.pos_bias_u)
        nn.init.xavier_uniform_(self.pos_bias_v)

    def forward(self, x, allowed, pos):
        b, t, _ = x.shape
        q = self.linear_q(x).view(b, t, self.h, self.d_k)
        k, v = self.heads(self.linear_k(x)), self.heads(self.linear_v(x))
        p = self.heads(self.linear_pos(pos))  # (1,H,T,dk)
        q_u = (q + self.pos_bias_u.to(q.dtype)).transpose(1, 2)
        q_v = (q + self.pos_bias_v.to(q.dtype)).transpose(1, 2)
        drop = self.dropout_rate if self.training else 0.0
        if _HAS_SDPA and x.is_cuda:
            # [q+u, q+v] . [k, P] = (q+u).k + (q+v).P: one fused attention with
            # head width 2*dk and the true scale 1/sqrt(dk).
            qq = torch.cat([q_u, q_v], dim=-1)
            kk = torch.cat([k, p.expand(b, -1, -1, -1)], dim=-1)
            mask = None if allowed is None else allowed.unsqueeze(1)
            ctx = F.scaled_dot_product_attention(qq, kk, v, attn_mask=mask, dropout_p=drop,
                                                 scale=1.0 / math.sqrt(self.d_k))
        else:
            ctx = attend(q_u, k, v, torch.matmul(q_v, p.transpose(-2, -1)), allowed, drop,
                         self.training)
        return self.merge(ctx)


class PositionwiseFeedForward(nn.Module):

    def __init__(self, dim: int, hidden: int, dropout: float, activation: nn.Module):
        super().__init__()
        self.w_1 = nn.Linear(dim, hidden)
        self.w_2 = nn.Linear(hidden, dim)
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.activation(self.w_1(x))))


class ConvolutionModule(nn.Module):
    """pointwise_conv1 -> GLU -> causal depthwise conv -> LayerNorm -> swish ->
    pointwise_conv2; padded frames zeroed before and after."""

    def __init__(self, dim: int, kernel: int):
        super().__init__()
        self.pointwise_conv1 = nn.Conv1d(dim, 2 * dim, 1)
        self.left_context = kernel - 1
        self.depthwise_conv = nn.Conv1d(dim, dim, kernel, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.pointwise_conv2 = nn.Conv1d(dim, dim, 1)
        self.activation = nn.SiLU()

    def forward(self, x, valid):
        x = x.transpose(1, 2).masked_fill(~valid, 0.0)  # (B,C,T); valid (B,1,T)
        x = F.pad(x, (self.left_context, 0))
        x = F.glu(self.pointwise_conv1(x), dim=1)
        x = self.depthwise_conv(x)
        x = self.activation(self.norm(x.transpose(1, 2))).transpose(1, 2)
        x = self.pointwise_conv2(x).masked_fill(~valid, 0.0)
        return x.transpose(1, 2)


class ConformerEncoderLayer(nn.Module):

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.output_size
        self.self_attn = RelPositionMultiHeadedAttention(cfg.attention_heads, d,
                                                         cfg.attention_dropout_rate)
        self.feed_forward = PositionwiseFeedForward(d, cfg.linear_units, cfg.dropout_rate,
                                                    nn.SiLU())
        self.feed_forward_macaron = PositionwiseFeedForward(d, cfg.linear_units, cfg.dropout_rate,
                                                            nn.SiLU())
        self.conv_module = ConvolutionModule(d, cfg.cnn_module_kernel)
        self.norm_ff = nn.LayerNorm(d)
        self.norm_mha = nn.LayerNorm(d)
        self.norm_ff_macaron = nn.LayerNorm(d)
        self.norm_conv = nn.LayerNorm(d)
        self.norm_final = nn.LayerNorm(d)
        self.dropout = nn.Dropout(cfg.dropout_rate)

    def forward(self, x, allowed, pos, valid):
        x = x + 0.5 * self.dropout(self.feed_forward_macaron(self.norm_ff_macaron(x)))
        x = x + self.dropout(self.self_attn(self.norm_mha(x), allowed, pos))
        x = x + self.dropout(self.conv_module(self.norm_conv(x), valid))
        x = x + 0.5 * self.dropout(self.feed_forward(self.norm_ff(x)))
        return self.norm_final(x)


def chunk_allowed(frames: int, chunk: int, device) -> torch.Tensor:
    """(T,T) bool, WeNet's subsequent_chunk_mask with all left chunks: frame i
    sees every frame before the end of its own chunk."""
    idx = torch.arange(frames, device=device)
    end = (torch.div(idx, chunk, rounding_mode="floor") + 1) * chunk
    return idx.unsqueeze(0) < end.unsqueeze(1)


class ConformerEncoder(nn.Module):

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.global_cmvn = GlobalCMVN(cfg.input_dim)
        self.embed = Conv2dSubsampling4(cfg.input_dim, cfg.output_size,
                                        cfg.positional_dropout_rate, cfg.pos_table_len)
        self.after_norm = nn.LayerNorm(cfg.output_size)
        self.encoders = nn.ModuleList([ConformerEncoderLayer(cfg) for _ in range(cfg.num_blocks)])

    def forward(self, feats, lengths, chunk_size: int = -1):
        """feats (B,T,F) fbank before CMVN; chunk_size > 0: chunk attention
        mask (all left chunks), <= 0: full context. Returns (B,T',D), valid
        mask (B,1,T') and lengths."""
        x, pos, out_lens = self.embed(self.global_cmvn(feats), lengths)
        frames = x.size(1)
        valid = (torch.arange(frames, device=x.device).unsqueeze(0)
                 < out_lens.unsqueeze(1)).unsqueeze(1)
        allowed = valid
        if chunk_size > 0:
            allowed = valid & chunk_allowed(frames, chunk_size, x.device).unsqueeze(0)
        for layer in self.encoders:
            x = layer(x, allowed, pos, valid)
        return self.after_norm(x), valid, out_lens


class DecoderLayer(nn.Module):

    def __init__(self, dim: int, heads: int, hidden: int, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadedAttention(heads, dim, cfg.attention_dropout_rate)
        self.src_attn = MultiHeadedAttention(heads, dim, cfg.attention_dropout_rate)
        self.feed_forward = PositionwiseFeedForward(dim, hidden, cfg.dropout_rate, nn.ReLU())
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.norm3 = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(cfg.dropout_rate)

    def forward(self, x, self_allowed, memory, memory_allowed):
        h = self.norm1(x)
        x = x + self.dropout(self.self_attn(h, h, h, self_allowed))
        h = self.norm2(x)
        x = x + self.dropout(self.src_attn(h, memory, memory, memory_allowed))
        return x + self.dropout(self.feed_forward(self.norm3(x)))


class TransformerDecoder(nn.Module):

    def __init__(self, cfg: ModelConfig, blocks: int):
        super().__init__()
        d = cfg.output_size
        self.embed = nn.Sequential(
            nn.Embedding(cfg.vocab_size, d),
            PositionalEncoding(d, cfg.positional_dropout_rate, cfg.pos_table_len, relative=False))
        self.after_norm = nn.LayerNorm(d)
        self.output_layer = nn.Linear(d, cfg.vocab_size)
        self.decoders = nn.ModuleList([
            DecoderLayer(d, cfg.attention_heads, cfg.decoder_linear_units, cfg)
            for _ in range(blocks)
        ])

    def forward(self, memory, memory_allowed, tokens, lengths):
        """tokens (N,L) starting with sos; lengths (N,) counting sos. Logits (N,L,V)."""
        steps = tokens.size(1)
        pos = torch.arange(steps, device=tokens.device)
        not_pad = (pos.unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1)
        causal = (pos.unsqueeze(0) <= pos.unsqueeze(1)).unsqueeze(0)
        # Key 0 (sos) is always allowed, so no row is fully masked (fused
        # attention would return NaN there).
        self_allowed = not_pad & causal
        x, _ = self.embed[1](self.embed[0](tokens))
        for layer in self.decoders:
            x = layer(x, self_allowed, memory, memory_allowed)
        return self.output_layer(self.after_norm(x))


class BiTransformerDecoder(nn.Module):

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.left_decoder = TransformerDecoder(cfg, cfg.decoder_num_blocks)
        self.right_decoder = TransformerDecoder(cfg, cfg.decoder_r_num_blocks)


class CTC(nn.Module):

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ctc_lo = nn.Linear(cfg.output_size, cfg.vocab_size)


def label_smoothing_loss(logits, target, smoothing: float):
    """WeNet's LabelSmoothingLoss (normalize_length=False) up to the constant
    entropy of the target distribution: confidence 1-s on the target, s/(V-1)
    on every other class; summed over tokens (ignored ones excluded)."""
    vocab = logits.size(-1)
    logp = torch.log_softmax(logits.float(), dim=-1)
    keep = target != IGNORE_ID
    safe = target.masked_fill(~keep, 0)
    nll = -logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    rest = -logp.sum(-1) - nll
    loss = (1.0 - smoothing) * nll + smoothing / (vocab - 1) * rest
    return loss.masked_fill(~keep, 0.0).sum()


def reverse_padded(tokens, lengths):
    """Reverses the first lengths[i] entries of each row (padding stays)."""
    steps = tokens.size(1)
    idx = torch.arange(steps, device=tokens.device).unsqueeze(0)
    rev = lengths.unsqueeze(1) - 1 - idx
    src = torch.where(rev >= 0, rev, idx)
    return tokens.gather(1, src)


class U2ppModel(nn.Module):

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = ConformerEncoder(cfg)
        self.decoder = BiTransformerDecoder(cfg)
        self.ctc = CTC(cfg)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def sample_chunk_size(self, generator: Optional[torch.Generator] = None) -> int:
        """Dynamic chunk training: full context with probability
        full_context_prob, else a chunk of 1..max_chunk encoder frames."""
        r = torch.rand((), generator=generator).item()
        if r < self.cfg.full_context_prob:
            return -1
        return int(torch.randint(1, self.cfg.max_chunk + 1, (), generator=generator).item())

    def forward(self, feats, feat_lens, tokens, token_lens, chunk_size: int = -1):
        """tokens (B,L) padded with IGNORE_ID, token_lens (B,). Returns the
        total loss and its parts, each summed over the batch / batch size."""
        cfg = self.cfg
        batch = feats.size(0)
        enc, valid, enc_lens = self.encoder(feats, feat_lens, chunk_size)
        # CTC in fp32 (cudnn/native ctc_loss wants fp32 log-probs (T,B,V)).
        logits = self.ctc.ctc_lo(enc).float()
        log_probs = torch.log_softmax(logits, dim=-1).transpose(0, 1)
        targets = tokens.masked_fill(tokens == IGNORE_ID, 0)
        loss_ctc = F.ctc_loss(log_probs, targets, enc_lens, token_lens, blank=0,
                              reduction="sum", zero_infinity=True) / batch
        # Attention decoders: input [sos]+ys padded with eos, output ys+[eos].
        steps = tokens.size(1) + 1
        idx = torch.arange(steps, device=tokens.device).unsqueeze(0)
        ys = torch.cat([targets, targets.new_zeros(batch, 1)], dim=1)
        ys_in = torch.where(idx == 0, torch.full_like(ys, cfg.sos),
                            ys.roll(1, dims=1))
        ys_in = torch.where(idx <= token_lens.unsqueeze(1), ys_in, torch.full_like(ys, cfg.eos))
        ys_out = torch.where(idx < token_lens.unsqueeze(1), ys,
                             torch.full_like(ys, IGNORE_ID))
        ys_out = torch.where(idx == token_lens.unsqueeze(1), torch.full_like(ys, cfg.eos), ys_out)
        rev = reverse_padded(ys, token_lens)
        r_in = torch.where(idx == 0, torch.full_like(ys, cfg.sos), rev.roll(1, dims=1))
        r_in = torch.where(idx <= token_lens.unsqueeze(1), r_in, torch.full_like(ys, cfg.eos))
        r_out = torch.where(idx < token_lens.unsqueeze(1), rev, torch.full_like(ys, IGNORE_ID))
        r_out = torch.where(idx == token_lens.unsqueeze(1), torch.full_like(ys, cfg.eos), r_out)
        in_lens = token_lens + 1
        l_logits = self.decoder.left_decoder(enc, valid, ys_in, in_lens)
        loss_left = label_smoothing_loss(l_logits, ys_out, cfg.lsm_weight) / batch
        if cfg.reverse_weight > 0:
            r_logits = self.decoder.right_decoder(enc, valid, r_in, in_lens)
            loss_right = label_smoothing_loss(r_logits, r_out, cfg.lsm_weight) / batch
        else:
            loss_right = torch.zeros_like(loss_left)
        loss_att = (1 - cfg.reverse_weight) * loss_left + cfg.reverse_weight * loss_right
        loss = cfg.ctc_weight * loss_ctc + (1 - cfg.ctc_weight) * loss_att
        with torch.no_grad():
            pred = l_logits.argmax(-1)
            keep = ys_out != IGNORE_ID
            acc = ((pred == ys_out) & keep).sum().float() / keep.sum().clamp(min=1)
        return loss, {"ctc": loss_ctc.detach(), "att": loss_att.detach(), "acc": acc}

    @torch.no_grad()
    def ctc_log_probs(self, feats, feat_lens, chunk_size: int = -1):
        enc, valid, enc_lens = self.encoder(feats, feat_lens, chunk_size)
        return torch.log_softmax(self.ctc.ctc_lo(enc).float(), dim=-1), enc, valid, enc_lens
